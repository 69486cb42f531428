"""The team loop's schema (``baton up``'s durable state), as named migrations.

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
    what the role MCP tools hand the team loop (``ask_human``, review decisions), and
    the human's controls (``cancel_turn``, :mod:`baton.team.controls`).
``team_worktrees``
    one row per task tree on its own branch: the branch, its worktree, the base it
    came from and will merge into, the last checkpointed head, the merge or salvage
    in progress (:mod:`baton.worktrees.states`).
``team_questions``, ``team_refusals``, ``team_meta``
    ``ask_human`` questions, refused inbox entries, one-off facts (migrations).

Every query on these tables is in :mod:`baton.store.team_sql`.
"""

from __future__ import annotations

from baton.store.migrations import Migration

__all__ = ["TEAM_MIGRATIONS"]

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
    Migration(
        "team.0002_task_files_changed",
        # The files the agents reported writing while working on a TASK (a JSON list,
        # bounded by the writer): the review document a human reads lists them.
        "ALTER TABLE team_tasks ADD COLUMN files_changed TEXT NOT NULL DEFAULT '[]';",
    ),
    Migration(
        "team.0003_slot_audit",
        # Per slot: the audit's unapproved mutations and who approves in its mode.
        """
        ALTER TABLE team_slots ADD COLUMN unapproved_mutations INTEGER NOT NULL DEFAULT 0;
        ALTER TABLE team_slots ADD COLUMN approval TEXT;
        """,
    ),
    Migration(
        "team.0004_turn_cancelled_by",
        # Who cancelled a turn from outside the agent (the human, from the dashboard):
        # such a turn goes to needs_attention instead of being re-prompted.
        "ALTER TABLE team_turns ADD COLUMN cancelled_by TEXT;",
    ),
    Migration(
        "team.0005_turn_prompt_sha256",
        # The digest of the prompt a turn sent (as its turn.submitted records it): after a
        # coordinator restart, a live role actor's turn with this digest is adopted, not
        # run again (baton.team.reconcile).
        "ALTER TABLE team_turns ADD COLUMN prompt_sha256 TEXT;",
    ),
    Migration(
        "team.0006_worktrees",
        # A task tree's own branch and worktree (issue 26): every git step of its life is
        # a move of this row, recorded before the step and after it.
        """
        CREATE TABLE team_worktrees (
            root_task     TEXT PRIMARY KEY,
            state         TEXT NOT NULL,
            branch        TEXT NOT NULL,
            path          TEXT NOT NULL,
            base_ref      TEXT NOT NULL,
            base_commit   TEXT NOT NULL,
            head_commit   TEXT,
            merge_commit  TEXT,
            merge_rule    TEXT,
            salvage_ref   TEXT,
            reason        TEXT,
            created_at    TEXT NOT NULL,
            updated_at    TEXT NOT NULL,
            version       INTEGER NOT NULL DEFAULT 1
        );
        """,
    ),
)
