"""The team board's read model: one frozen snapshot, and where it comes from today.

The board page, its JSON API and its live stream only ever see a
:class:`BoardSnapshot` (plain frozen dataclasses, JSON by :func:`snapshot_data`).
Where the facts come from is one :class:`BoardSource`:
:class:`TeamViewBoardSource` reads the team loop's read models in the store
(:func:`baton.team.views.team_view`: slots, task records, parent/child links),
FCoP's settled TASKs, and the ledger's pending requests (who is waiting for the
human).

Session states, decided in one pure function (:func:`session_state`):

=================  ==========================================================
``waiting``        a pending request of this role's agent session waits for you
``stalled``        its agent has gone silent in a running turn (``turn.stalled``), its
                   current task stalled, or the role's zero-tool breaker is open
``attention``      the session failed
``working``        a turn is running
``idle``           none of the above (no session yet, or between tasks)
=================  ==========================================================

Length: one read model (the snapshot dataclasses) and its two sources, kept together so both sources are held to the same shape.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import asdict, dataclass, field, replace
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, Literal, Protocol

from baton.app.facade.fcop import CoordinationContext, FcopPort, Stage, TaskInfo
from baton.app.facade.requests import RequestRecord, ReviewRequest
from baton.app.facade.runs import stall_text
from baton.app.facade.store import LiveTurn, Store, live_turns
from baton.jsontypes import JsonObject

__all__ = [
    "STAGES",
    "BoardSnapshot",
    "BoardSource",
    "RoleView",
    "TaskView",
    "TeamViewBoardSource",
    "UsageView",
    "open_board",
    "session_state",
    "snapshot_data",
]

SessionState = Literal["idle", "working", "waiting", "stalled", "attention"]
STAGES: tuple[str, ...] = ("inbox", "active", "review", "done", "archive")
MAX_DONE_SHOWN = 50
"""Settled tasks on the board (newest first); FCoP keeps them all."""


@dataclass(frozen=True, slots=True)
class UsageView:
    input_tokens: int
    output_tokens: int
    thinking_tokens: int
    cost_usd: float
    reported_turns: int


@dataclass(frozen=True, slots=True)
class RoleView:
    """One role slot: its agent, what its session is doing, and its counters."""

    name: str
    role: str
    agent: str
    leader: bool
    state: SessionState
    current_task: str | None
    turns: int
    tool_calls: int
    usage: UsageView | None
    """None: the agent reported no usage ("unavailable", never zero)."""
    waiting_requests: tuple[str, ...] = ()
    note: str = ""
    updated_at: str | None = None
    silence: str = ""
    """Its running turn's stall, in words (``the agent has said nothing for …``), or ``""``."""
    turn_running: bool = False
    """A turn is with the agent (the team loop's slot is ``working``): it can be cancelled."""


@dataclass(frozen=True, slots=True)
class TaskView:
    task_id: str
    subject: str
    stage: str
    sender: str
    recipient: str
    parent: str | None
    children: tuple[str, ...] = ()
    status: str | None = None
    """baton's note on the task (``working``, ``waiting_human``, ``stalled`` ...)."""
    turns: int = 0
    report_ref: str | None = None
    note: str = ""
    created_at: str = ""
    result: str | None = None
    """The result its report gave (``done``, ``blocked``, ``failed``): a task can be in FCoP's
    done stage with a report that says it was blocked, and the board says so."""


@dataclass(frozen=True, slots=True)
class BoardSnapshot:
    project: str
    team: str
    leader: str
    human: str
    daemon: str
    """``running`` or ``stopped``: the project's ``baton up`` (the API's key since the start)."""
    updated_at: str | None
    roles: tuple[RoleView, ...]
    tasks: tuple[TaskView, ...]
    counts: Mapping[str, int]
    stalls: tuple[Mapping[str, Any], ...] = ()
    refusals: tuple[Mapping[str, Any], ...] = ()
    pending_requests: int = 0
    notes: tuple[str, ...] = field(default_factory=tuple)
    """What the board could not read (shown, never hidden)."""
    budgets: tuple[Mapping[str, Any], ...] = ()
    """Every scope with a ``[budget]`` limit: its spend against the limits in force
    (``baton.app.budgets``); a reached one can be raised from the page."""


class BoardSource(Protocol):
    """Where the board's facts come from (blocking calls; run them in a worker thread)."""

    @property
    def port(self) -> FcopPort:
        """The project's FCoP port (task documents are read through it)."""
        ...

    @property
    def role_names(self) -> tuple[str, ...]: ...

    def snapshot(self, pending: Sequence[RequestRecord]) -> BoardSnapshot: ...

    def files_changed(self, role: str) -> list[str]:
        """What the role's sessions reported as changed (for a review's diff)."""
        ...


def open_board(project_dir: Path, store: Store) -> BoardSource:
    """The board of the project, from the team loop's read models (``baton.team.views``)."""
    from baton.app.facade.fcop import open_context
    from baton.app.facade.team import views

    return TeamViewBoardSource(open_context(project_dir), store, views)


def _done_tasks(port: FcopPort, notes: list[str]) -> list[TaskInfo]:
    """The newest settled TASKs (FCoP keeps them all; the board shows a few)."""
    settled: tuple[Stage, ...] = ("done", "archive")
    infos: list[TaskInfo] = []
    for stage in settled:
        try:
            infos += port.list_stage(stage)
        except Exception as exc:  # a stage that cannot be listed is a note; the board renders
            notes.append(f"cannot list {stage}: {exc}")
    infos.sort(key=lambda t: t.created_at, reverse=True)
    return infos[:MAX_DONE_SHOWN]


def _waiting_by_session(pending: Sequence[RequestRecord]) -> dict[str, list[str]]:
    out: dict[str, list[str]] = {}
    for request in pending:
        if request.session_id:
            out.setdefault(request.session_id, []).append(request.request_id)
    return out


def snapshot_data(snapshot: BoardSnapshot) -> JsonObject:
    """The snapshot as JSON data (``GET /api/team``)."""
    data = asdict(snapshot)
    data["counts"] = dict(snapshot.counts)
    return data


def session_state(
    *,
    status: str,
    task_status: str | None,
    waiting: bool,
    breaker_open: bool,
    turn_stalled: bool = False,
) -> SessionState:
    """The one rule mapping the team loop's notes to what the board shows (see module doc)."""
    if waiting:
        return "waiting"
    if turn_stalled or task_status == "stalled" or breaker_open:
        return "stalled"
    if status == "failed" or task_status in ("needs_attention", "failed"):
        return "attention"
    if status == "working":
        return "working"
    return "idle"


def _usage(raw: Mapping[str, Any]) -> UsageView | None:
    if raw.get("availability") != "reported":
        return None
    return UsageView(
        input_tokens=int(raw.get("input_tokens", 0)),
        output_tokens=int(raw.get("output_tokens", 0)),
        thinking_tokens=int(raw.get("thinking_tokens", 0)),
        cost_usd=float(raw.get("cost_usd", 0.0)),
        reported_turns=int(raw.get("reported_turns", 0)),
    )


def _children(tasks: Iterable[TaskView]) -> dict[str, list[str]]:
    out: dict[str, list[str]] = {}
    for task in tasks:
        if task.parent:
            out.setdefault(task.parent, []).append(task.task_id)
    return out


def review_task(record: RequestRecord) -> str | None:
    """The task a review request is about (links a card to the board)."""
    doc = record.document
    return doc.task_id if isinstance(doc, ReviewRequest) else None


class TeamViewBoardSource:
    """The team loop's read models in the store (``baton.team.views.team_view``)."""

    # Any: baton.team.views and its TeamView, handed in by the app: the web never imports
    # the team loop's modules (tests/test_architecture.py).
    def __init__(self, ctx: CoordinationContext, store: Store, views: Any) -> None:
        self._ctx = ctx
        self._store = store
        self._views = views

    @property
    def port(self) -> FcopPort:
        return self._ctx.port

    @property
    def role_names(self) -> tuple[str, ...]:
        return tuple(self._ctx.team.role_names)

    def files_changed(self, role: str) -> list[str]:
        files: list[str] = []
        for slot in self._views.slot_views(self._store):
            if slot.role == role:
                files += [f for f in slot.files_changed if f not in files]
        return files

    def snapshot(self, pending: Sequence[RequestRecord]) -> BoardSnapshot:
        view = self._views.team_view(self._store, self._ctx.team, self._ctx.port)
        # Intake screened these and did not parse them: a note each, never a card.
        notes = [f"unsafe file {u['path']}: {u['reason']}" for u in view.unsafe_files]
        snapshot = snapshot_from_team_view(
            view,
            project=str(self._ctx.project_dir),
            done=_done_tasks(self._ctx.port, notes),
            pending=pending,
            descriptions={r.name: r.description for r in self._ctx.team.roles.values()},
            notes=notes,
            live=live_turns(self._store),
        )
        return replace(snapshot, budgets=self._budgets(notes))

    def _budgets(self, notes: list[str]) -> tuple[Mapping[str, Any], ...]:
        from baton.app.budgets import budget_report
        from baton.app.facade.config import load_config

        try:
            config = load_config(self._ctx.project_dir).budget
            report = budget_report(self._store, config, runs=3)
        except Exception as exc:  # the board still shows the rest
            notes.append(f"cannot read the budgets: {exc}")
            return ()
        soft = config.soft
        return tuple(s.to_json(soft) for s in report.standings if s.limits)


# Any: a baton.team.views.TeamView (see TeamViewBoardSource).
def snapshot_from_team_view(
    view: Any,
    *,
    project: str,
    done: Sequence[TaskInfo],
    pending: Sequence[RequestRecord],
    descriptions: Mapping[str, str],
    notes: Sequence[str] = (),
    live: Sequence[LiveTurn] = (),
    now: datetime | None = None,
) -> BoardSnapshot:
    """A ``baton.team.views.TeamView`` as the board's snapshot (pure; ``live``: the running
    turns, :func:`baton.store.live_turns.live_turns`, as of ``now``)."""
    at = now or datetime.now(UTC)
    silences = {
        t.session_id: stall_text(t.silence_ms(at), t.timeout_in(at))
        for t in live
        if t.stalled and t.session_id
    }
    tasks = [
        TaskView(
            task_id=t.task_id,
            subject=t.subject,
            stage=t.stage,
            sender=t.sender,
            recipient=t.recipient,
            parent=t.parent,
            children=tuple(t.children),
            status=t.baton_status,
            turns=t.turns,
            report_ref=t.report_ref,
            note=t.note,
            result=t.result,
        )
        for t in view.tasks
    ]
    shown = {t.task_id for t in tasks}
    tasks += [
        TaskView(
            task_id=i.task_id,
            subject=i.subject,
            stage=i.stage,
            sender=i.sender,
            recipient=i.recipient,
            parent=i.parent,
            created_at=i.created_at,
        )
        for i in done
        if i.task_id not in shown
    ]
    kids = _children(tasks)
    tasks = [
        t if t.children else TaskView(**{**asdict(t), "children": tuple(kids.get(t.task_id, ()))})
        for t in tasks
    ]
    status_of = {t.task_id: t.status for t in tasks}
    paused = {r.role: r.paused_for_s > 0 for r in view.roles}
    leaders = {r.role for r in view.roles if r.leader}
    waiting = _waiting_by_session(pending)
    roles: list[RoleView] = []
    for slot in view.slots:
        asks = tuple(waiting.get(slot.session_id or "", ()))
        silence = silences.get(slot.session_id or "", "")
        roles.append(
            RoleView(
                name=slot.name,
                role=slot.role,
                agent=slot.agent,
                leader=slot.role in leaders,
                state=session_state(
                    status=slot.status,
                    task_status=status_of.get(slot.current_task or ""),
                    waiting=bool(asks),
                    breaker_open=paused.get(slot.role, False),
                    turn_stalled=bool(silence),
                ),
                current_task=slot.current_task,
                turns=slot.turns,
                tool_calls=slot.tool_calls_count,
                usage=_usage(slot.usage),
                waiting_requests=asks,
                note=descriptions.get(slot.role, ""),
                updated_at=slot.updated_at,
                silence=silence,
                turn_running=slot.status == "working",
            )
        )
    with_slot = {r.role for r in roles}
    roles += [
        RoleView(
            name=r.role,
            role=r.role,
            agent=r.agent,
            leader=r.leader,
            state="stalled" if r.paused_for_s > 0 else "idle",
            current_task=None,
            turns=0,
            tool_calls=0,
            usage=None,
            note=descriptions.get(r.role, ""),
        )
        for r in view.roles
        if r.role not in with_slot
    ]
    return BoardSnapshot(
        project=project,
        team=view.team.get("name", ""),
        leader=view.team.get("leader", ""),
        human=view.team.get("human", ""),
        daemon=view.team_loop,
        updated_at=view.updated_at,
        roles=tuple(sorted(roles, key=lambda r: r.name)),
        tasks=tuple(tasks),
        counts=dict(view.counts),
        stalls=tuple(
            {
                "task_id": t.task_id,
                "role": t.role or t.recipient,
                "reason": t.note or t.baton_status,
            }
            for t in view.attention
        ),
        refusals=tuple(view.refusals),
        pending_requests=len(pending),
        notes=tuple(notes),
    )
