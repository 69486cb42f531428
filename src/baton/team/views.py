"""Read models of the team for ``baton status``, ``baton sessions`` and the web dashboard.

Plain frozen data built from one consistent read of the store (and, for the
board, FCoP's stage directories through the port); safe to call from any
process while ``baton up`` runs, never blocking it (WAL readers). Callers on an
event loop run them in a worker thread. Text in these views comes from task
files and agents: every surface makes it display-safe before showing it.

* :func:`team_view`: everything (roles, slots, tasks by stage with parent/child
  links, what waits for the human, refusals, the team loop);
* :func:`slot_views`: the role sessions (``baton sessions``);
* :func:`task_views`: baton's records of the TASKs, newest first.

A TASK's ``status`` is baton's state (:mod:`baton.team.states`), except that a
review the human already answered reads ``review_answered`` at once, before any
``baton up`` applies it.
"""

from __future__ import annotations

import time
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass, field
from typing import Any

from baton.fcop_port.board import open_tasks
from baton.fcop_port.port import FcopPort, TaskInfo
from baton.lifeline import process_start_ticks
from baton.requests.records import record_from_row
from baton.store import requests_sql, team_sql
from baton.store.store import Store
from baton.store.tx import Tx
from baton.team.records import (
    OwnerRecord,
    QuestionRecord,
    RefusalRecord,
    RoleRecord,
    SlotRecord,
    TaskRecord,
)
from baton.team.states import OwnerState, QuestionState, TaskState
from baton.team_config import TeamConfig

__all__ = [
    "BoardTask",
    "RequestRef",
    "RoleConfigView",
    "SlotView",
    "TeamView",
    "slot_views",
    "task_views",
    "team_view",
]


@dataclass(frozen=True, slots=True)
class RequestRef:
    request_id: str
    state: str


@dataclass(frozen=True, slots=True)
class RoleConfigView:
    role: str
    agent: str
    leader: bool
    concurrency: int
    tools: tuple[str, ...]
    permissions: str
    paused_for_s: float


@dataclass(frozen=True, slots=True)
class SlotView:
    """One role session (``baton sessions``)."""

    name: str
    role: str
    agent: str
    status: str
    session_id: str | None
    current_task: str | None
    turns: int
    tool_calls_count: int
    zero_tool_streak: int
    unapproved_mutations: int
    """Mutations the permission-integrity audit found without a recorded decision."""
    approval: str | None
    """Who approves in the session's mode (``self_approves``: run with ``agent_approves``)."""
    usage: Mapping[str, Any]
    files_changed: tuple[str, ...]
    last_report_ref: str | None
    tasks_handled: int
    started_at: str | None
    updated_at: str


@dataclass(frozen=True, slots=True)
class BoardTask:
    """One TASK: FCoP's stage with baton's progress on it."""

    task_id: str
    stage: str
    sender: str
    recipient: str
    subject: str
    parent: str | None
    children: tuple[str, ...]
    attempt_id: str | None
    baton_status: str | None
    role: str | None
    turns: int
    report_ref: str | None
    result: str | None
    note: str
    issue_id: str | None
    review: RequestRef | None
    attention: RequestRef | None
    updated_at: str | None


@dataclass(frozen=True, slots=True)
class TeamView:
    team_loop: str
    """``running`` or ``stopped``: the project's ``baton up`` (``status --json`` and the
    board's API keep calling it ``daemon``, the key scripts have read since the start)."""
    team_loop_pid: int | None
    team_loop_run: str | None
    updated_at: str | None
    team: Mapping[str, str]
    roles: tuple[RoleConfigView, ...]
    slots: tuple[SlotView, ...]
    counts: Mapping[str, int]
    tasks: tuple[BoardTask, ...]
    """Open TASKs (inbox, active, review), then other TASKs baton still tracks."""
    pending_reviews: tuple[Mapping[str, Any], ...]
    questions: tuple[Mapping[str, Any], ...]
    human_tasks: Mapping[str, str]
    attention: tuple[BoardTask, ...]
    refusals: tuple[Mapping[str, Any], ...]
    interrupted: tuple[str, ...] = field(default=())
    unsafe_files: tuple[Mapping[str, str], ...] = field(default=())
    """Files under ``fcop/`` that failed intake's screen: listed, never parsed here."""

    def by_stage(self) -> dict[str, list[BoardTask]]:
        out: dict[str, list[BoardTask]] = {}
        for task in self.tasks:
            out.setdefault(task.stage, []).append(task)
        return out

    # Any: JSON out (``status --json``, the dashboard).
    def to_json(self) -> dict[str, Any]:
        return asdict(self)


@dataclass(frozen=True, slots=True)
class _Snapshot:
    tasks: list[TaskRecord]
    slots: list[SlotRecord]
    roles: list[RoleRecord]
    owner: OwnerRecord | None
    questions: list[QuestionRecord]
    refusals: list[RefusalRecord]
    requests: dict[str, str]


def _snapshot(tx: Tx) -> _Snapshot:
    tasks = [TaskRecord.from_row(r) for r in team_sql.all_tasks(tx)]
    requests: dict[str, str] = {}
    for task in tasks:
        for request_id in (task.review_request, task.attention_request):
            if request_id:
                row = requests_sql.fetch(tx, request_id)
                if row is not None:
                    requests[request_id] = record_from_row(row).state.value
    questions = [
        QuestionRecord.from_row(r)
        for r in team_sql.questions_in_states(tx, (QuestionState.PENDING.value,))
    ]
    for question in questions:
        if question.request_id:
            row = requests_sql.fetch(tx, question.request_id)
            if row is not None:
                requests[question.request_id] = record_from_row(row).state.value
    owner_row = team_sql.OWNER.get(tx, 1)
    return _Snapshot(
        tasks=tasks,
        slots=[SlotRecord.from_row(r) for r in team_sql.all_slots(tx)],
        roles=[RoleRecord.from_row(r) for r in team_sql.all_roles(tx)],
        owner=OwnerRecord.from_row(owner_row) if owner_row else None,
        questions=questions,
        refusals=[RefusalRecord.from_row(r) for r in team_sql.recent_refusals(tx)],
        requests=requests,
    )


def _slot_view(record: SlotRecord) -> SlotView:
    return SlotView(
        name=record.slot,
        role=record.role,
        agent=record.agent,
        status=record.state.value,
        session_id=record.agent_session_id,
        current_task=record.task_id,
        turns=record.turns,
        tool_calls_count=record.tool_calls,
        zero_tool_streak=record.zero_tool_streak,
        unapproved_mutations=record.unapproved_mutations,
        approval=record.approval,
        usage=record.usage.to_json(),
        files_changed=record.files_changed,
        last_report_ref=record.last_report_ref,
        tasks_handled=record.tasks_handled,
        started_at=record.started_at,
        updated_at=record.updated_at,
    )


def slot_views(store: Store) -> list[SlotView]:
    """Every role session baton knows, by slot name."""
    return [_slot_view(s) for s in store.read_tx(lambda tx: _snapshot(tx).slots)]


def task_views(store: Store, *, limit: int = 200) -> list[TaskRecord]:
    """baton's records of the TASKs, most recently changed first."""
    return [
        TaskRecord.from_row(r)
        for r in store.read_tx(lambda tx: team_sql.all_tasks(tx, limit=limit))
    ]


def _status(record: TaskRecord | None, requests: Mapping[str, str]) -> str | None:
    if record is None:
        return None
    if (
        record.state is TaskState.IN_REVIEW
        and record.review_request
        and requests.get(record.review_request) == "answered"
    ):
        return "review_answered"
    return record.state.value


def _board_task(
    info: TaskInfo | None,
    record: TaskRecord | None,
    children: Sequence[str],
    requests: Mapping[str, str],
) -> BoardTask:
    assert info is not None or record is not None

    def ref(request_id: str | None) -> RequestRef | None:
        if not request_id:
            return None
        return RequestRef(request_id, requests.get(request_id, "unknown"))

    return BoardTask(
        task_id=info.task_id if info else record.task_id,  # type: ignore[union-attr]
        stage=info.stage if info else "-",
        sender=info.sender if info else (record.sender if record else ""),
        recipient=info.recipient if info else (record.recipient if record else ""),
        subject=info.subject if info else (record.subject if record else ""),
        parent=info.parent if info else (record.parent if record else None),
        children=tuple(children),
        attempt_id=(info.attempt_id if info else None) or (record.attempt_id if record else None),
        baton_status=_status(record, requests),
        role=record.role if record else None,
        turns=record.turns if record else 0,
        report_ref=record.report_ref if record else None,
        result=record.result if record else None,
        note=(record.reason or "") if record else "",
        issue_id=record.issue_id if record else None,
        review=ref(record.review_request if record else None),
        attention=ref(record.attention_request if record else None),
        updated_at=record.updated_at if record else None,
    )


def team_view(
    store: Store, team: TeamConfig, port: FcopPort | None = None, *, now: float | None = None
) -> TeamView:
    """The whole team as one read model (blocking: call from a worker thread on a loop)."""
    snap = store.read_tx(_snapshot)
    records = {t.task_id: t for t in snap.tasks}
    children: dict[str, list[str]] = {}
    for record in snap.tasks:
        if record.parent:
            children.setdefault(record.parent, []).append(record.task_id)
    board: list[BoardTask] = []
    counts: dict[str, int] = {}
    unsafe: list[Mapping[str, str]] = []
    if port is not None:
        counts = port.stage_counts()
        guarded = open_tasks(port)  # screened in intake's worker: no file can stop a view
        unsafe = [
            {"path": f.origin, "reason": f.verdict.reason, "detail": f.verdict.detail}
            for f in guarded.unsafe
        ]
        for info in guarded.tasks:
            board.append(
                _board_task(
                    info,
                    records.get(info.task_id),
                    children.get(info.task_id, ()),
                    snap.requests,
                )
            )
    shown = {t.task_id for t in board}
    attention = tuple(
        _board_task(None, r, children.get(r.task_id, ()), snap.requests)
        if r.task_id not in shown
        else next(t for t in board if t.task_id == r.task_id)
        for r in snap.tasks
        if r.state in (TaskState.NEEDS_ATTENTION, TaskState.FAILED)
    )
    clock = time.time() if now is None else now
    breakers = {r.role: r.breaker_until or 0.0 for r in snap.roles}
    owner = snap.owner
    running = (
        owner is not None
        and owner.state is OwnerState.RUNNING
        and process_start_ticks(owner.pid) == owner.start_ticks
    )
    pending_reviews = tuple(
        {
            "task_id": r.task_id,
            "request_id": r.review_request,
            "role": r.role,
            "subject": r.subject,
            "report_id": r.report_ref,
            "result": r.result,
            "status": snap.requests.get(r.review_request or "", "unknown"),
        }
        for r in snap.tasks
        if r.state is TaskState.IN_REVIEW and r.review_request
    )
    return TeamView(
        team_loop="running" if running else "stopped",
        team_loop_pid=owner.pid if owner else None,
        team_loop_run=owner.run_id if owner else None,
        updated_at=max((t.updated_at for t in snap.tasks), default=None),
        team={"name": team.name, "leader": team.leader, "human": team.human},
        roles=tuple(
            RoleConfigView(
                role=r.name,
                agent=r.agent,
                leader=r.is_leader,
                concurrency=r.concurrency,
                tools=tuple(r.tools),
                permissions=r.permissions,
                paused_for_s=max(0.0, breakers.get(r.name, 0.0) - clock),
            )
            for r in team.roles.values()
        ),
        slots=tuple(_slot_view(s) for s in snap.slots),
        counts=counts,
        tasks=tuple(board),
        pending_reviews=pending_reviews,
        questions=tuple(
            {
                "request_id": q.request_id,
                "ask_id": q.ask_id,
                "role": q.role,
                "task_id": q.task_id,
                "question": q.question,
                "status": snap.requests.get(q.request_id or "", q.state),
            }
            for q in snap.questions
        ),
        human_tasks={
            r.task_id: r.subject for r in snap.tasks if r.for_human and r.state is TaskState.SEEN
        },
        attention=attention,
        refusals=tuple(asdict(r) for r in snap.refusals),
        interrupted=tuple(r.task_id for r in snap.tasks if r.state is TaskState.INTERRUPTED),
        unsafe_files=tuple(unsafe),
    )
