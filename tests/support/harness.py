"""A harness that opens real agent processes through baton's runner, with an in-memory event list."""

from __future__ import annotations

import os
import sys
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from baton.acp.process import group_alive
from baton.events.model import CanonicalEvent
from baton.events.sequencer import Sequencer
from baton.providers.profile import AgentProfile
from baton.requests.ledger import Ledger
from baton.requests.policy import Policy
from baton.runner.context import open_store
from baton.runner.emitter import EventEmitter
from baton.runner.requests_broker import RequestBroker
from baton.runner.session import AgentSession
from baton.store.records import RunRecord
from baton.store.store import Store


@dataclass
class Harness:
    tmp: Path
    store: Store
    ledger: Ledger
    events: list[CanonicalEvent] = field(default_factory=list)
    sessions: list[AgentSession] = field(default_factory=list)
    emitters: dict[str, EventEmitter] = field(default_factory=dict)

    @property
    def workspace(self) -> Path:
        ws = self.tmp / "ws"
        ws.mkdir(exist_ok=True)
        return ws

    def emitter(self, run_id: str = "run-test") -> EventEmitter:
        """One emitter per run: its sequencer is the run's single source of seqs."""
        if run_id in self.emitters:
            return self.emitters[run_id]
        if self.store.get_run(run_id) is None:
            self.store.create_run(
                RunRecord(
                    run_id=run_id,
                    kind="test",
                    agent="fake",
                    cwd=str(self.tmp),
                    status="running",
                    created_at="2026-01-01T00:00:00.000Z",
                )
            )
        emitter = EventEmitter(Sequencer(run_id, start_seq=self.store.last_seq(run_id)), self.store)
        emitter.listeners.append(self.events.append)
        self.emitters[run_id] = emitter
        return emitter

    async def open(
        self,
        command: list[str],
        *,
        preset: str = "reads",
        wait_timeout: float | None = 0,
        environ: dict[str, str] | None = None,
        **profile_fields: Any,
    ) -> AgentSession:
        profile = AgentProfile(
            name=profile_fields.pop("name", "fake"),
            title="fake",
            command=tuple(command),
            family=profile_fields.pop("family", "generic"),
            **profile_fields,
        )
        session = await AgentSession.open(
            profile,
            workspace=self.workspace,
            emitter=self.emitter(),
            requests=RequestBroker(self.ledger, Policy.preset(preset), wait_timeout=wait_timeout),
            state_dir=self.tmp / "state",
            environ=environ if environ is not None else {"PATH": os.environ["PATH"]},
        )
        self.sessions.append(session)
        return session

    def types(self) -> list[str]:
        return [e.type for e in self.events]

    def of(self, event_type: str) -> list[Any]:
        return [e.payload for e in self.events if e.type == event_type]


def fake(scenario: str, *args: str) -> list[str]:
    return [sys.executable, "-m", "baton.testing.fake_agent", "--scenario", scenario, *args]


def group_gone(pgid: int) -> bool:
    return not group_alive(pgid)


@pytest.fixture
async def harness(tmp_path: Path) -> AsyncIterator[Harness]:
    store = open_store(tmp_path / "baton.db")
    h = Harness(tmp=tmp_path, store=store, ledger=Ledger(store))
    try:
        yield h
    finally:
        for session in h.sessions:
            await session.close()
            if session.process is not None:
                assert group_gone(session.process.pgid), "agent process group left behind"
        await h.ledger.aclose()
        store.close()


FakeCommand = Callable[..., list[str]]
