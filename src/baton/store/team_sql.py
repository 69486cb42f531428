"""The team loop's tables: schema and every query (``baton up``'s durable state).

What FCoP has no place for lives here, and only here (the retired
``state.json``, binding, pointer, spool and refused files are migrated in by
:mod:`baton.team.migrate`):

``team_tasks``
    baton's view of each TASK (its state in :mod:`baton.team.states`), the
    attempt, per-attempt turn counts, the report, why it needs attention, the
    human requests it has open, and room for a per-task workspace and budget.
``team_turns``
    one row per dispatch (a prompt to a slot): ``dispatched`` → ``running`` →
    ``finished`` (with the outcome) or ``interrupted``. A turn that finished is
    never run again; one that did not is re-prompted with its context.
``team_slots``
    one row per role slot: its session state and agent session id, the binding
    its MCP server reads (identity, tools), the task pointer, counters.
``team_roles``
    per-role state (the zero-tool-call breaker).
``team_daemon``
    the one ``baton up`` that owns the project (pid and start time, checked by
    the MCP servers before every write).
``team_outbox``
    what the role MCP tools hand the daemon (``ask_human``, review decisions).
``team_questions``, ``team_refusals``, ``team_meta``
    ``ask_human`` questions, refused inbox entries, one-off facts (migrations).

Rows are plain tuples in each table's column order (``*_COLUMNS``);
:mod:`baton.team.records` maps them. Table and column names are constants here,
never caller input.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, Final

from baton.errors import StoreError
from baton.store.migrations import Migration
from baton.store.tx import Row, Tx

__all__ = [
    "DAEMON",
    "META",
    "OUTBOX",
    "QUESTIONS",
    "REFUSALS",
    "ROLES",
    "SLOTS",
    "TASKS",
    "TEAM_MIGRATIONS",
    "TEAM_TOPIC",
    "TURNS",
    "Table",
]

TEAM_TOPIC: Final = "team"
"""The wake-up topic of every write the daemon must react to (outbox, answers, tasks)."""

TEAM_MIGRATIONS: tuple[Migration, ...] = (
    Migration(
        "team.0001_tables",
        """
        CREATE TABLE team_tasks (
            task_id        TEXT PRIMARY KEY,
            role           TEXT NOT NULL,
            for_human      INTEGER NOT NULL DEFAULT 0,
            sender         TEXT NOT NULL DEFAULT '',
            recipient      TEXT NOT NULL DEFAULT '',
            subject        TEXT NOT NULL DEFAULT '',
            parent         TEXT,
            state          TEXT NOT NULL,
            job            TEXT,
            attempt_id     TEXT,
            dispatches     INTEGER NOT NULL DEFAULT 0,
            turns          INTEGER NOT NULL DEFAULT 0,
            reminders      INTEGER NOT NULL DEFAULT 0,
            resumes        INTEGER NOT NULL DEFAULT 0,
            report_ref     TEXT,
            result         TEXT,
            reason         TEXT,
            issue_id       TEXT,
            review_request TEXT,
            attention_request TEXT,
            workspace      TEXT,
            budget         TEXT,
            version        INTEGER NOT NULL DEFAULT 1,
            created_at     TEXT NOT NULL,
            updated_at     TEXT NOT NULL
        );
        CREATE INDEX team_tasks_by_state ON team_tasks (state);
        CREATE INDEX team_tasks_by_parent ON team_tasks (parent) WHERE parent IS NOT NULL;

        CREATE TABLE team_turns (
            task_id     TEXT NOT NULL,
            dispatch    INTEGER NOT NULL,
            slot        TEXT NOT NULL,
            role        TEXT NOT NULL,
            kind        TEXT NOT NULL,
            attempt_id  TEXT,
            anchor      TEXT,
            state       TEXT NOT NULL,
            outcome     TEXT,
            stop_reason TEXT,
            tool_calls  INTEGER NOT NULL DEFAULT 0,
            error       TEXT,
            run_id      TEXT,
            started_at  TEXT NOT NULL,
            ended_at    TEXT,
            PRIMARY KEY (task_id, dispatch)
        );
        CREATE INDEX team_turns_open ON team_turns (state)
            WHERE state IN ('dispatched', 'running');

        CREATE TABLE team_slots (
            slot             TEXT PRIMARY KEY,
            role             TEXT NOT NULL,
            agent            TEXT NOT NULL,
            state            TEXT NOT NULL,
            agent_session_id TEXT,
            binding          TEXT NOT NULL,
            task_id          TEXT,
            attempt_id       TEXT,
            pointer_seq      INTEGER NOT NULL DEFAULT 0,
            turns            INTEGER NOT NULL DEFAULT 0,
            tool_calls       INTEGER NOT NULL DEFAULT 0,
            zero_tool_streak INTEGER NOT NULL DEFAULT 0,
            usage            TEXT NOT NULL DEFAULT '{}',
            files_changed    TEXT NOT NULL DEFAULT '[]',
            last_report_ref  TEXT,
            tasks_handled    INTEGER NOT NULL DEFAULT 0,
            started_at       TEXT,
            updated_at       TEXT NOT NULL
        );

        CREATE TABLE team_roles (
            role          TEXT PRIMARY KEY,
            breaker_until REAL,
            updated_at    TEXT NOT NULL
        );

        CREATE TABLE team_daemon (
            id          INTEGER PRIMARY KEY CHECK (id = 1),
            pid         INTEGER NOT NULL,
            start_ticks INTEGER NOT NULL,
            host        TEXT NOT NULL,
            boot        TEXT NOT NULL,
            run_id      TEXT NOT NULL,
            state       TEXT NOT NULL,
            started_at  TEXT NOT NULL,
            updated_at  TEXT NOT NULL
        );

        CREATE TABLE team_outbox (
            id          INTEGER PRIMARY KEY,
            kind        TEXT NOT NULL,
            slot        TEXT NOT NULL,
            role        TEXT NOT NULL,
            task_id     TEXT,
            attempt_id  TEXT,
            data        TEXT NOT NULL,
            created_at  TEXT NOT NULL,
            consumed_at TEXT
        );
        CREATE INDEX team_outbox_open ON team_outbox (id) WHERE consumed_at IS NULL;

        CREATE TABLE team_questions (
            ask_id      TEXT PRIMARY KEY,
            request_id  TEXT,
            role        TEXT NOT NULL,
            task_id     TEXT,
            attempt_id  TEXT,
            question    TEXT NOT NULL,
            issue_id    TEXT,
            state       TEXT NOT NULL,
            answer      TEXT,
            asked_at    TEXT NOT NULL,
            updated_at  TEXT NOT NULL
        );
        CREATE INDEX team_questions_by_task ON team_questions (task_id, attempt_id);

        CREATE TABLE team_refusals (
            id             INTEGER PRIMARY KEY,
            name           TEXT NOT NULL,
            reason         TEXT NOT NULL,
            message        TEXT NOT NULL,
            task_id        TEXT,
            recipient      TEXT,
            issue_id       TEXT,
            quarantined_to TEXT,
            in_place       INTEGER NOT NULL DEFAULT 0,
            cleared        INTEGER NOT NULL DEFAULT 0,
            at             TEXT NOT NULL
        );
        CREATE INDEX team_refusals_in_place ON team_refusals (name)
            WHERE in_place = 1 AND cleared = 0;

        CREATE TABLE team_meta (
            key   TEXT PRIMARY KEY,
            value TEXT NOT NULL
        );
        """,
    ),
)

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
)
ROLE_COLUMNS: Final = ("role", "breaker_until", "updated_at")
DAEMON_COLUMNS: Final = (
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


class Table:
    """One team table: its name, columns and key, with checked, parameterized SQL."""

    def __init__(self, name: str, columns: Sequence[str], key: str) -> None:
        self.name = name
        self.columns = tuple(columns)
        self.key = key
        self._known = frozenset(columns)
        self._select = f"SELECT {', '.join(self.columns)} FROM {name}"  # noqa: S608 - constants

    def _check(self, names: Sequence[str]) -> None:
        unknown = set(names) - self._known
        if unknown:
            raise StoreError(f"{self.name}: unknown columns {sorted(unknown)}")

    def get(self, tx: Tx, key: Any) -> Row | None:
        return tx.one(f"{self._select} WHERE {self.key} = ?", (key,))

    def where(
        self,
        tx: Tx,
        clause: str = "",
        params: Sequence[Any] = (),
        *,
        order: str | None = None,
        limit: int | None = None,
    ) -> list[Row]:
        """Rows matching ``clause`` (a constant SQL fragment with ``?`` parameters)."""
        sql = self._select + (f" WHERE {clause}" if clause else "")
        sql += f" ORDER BY {order or self.key}"
        values = list(params)
        if limit is not None:
            sql += " LIMIT ?"
            values.append(int(limit))
        return tx.all(sql, values)

    def insert(self, tx: Tx, values: Mapping[str, Any]) -> None:
        names = list(values)
        self._check(names)
        tx.execute(
            f"INSERT INTO {self.name} ({', '.join(names)}) "  # noqa: S608 - checked names
            f"VALUES ({', '.join('?' for _ in names)})",
            [values[n] for n in names],
        )

    def upsert(self, tx: Tx, values: Mapping[str, Any]) -> None:
        """Insert, or update every given column of the row with the same key."""
        names = list(values)
        self._check(names)
        if self.key not in values:
            raise StoreError(f"{self.name}: upsert needs {self.key}")
        updates = ", ".join(f"{n} = excluded.{n}" for n in names if n != self.key)
        tx.execute(
            f"INSERT INTO {self.name} ({', '.join(names)}) "  # noqa: S608 - checked names
            f"VALUES ({', '.join('?' for _ in names)}) "
            f"ON CONFLICT ({self.key}) DO UPDATE SET {updates}",
            [values[n] for n in names],
        )

    def update(
        self,
        tx: Tx,
        key: Any,
        values: Mapping[str, Any],
        *,
        guard: Mapping[str, Any] | None = None,
    ) -> int:
        """Update the row with ``key`` where every ``guard`` column still has its value."""
        names = list(values)
        guard = dict(guard or {})
        self._check([*names, *guard])
        assignments = ", ".join(f"{n} = ?" for n in names)
        conditions = "".join(
            f" AND {n} IS NULL" if v is None else f" AND {n} = ?" for n, v in guard.items()
        )
        return tx.execute(
            f"UPDATE {self.name} SET {assignments} WHERE {self.key} = ?{conditions}",  # noqa: S608
            [*values.values(), key, *(v for v in guard.values() if v is not None)],
        )

    def delete(self, tx: Tx, key: Any) -> int:
        return tx.execute(f"DELETE FROM {self.name} WHERE {self.key} = ?", (key,))  # noqa: S608

    def count(self, tx: Tx, clause: str = "", params: Sequence[Any] = ()) -> int:
        sql = f"SELECT count(*) FROM {self.name}" + (f" WHERE {clause}" if clause else "")  # noqa: S608
        return int(tx.scalar(sql, params) or 0)


TASKS: Final = Table("team_tasks", TASK_COLUMNS, "task_id")
SLOTS: Final = Table("team_slots", SLOT_COLUMNS, "slot")
ROLES: Final = Table("team_roles", ROLE_COLUMNS, "role")
DAEMON: Final = Table("team_daemon", DAEMON_COLUMNS, "id")
OUTBOX: Final = Table("team_outbox", OUTBOX_COLUMNS, "id")
QUESTIONS: Final = Table("team_questions", QUESTION_COLUMNS, "ask_id")
REFUSALS: Final = Table("team_refusals", REFUSAL_COLUMNS, "id")
META: Final = Table("team_meta", ("key", "value"), "key")


class _Turns(Table):
    """``team_turns`` has a two-column key (task, dispatch)."""

    def get_turn(self, tx: Tx, task_id: str, dispatch: int) -> Row | None:
        return tx.one(f"{self._select} WHERE task_id = ? AND dispatch = ?", (task_id, dispatch))

    def last(self, tx: Tx, task_id: str) -> Row | None:
        return tx.one(
            f"{self._select} WHERE task_id = ? ORDER BY dispatch DESC LIMIT 1", (task_id,)
        )

    def update_turn(
        self, tx: Tx, task_id: str, dispatch: int, values: Mapping[str, Any], *, state: str
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


def insert_outbox(tx: Tx, values: Mapping[str, Any]) -> int:
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


def insert_refusal(tx: Tx, values: Mapping[str, Any]) -> None:
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
