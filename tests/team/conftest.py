"""Fixtures: a real FCoP workspace, a real store, and team loops over fake sessions."""

from __future__ import annotations

import asyncio
import dataclasses
import itertools
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from baton.events.sequencer import Sequencer
from baton.fcop_port.authority import TrustedAuthority
from baton.fcop_port.port import FcopPort
from baton.requests.notify import Notifier
from baton.runner.emitter import EventEmitter
from baton.store.sqlite import SqliteStore
from baton.team.loop import RunSummary, TeamLoop
from baton.team_config import TeamConfig, default_team
from tests.coordination.conftest import KEY, authority, port, root, state_dir
from tests.coordination.fakes import FakeFactory, Script, runbook_agent
from tests.support.records import run_record

__all__ = ["KEY", "WAIT", "Team", "authority", "port", "root", "state_dir", "team"]

WAIT = 60.0
_runs = itertools.count(1)


def team_config(**changes: Any) -> TeamConfig:
    base = default_team()
    roles = dict(base.roles)
    for name, concurrency in changes.pop("concurrency", {}).items():
        roles[name] = dataclasses.replace(roles[name], concurrency=concurrency)
    return dataclasses.replace(base, roles=roles, **changes)


class Team:
    """Builds team loops the way ``baton up`` does, over one project's store."""

    def __init__(self, root: Path, state_dir: Path) -> None:
        self.root = root
        self.state_dir = state_dir
        self.store = SqliteStore.open(state_dir / "baton.db")

    def port(self) -> FcopPort:
        """A fresh port (a new ``fcop.Project``), as a restarted process has."""
        return FcopPort(self.root, authority=TrustedAuthority(KEY))

    def factory(
        self, scripts: dict[str, Script] | None = None, default: Script = runbook_agent
    ) -> FakeFactory:
        return FakeFactory(scripts, default, store=self.store)

    def loop(
        self,
        factory: FakeFactory,
        *,
        port: FcopPort | None = None,
        notifier: Notifier | None = None,
        **changes: Any,
    ) -> TeamLoop:
        run_id = f"run-{next(_runs)}"
        self.store.create_run(run_record(run_id, kind="up"))
        emitter = EventEmitter(Sequencer(run_id), self.store)
        return TeamLoop(
            port=port or self.port(),
            team=team_config(**changes),
            factory=factory,
            store=self.store,
            journal=emitter,
            run_id=run_id,
            state_dir=self.state_dir,
            notifier=notifier,
        )

    async def run_idle(self, loop: TeamLoop) -> RunSummary:
        return await asyncio.wait_for(loop.run(until_idle=True), WAIT)

    def reopen(self) -> None:
        """Close and open the store again (nothing in memory survives, as after a restart)."""
        self.store.close()
        self.store = SqliteStore.open(self.state_dir / "baton.db")


@pytest.fixture
def team(root: Path, state_dir: Path) -> Iterator[Team]:
    built = Team(root, state_dir)
    try:
        yield built
    finally:
        built.store.close()
