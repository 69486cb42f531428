"""The role-session factory opens a session ``isolated`` only in a task tree's worktree.

The factory is the one place that knows where a role session works: the project (the user's
own checkout, ``cwd=None``) or a tree's worktree. Only the latter may run the agent in its
edit-without-asking mode (:mod:`baton.providers.worktree_modes`), and each place keeps its
own stored session, keyed with the mode it runs there. ``AgentSession.open`` is replaced by
a recorder: what is checked is what the factory asks of it.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from baton.config import load_config
from baton.events.sequencer import Sequencer
from baton.requests.ledger import Ledger
from baton.runner.emitter import EventEmitter
from baton.security.redact import Redactor
from baton.store.sqlite import SqliteStore
from baton.team import role_sessions
from baton.team.role_sessions import role_session_factory
from baton.team_config import RoleSpec
from tests.coordination.slots import open_slot, own_project
from tests.support.records import run_record


class _Opened:
    """What the factory reads of an opened session."""

    agent_session_id = "agent-session-1"
    how = "new"
    process = None
    approval = None

    def __init__(self) -> None:
        self.redactor = Redactor(())

    async def close(self, reason: str) -> None:
        return None


async def test_only_a_trees_worktree_opens_isolated(
    root: Path, state_dir: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    opened: list[tuple[str | None, bool, Path]] = []

    async def open_session(profile: Any, **options: Any) -> _Opened:
        opened.append((profile.mode, options["isolated"], options["workspace"]))
        return _Opened()

    monkeypatch.setattr(role_sessions.AgentSession, "open", open_session)
    store = SqliteStore.open(state_dir / "baton.db")
    try:
        own_project(store)
        store.create_run(run_record("run-t", kind="up"))
        config = load_config(root, environ={"XDG_STATE_HOME": str(tmp_path / "xdg")})
        factory = role_session_factory(
            config,
            workspace=root,
            store=store,
            ledger=Ledger(store),
            emitter=EventEmitter(Sequencer("run-t"), store),
        )
        spec = RoleSpec(name="DEV", agent="claude", permissions="all")
        binding = open_slot(store, root, "DEV").binding()
        worktree = root / ".baton" / "worktrees" / "9a2b7128-feature"
        await factory(spec, binding, None)
        await factory(spec, binding, worktree)
        # The opener gets the configured profile and the flag; it applies the edit mode itself.
        assert opened == [("default", False, root), ("default", True, worktree)]
        project = store.get_session("role-DEV")
        tree = store.get_session("role-DEV@9a2b7128-feature")
        assert project is not None and tree is not None
        assert json.loads(project.identity_key)["mode"] == "default"
        assert json.loads(tree.identity_key)["mode"] == "acceptEdits"
    finally:
        store.close()
