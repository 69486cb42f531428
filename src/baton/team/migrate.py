"""Moving a project made before the store held the team's state into the store (once).

Before issue 9, ``baton up`` kept its state in side files under
``.baton/coordination/``: ``state.json`` (sessions, task notes, pending reviews,
questions, human tasks, stalls, refusals, breakers, the spool offset),
``bindings/<SLOT>.json`` and ``<SLOT>.current.json`` (identity and pointer),
``spool.jsonl`` (what the MCP tools handed over) and ``refused.json`` (inbox
entries refused in place). On the first start of a newer baton they become rows
in one transaction (with a ``team.task.changed`` event per migrated TASK), then
the files move to ``.baton/coordination/migrated-<time>/`` (kept, never read
again). ``team_meta`` records that the migration happened, so a crash between
the commit and the move only leaves the move to redo.

What maps where: a task note becomes a :class:`~baton.team.records.TaskRecord`
(``done`` → settled, ``working`` → interrupted, ``stalled`` → needs attention
with an inbox request, anything else → the state FCoP's stage implies, which the
next evaluation re-derives anyway); a pending review or question is linked to
the ledger request the old team loop opened (``review:TASK:ATTEMPT``,
``ask:ID``); session counters go to the slot rows; unconsumed spool lines become
outbox rows; ``refused.json`` names become remembered refusals; breakers become
role rows. Bindings and pointers are not needed (the team loop writes fresh ones).
"""

from __future__ import annotations

import dataclasses
import json
import logging
import os
from collections.abc import Mapping
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from baton.events.model import Payload, TeamTaskChanged
from baton.events.sequencer import utc_now
from baton.requests.ledger import Change, Ledger, rpc_key
from baton.role_tools.binding import Binding
from baton.store import requests_sql, team_sql
from baton.store.journal import Journal
from baton.store.store import Store
from baton.store.tx import Tx
from baton.team.attention import retry_request
from baton.team.records import (
    QuestionRecord,
    RefusalRecord,
    RoleRecord,
    SlotRecord,
    TaskRecord,
    UsageTotals,
)
from baton.team.states import QuestionState, SlotState, TaskState
from baton.team_config import TeamConfig

__all__ = ["LEGACY_FILES", "MIGRATED_KEY", "migrate_legacy_state"]

log = logging.getLogger("baton.team.migrate")

MIGRATED_KEY = "legacy.coordination_files"
LEGACY_FILES = ("state.json", "spool.jsonl", "refused.json", "bindings")
_MAX_STATE_BYTES = 64 * 1024 * 1024
"""The old state file was bounded (500 settled tasks); anything bigger is not ours."""

_STATUS = {
    "done": TaskState.SETTLED,
    "working": TaskState.INTERRUPTED,
    "stalled": TaskState.NEEDS_ATTENTION,
    "waiting_children": TaskState.WAITING_CHILDREN,
    "waiting_human": TaskState.IN_REVIEW,
    "reported": TaskState.IN_REVIEW,
    "waiting_review": TaskState.IN_REVIEW,
    "queued": TaskState.SEEN,
}


def _dict(value: Any) -> dict[str, Any]:
    return value if isinstance(value, dict) else {}


def _str(value: Any) -> str | None:
    return value if isinstance(value, str) and value else None


def _read_state(root: Path) -> dict[str, Any]:
    path = root / "state.json"
    try:
        if path.stat().st_size > _MAX_STATE_BYTES:
            log.warning("%s is too large to be baton's; not migrated", path)
            return {}
        raw = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}
    return raw if isinstance(raw, dict) and raw.get("version") == 1 else {}


def _read_spool(root: Path, offset: int) -> list[dict[str, Any]]:
    try:
        with (root / "spool.jsonl").open("rb") as stream:
            stream.seek(max(0, offset))
            data = stream.read(16 * 1024 * 1024)
    except OSError:
        return []
    out = []
    for line in data.splitlines(keepends=True):
        if not line.endswith(b"\n"):
            break
        try:
            value = json.loads(line)
        except ValueError:
            continue
        if isinstance(value, dict) and isinstance(value.get("kind"), str):
            out.append(value)
    return out


def _read_refused(root: Path) -> dict[str, str | None]:
    try:
        raw = json.loads((root / "refused.json").read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}
    if not isinstance(raw, dict):
        return {}
    return {str(k): v if isinstance(v, str) else None for k, v in raw.items()}


def _open_request(tx: Tx, jsonrpc_id: str) -> str | None:
    key = rpc_key(jsonrpc_id)
    assert key is not None
    row = requests_sql.find_open_by_rpc_id(tx, key)
    return str(row[0]) if row is not None else None


async def migrate_legacy_state(
    state_dir: Path, store: Store, journal: Journal, team: TeamConfig, *, run_id: str = ""
) -> bool:
    """Migrate ``state_dir/coordination``'s side files into ``store`` once; True if it did."""
    root = state_dir / "coordination"
    present = [name for name in LEGACY_FILES if (root / name).exists()]
    if not present:
        return False
    done = await store.aread(lambda tx: team_sql.meta(tx, MIGRATED_KEY))
    if done is None:
        await _migrate(root, store, journal, team, run_id)
    _retire(root, present)
    return done is None


async def _migrate(
    root: Path, store: Store, journal: Journal, team: TeamConfig, run_id: str
) -> None:
    state = _read_state(root)
    now = utc_now()
    ledger = Ledger(store)
    tasks: dict[str, TaskRecord] = {}
    payloads: list[Payload] = []
    attention: list[Change] = []

    def task_for(task_id: str, raw: Mapping[str, Any]) -> TaskRecord:
        status = str(raw.get("status", "queued"))
        state_ = _STATUS.get(status, TaskState.CLAIMED)
        return TaskRecord(
            task_id=task_id,
            role=str(raw.get("role") or ""),
            state=state_,
            created_at=str(raw.get("updated_at") or now),
            updated_at=now,
            subject=str(raw.get("subject") or ""),
            parent=_str(raw.get("parent")),
            attempt_id=_str(raw.get("attempt_id")),
            turns=int(raw.get("turns") or 0),
            reminders=int(raw.get("reminders") or 0),
            report_ref=_str(raw.get("report_ref")),
            reason=_str(raw.get("note")),
        )

    for task_id, raw in _dict(state.get("tasks")).items():
        if isinstance(raw, dict) and isinstance(task_id, str):
            tasks[task_id] = task_for(task_id, raw)
    for task_id, subject in _dict(state.get("human_tasks")).items():
        tasks.setdefault(
            task_id,
            TaskRecord(
                task_id=task_id,
                role=team.human,
                state=TaskState.SEEN,
                created_at=now,
                updated_at=now,
                for_human=True,
                subject=str(subject),
            ),
        )
    for stall in state.get("stalls") or []:
        if not isinstance(stall, dict) or not isinstance(stall.get("task_id"), str):
            continue
        record = tasks.get(stall["task_id"])
        if record is not None and record.state is TaskState.NEEDS_ATTENTION:
            reason = str(stall.get("reason") or "stalled")
            change = retry_request(
                ledger,
                run_id=run_id or "migrated",
                key=f"attention:{record.task_id}:migrated",
                record=record,
                reason=reason,
            )
            attention.append(change)
            tasks[record.task_id] = dataclasses.replace(
                record,
                reason=reason,
                issue_id=_str(stall.get("issue_id")),
                attention_request=change.records[0].request_id,
            )
    reviews = [r for r in _dict(state.get("pending_reviews")).values() if isinstance(r, dict)]
    questions = [q for q in _dict(state.get("questions")).values() if isinstance(q, dict)]
    sessions = [s for s in _dict(state.get("sessions")).values() if isinstance(s, dict)]
    spool = _read_spool(root, int(state.get("spool_offset") or 0))
    refused = _read_refused(root)
    breakers = _dict(state.get("breakers"))
    history = [r for r in state.get("refusals") or [] if isinstance(r, dict)]
    for record in tasks.values():
        payloads.append(
            TeamTaskChanged(
                task_id=record.task_id,
                role=record.role,
                from_state=None,
                to_state=record.state.value,
                event="migrate",
                attempt_id=record.attempt_id,
                reason="moved from the pre-store state.json",
            )
        )
    for change in attention:
        payloads.extend(change.payloads)

    def write(tx: Tx) -> None:
        if team_sql.meta(tx, MIGRATED_KEY) is not None:
            return
        for record in tasks.values():
            values = dict(record.row())
            if record.state is TaskState.IN_REVIEW:
                review = next(
                    (
                        r
                        for r in reviews
                        if r.get("task_id") == record.task_id and r.get("status") == "pending"
                    ),
                    None,
                )
                if review is not None:
                    values["review_request"] = _open_request(tx, f"review:{review.get('key')}")
                    values["report_ref"] = _str(review.get("report_id")) or values["report_ref"]
                    values["result"] = _str(review.get("result"))
            if team_sql.TASKS.get(tx, record.task_id) is None:
                team_sql.TASKS.insert(tx, values)
        for change in attention:
            change.apply(tx)
        for raw in questions:
            ask_id = _str(raw.get("request_id"))
            if ask_id is None or team_sql.QUESTIONS.get(tx, ask_id) is not None:
                continue
            status = str(raw.get("status") or "pending")
            team_sql.QUESTIONS.insert(
                tx,
                QuestionRecord(
                    ask_id=ask_id,
                    role=str(raw.get("role") or ""),
                    question=str(raw.get("question") or ""),
                    state=(
                        QuestionState(status)
                        if status in set(QuestionState)
                        else QuestionState.PENDING
                    ),
                    asked_at=str(raw.get("asked_at") or now),
                    updated_at=now,
                    request_id=_open_request(tx, f"ask:{ask_id}"),
                    task_id=_str(raw.get("task_id")),
                    attempt_id=_str(raw.get("attempt_id")),
                    issue_id=_str(raw.get("issue_id")),
                    answer=_str(raw.get("answer")),
                ).row(),
            )
        for raw in sessions:
            name = _str(raw.get("name"))
            spec = team.roles.get(str(raw.get("role") or ""))
            if name is None or spec is None or team_sql.SLOTS.get(tx, name) is not None:
                continue
            team_sql.SLOTS.insert(
                tx,
                SlotRecord(
                    slot=name,
                    role=spec.name,
                    agent=str(raw.get("agent") or spec.agent),
                    state=SlotState.CLOSED,
                    binding=Binding(
                        fcop_root=Path("/"),
                        role=spec.name,
                        session_name=name,
                        leader=team.leader,
                        human=team.human,
                        team_roles=team.role_names,
                        allowed_tools=spec.tools,
                    ),
                    updated_at=now,
                    agent_session_id=_str(raw.get("session_id")),
                    turns=int(raw.get("turns") or 0),
                    tool_calls=int(raw.get("tool_calls_count") or 0),
                    usage=UsageTotals.from_json(raw.get("usage")),
                    files_changed=tuple(str(f) for f in raw.get("files_changed") or [])[:200],
                    last_report_ref=_str(raw.get("last_report_ref")),
                    tasks_handled=int(raw.get("tasks_handled") or 0),
                    started_at=_str(raw.get("started_at")),
                ).row(),
            )
        for raw in spool:
            team_sql.insert_outbox(
                tx,
                {
                    "kind": str(raw.get("kind")),
                    "slot": str(raw.get("role") or ""),
                    "role": str(raw.get("role") or ""),
                    "task_id": _str(raw.get("task_id")),
                    "attempt_id": _str(raw.get("attempt_id")),
                    "data": json.dumps(_dict(raw.get("data")), sort_keys=True),
                    "created_at": str(raw.get("at") or now),
                },
            )
        for raw in history:
            team_sql.insert_refusal(
                tx,
                RefusalRecord(
                    name=str(raw.get("name") or ""),
                    reason=str(raw.get("reason") or ""),
                    message=str(raw.get("message") or ""),
                    at=str(raw.get("at") or now),
                    task_id=_str(raw.get("task_id")),
                    issue_id=_str(raw.get("issue_id")),
                    quarantined_to=_str(raw.get("quarantined_to")),
                    in_place=str(raw.get("name")) in refused,
                ).row(),
            )
        known = {str(r.get("name")) for r in history}
        for name, issue in refused.items():
            if name not in known:
                team_sql.insert_refusal(
                    tx,
                    RefusalRecord(
                        name=name,
                        reason="unknown_recipient",
                        message="refused in place before the store (refused.json)",
                        at=now,
                        issue_id=issue,
                        in_place=True,
                    ).row(),
                )
        for role, until in breakers.items():
            if isinstance(role, str) and isinstance(until, int | float):
                team_sql.ROLES.upsert(
                    tx, RoleRecord(role=role, updated_at=now, breaker_until=float(until)).row()
                )
        team_sql.set_meta(tx, MIGRATED_KEY, now)

    await journal.commit(payloads, write)


def _retire(root: Path, present: list[str]) -> None:
    stamp = datetime.now(UTC).strftime("%Y%m%dT%H%M%SZ")
    target = root / f"migrated-{stamp}"
    target.mkdir(mode=0o700, exist_ok=True)
    for name in present:
        source = root / name
        if source.exists():
            os.replace(source, target / name)
