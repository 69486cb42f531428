"""Every query on the team loop's tables (schema: :mod:`baton.store.team_schema`).

Rows are plain tuples in each table's column order (``*_COLUMNS``);
:mod:`baton.team.records` maps them. Table and column names are constants here,
never caller input.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Final

from baton.store.table import Table
from baton.store.tx import Columns, Row, Tx

__all__ = [
    "META",
    "OUTBOX",
    "OWNER",
    "QUESTIONS",
    "REFUSALS",
    "ROLES",
    "SLOTS",
    "TASKS",
    "TEAM_TOPIC",
    "TURNS",
    "WORKTREES",
]

TEAM_TOPIC: Final = "team"
"""The wake-up topic of every write the team loop must react to (outbox, answers, tasks)."""

TASK_COLUMNS: Final = (
    "task_id",
    "role",
    "for_human",
    "sender",
    "recipient",
    "subject",
    "parent",
    "state",
    "job",
    "attempt_id",
    "dispatches",
    "turns",
    "reminders",
    "resumes",
    "report_ref",
    "result",
    "reason",
    "issue_id",
    "review_request",
    "attention_request",
    "workspace",
    "budget",
    "version",
    "created_at",
    "updated_at",
    "files_changed",
)
TURN_COLUMNS: Final = (
    "task_id",
    "dispatch",
    "slot",
    "role",
    "kind",
    "attempt_id",
    "anchor",
    "state",
    "outcome",
    "stop_reason",
    "tool_calls",
    "error",
    "run_id",
    "started_at",
    "ended_at",
    "cancelled_by",
    "prompt_sha256",
)
SLOT_COLUMNS: Final = (
    "slot",
    "role",
    "agent",
    "state",
    "agent_session_id",
    "binding",
    "task_id",
    "attempt_id",
    "pointer_seq",
    "turns",
    "tool_calls",
    "zero_tool_streak",
    "usage",
    "files_changed",
    "last_report_ref",
    "tasks_handled",
    "started_at",
    "updated_at",
    "unapproved_mutations",
    "approval",
)
ROLE_COLUMNS: Final = ("role", "breaker_until", "updated_at")
OWNER_COLUMNS: Final = (
    "id",
    "pid",
    "start_ticks",
    "host",
    "boot",
    "run_id",
    "state",
    "started_at",
    "updated_at",
)
OUTBOX_COLUMNS: Final = (
    "id",
    "kind",
    "slot",
    "role",
    "task_id",
    "attempt_id",
    "data",
    "created_at",
    "consumed_at",
)
QUESTION_COLUMNS: Final = (
    "ask_id",
    "request_id",
    "role",
    "task_id",
    "attempt_id",
    "question",
    "issue_id",
    "state",
    "answer",
    "asked_at",
    "updated_at",
)
WORKTREE_COLUMNS: Final = (
    "root_task",
    "state",
    "branch",
    "path",
    "base_ref",
    "base_commit",
    "head_commit",
    "merge_commit",
    "merge_rule",
    "salvage_ref",
    "reason",
    "created_at",
    "updated_at",
    "version",
)
REFUSAL_COLUMNS: Final = (
    "id",
    "name",
    "reason",
    "message",
    "task_id",
    "recipient",
    "issue_id",
    "quarantined_to",
    "in_place",
    "cleared",
    "at",
)


TASKS: Final = Table("team_tasks", TASK_COLUMNS, "task_id")
SLOTS: Final = Table("team_slots", SLOT_COLUMNS, "slot")
ROLES: Final = Table("team_roles", ROLE_COLUMNS, "role")
OWNER: Final = Table("team_daemon", OWNER_COLUMNS, "id")
"""The one ``baton up`` that owns the project (the table keeps its first name)."""
OUTBOX: Final = Table("team_outbox", OUTBOX_COLUMNS, "id")
QUESTIONS: Final = Table("team_questions", QUESTION_COLUMNS, "ask_id")
REFUSALS: Final = Table("team_refusals", REFUSAL_COLUMNS, "id")
META: Final = Table("team_meta", ("key", "value"), "key")
WORKTREES: Final = Table("team_worktrees", WORKTREE_COLUMNS, "root_task")
"""One row per task tree working on its own branch (:mod:`baton.worktrees`)."""


class _Turns(Table):
    """``team_turns`` has a two-column key (task, dispatch)."""

    def get_turn(self, tx: Tx, task_id: str, dispatch: int) -> Row | None:
        return tx.one(f"{self._select} WHERE task_id = ? AND dispatch = ?", (task_id, dispatch))

    def last(self, tx: Tx, task_id: str) -> Row | None:
        return tx.one(
            f"{self._select} WHERE task_id = ? ORDER BY dispatch DESC LIMIT 1", (task_id,)
        )

    def update_turn(
        self, tx: Tx, task_id: str, dispatch: int, values: Columns, *, state: str
    ) -> int:
        names = list(values)
        self._check(names)
        assignments = ", ".join(f"{n} = ?" for n in names)
        return tx.execute(
            f"UPDATE team_turns SET {assignments} "  # noqa: S608 - checked names
            "WHERE task_id = ? AND dispatch = ? AND state = ?",
            [*values.values(), task_id, dispatch, state],
        )


TURNS: Final = _Turns("team_turns", TURN_COLUMNS, "task_id")


# ------------------------------------------------------------------------ queries


def insert_outbox(tx: Tx, values: Columns) -> int:
    """Append an outbox row; returns its id (writers are serialized, so max is ours)."""
    OUTBOX.insert(tx, values)
    return int(tx.scalar("SELECT max(id) FROM team_outbox") or 0)


def open_outbox(tx: Tx, limit: int = 100) -> list[Row]:
    return OUTBOX.where(tx, "consumed_at IS NULL", order="id", limit=limit)


def consume_outbox(tx: Tx, outbox_id: int, at: str) -> int:
    return OUTBOX.update(tx, outbox_id, {"consumed_at": at}, guard={"consumed_at": None})


def tasks_in_states(tx: Tx, states: Sequence[str]) -> list[Row]:
    marks = ", ".join("?" for _ in states)
    return TASKS.where(tx, f"state IN ({marks})", states, order="created_at, task_id")


def all_tasks(tx: Tx, *, limit: int | None = None) -> list[Row]:
    return TASKS.where(tx, order="updated_at DESC, task_id", limit=limit)


def children_of(tx: Tx, parent: str) -> list[Row]:
    return TASKS.where(tx, "parent = ?", (parent,), order="created_at, task_id")


def open_turns(tx: Tx) -> list[Row]:
    return TURNS.where(tx, "state IN ('dispatched', 'running')", order="task_id, dispatch")


def turns_of(tx: Tx, task_id: str) -> list[Row]:
    return TURNS.where(tx, "task_id = ?", (task_id,), order="dispatch")


def all_slots(tx: Tx) -> list[Row]:
    return SLOTS.where(tx, order="slot")


def all_roles(tx: Tx) -> list[Row]:
    return ROLES.where(tx, order="role")


def open_question(tx: Tx, task_id: str, attempt_id: str) -> Row | None:
    rows = QUESTIONS.where(
        tx,
        "task_id = ? AND attempt_id = ? AND state IN ('pending', 'answered')",
        (task_id, attempt_id),
        order="asked_at DESC",
        limit=1,
    )
    return rows[0] if rows else None


def questions_in_states(tx: Tx, states: Sequence[str]) -> list[Row]:
    marks = ", ".join("?" for _ in states)
    return QUESTIONS.where(tx, f"state IN ({marks})", states, order="asked_at")


def question_by_request(tx: Tx, request_id: str) -> Row | None:
    rows = QUESTIONS.where(tx, "request_id = ?", (request_id,), limit=1)
    return rows[0] if rows else None


def insert_refusal(tx: Tx, values: Columns) -> None:
    REFUSALS.insert(tx, values)


def recent_refusals(tx: Tx, limit: int = 20) -> list[Row]:
    return list(reversed(REFUSALS.where(tx, order="id DESC", limit=limit)))


def refused_in_place(tx: Tx) -> list[Row]:
    """Inbox entries refused in place and remembered (reported once across restarts)."""
    return REFUSALS.where(tx, "in_place = 1 AND cleared = 0", order="id")


def clear_refusals(tx: Tx, names: Sequence[str]) -> int:
    if not names:
        return 0
    marks = ", ".join("?" for _ in names)
    return tx.execute(
        f"UPDATE team_refusals SET cleared = 1 WHERE in_place = 1 AND name IN ({marks})",  # noqa: S608
        list(names),
    )


def count_refusals(tx: Tx) -> int:
    return REFUSALS.count(tx)


def meta(tx: Tx, key: str) -> str | None:
    row = META.get(tx, key)
    return None if row is None else str(row[1])


def set_meta(tx: Tx, key: str, value: str) -> None:
    META.upsert(tx, {"key": key, "value": value})


DEADLINE_REFUSED = "refused at its deadline: "
"""How a turn row's ``error`` starts when a request of the turn got no answer in time."""


def last_turn_started(tx: Tx, role: str) -> str | None:
    """When the latest turn of ``role`` started (None: it never had one)."""
    value = tx.scalar("SELECT MAX(started_at) FROM team_turns WHERE role = ?", (role,))
    return str(value) if value is not None else None


def deadline_refusals(tx: Tx, since: str | None, limit: int = 20) -> list[Row]:
    """``(task_id, role, error)`` of turns that ended after ``since`` with a request
    refused at its deadline, oldest first."""
    pattern = DEADLINE_REFUSED.replace("%", "\\%").replace("_", "\\_") + "%"
    if since is None:
        return tx.all(
            "SELECT task_id, role, error FROM team_turns WHERE error LIKE ? ESCAPE '\\' "
            "ORDER BY ended_at LIMIT ?",
            (pattern, int(limit)),
        )
    return tx.all(
        "SELECT task_id, role, error FROM team_turns WHERE error LIKE ? ESCAPE '\\' "
        "AND ended_at > ? ORDER BY ended_at LIMIT ?",
        (pattern, since, int(limit)),
    )
