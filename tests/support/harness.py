"""A harness that opens agents through baton's composition root, with an in-memory event list.

``harness.open(fake("ok"))`` runs a fake-agent scenario over the in-memory transport by
default (no process: fast, nothing to leak); ``transport="subprocess"`` runs the same
scenario as a real process, for the tests that are about processes. Set
``BATON_TEST_TRANSPORT=subprocess`` to run every in-memory test over processes instead:
the scenarios are the same scripts on both transports, so both runs must pass.
A plain command list always runs as a process.

Each test's store is a copy of one migrated in this session (:func:`migrated_store`), and on
the fast-forward loop (``tests/runner``) the harness vouches for its store's doorbell
directory (:meth:`~baton.testing.clock.FastForwardLoop.mark_private`): the store lives under
``tmp_path``, so only this process and the children a test starts can ring it.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import shutil
import sys
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

import pytest

from baton.acp.process import AgentProcess
from baton.acp.transport import SubprocessLauncher, TransportFactory, spawn_subprocess
from baton.agent_profile import AgentProfile
from baton.app import Baton, Run
from baton.app.recovery import open_store
from baton.events.model import CanonicalEvent
from baton.procgroup import group_alive
from baton.requests.ledger import Ledger
from baton.requests.policy import Policy
from baton.runner.budget_plan import BudgetPlan
from baton.runner.emitter import EventEmitter
from baton.runner.session import AgentSession
from baton.store.store import Store
from baton.testing import ScenarioAgent, in_memory
from baton.testing.clock import FastForwardLoop

Transport = Literal["memory", "subprocess"]

DEFAULT_TRANSPORT: Transport = (
    "subprocess" if os.environ.get("BATON_TEST_TRANSPORT") == "subprocess" else "memory"
)


@dataclass(frozen=True)
class Fake:
    """A fake-agent scenario, runnable as a process or in memory."""

    scenario: str
    args: tuple[str, ...] = ()

    def argv(self) -> list[str]:
        return [
            sys.executable,
            "-m",
            "baton.testing.fake_agent",
            "--scenario",
            self.scenario,
            *self.args,
        ]

    def options(self) -> dict[str, Any]:
        """The command-line flags as :class:`~baton.testing.scenarios.Options` fields."""
        numbers = {"--bytes": "nbytes", "--count": "count", "--linger": "linger"}
        texts = {"--session-id": "session_id", "--mode": "mode", "--switch-to": "switch_to"}
        switches = {
            "--grandchild-keeps-stdio": "grandchild_keeps_stdio",
            "--stuck-mode": "stuck_mode",
        }
        out: dict[str, Any] = {}
        args = list(self.args)
        while args:
            flag = args.pop(0)
            if flag in switches:
                out[switches[flag]] = True
            elif flag == "--mode-values":
                out["mode_values"] = tuple(v for v in args.pop(0).split(",") if v)
            elif flag in texts:
                out[texts[flag]] = args.pop(0)
            else:
                value = args.pop(0)
                out[numbers[flag]] = float(value) if flag == "--linger" else int(value)
        return out


def fake(scenario: str, *args: str) -> Fake:
    return Fake(scenario, args)


@dataclass
class Harness:
    tmp: Path
    baton: Baton
    stack: contextlib.AsyncExitStack
    events: list[CanonicalEvent] = field(default_factory=list)
    sessions: list[AgentSession] = field(default_factory=list)
    runs: dict[str, Run] = field(default_factory=dict)
    listeners: list[Callable[[CanonicalEvent], None]] = field(default_factory=list)

    @property
    def store(self) -> Store:
        return self.baton.store

    @property
    def ledger(self) -> Ledger:
        return self.baton.ledger

    @property
    def workspace(self) -> Path:
        ws = self.tmp / "ws"
        ws.mkdir(exist_ok=True)
        return ws

    async def run(self, run_id: str = "run-test") -> Run:
        """One run per id, recorded through the root and finished when the test ends."""
        if run_id not in self.runs:
            run = await self.stack.enter_async_context(
                self.baton.run(kind="test", agent="fake", cwd=self.tmp, run_id=run_id)
            )
            run.status = "completed"
            run.listen(self._seen)
            self.runs[run_id] = run
        return self.runs[run_id]

    def emitter(self, run_id: str = "run-test") -> EventEmitter:
        """The run's emitter (its sequencer is the run's single source of seqs)."""
        return self.runs[run_id].emitter

    def _seen(self, event: CanonicalEvent) -> None:
        self.events.append(event)
        for listener in list(self.listeners):
            listener(event)

    async def next_event(
        self,
        event_type: str,
        where: Callable[[Any], bool] = lambda _payload: True,
        *,
        timeout: float = 10.0,
    ) -> Any:
        """Wait (on the stream, never a sleep) for the first matching event's payload."""
        for event in self.events:
            if event.type == event_type and where(event.payload):
                return event.payload
        found: asyncio.Future[Any] = asyncio.get_running_loop().create_future()

        def listen(event: CanonicalEvent) -> None:
            if event.type == event_type and where(event.payload) and not found.done():
                found.set_result(event.payload)

        self.listeners.append(listen)
        try:
            return await asyncio.wait_for(found, timeout)
        finally:
            self.listeners.remove(listen)

    async def open(
        self,
        command: list[str] | Fake,
        *,
        transport: Transport | TransportFactory | None = None,
        preset: str | Policy = "reads",
        wait_timeout: float | None = 0,
        environ: dict[str, str] | None = None,
        budget: BudgetPlan | None = None,
        run_id: str = "run-test",
        **profile_fields: Any,
    ) -> AgentSession:
        factory, argv = self._transport(command, transport)
        profile = AgentProfile(
            name=profile_fields.pop("name", "fake"),
            title="fake",
            command=tuple(argv),
            family=profile_fields.pop("family", "generic"),
            **profile_fields,
        )
        session = await self.baton.open_session(
            profile,
            run=await self.run(run_id),
            requests=self.baton.broker(preset, wait_timeout=wait_timeout, notify=False),
            workspace=self.workspace,
            environ=environ if environ is not None else {"PATH": os.environ["PATH"]},
            transport=factory,
            **({"budget": budget} if budget is not None else {}),
        )
        self.sessions.append(session)
        return session

    def transport_for(self, command: Fake) -> TransportFactory:
        """The factory ``open`` runs ``command`` on by default (to wrap it, e.g. in a tap)."""
        return self._transport(command, None)[0]

    @staticmethod
    def _transport(
        command: list[str] | Fake, transport: Transport | TransportFactory | None
    ) -> tuple[TransportFactory, list[str]]:
        if not isinstance(command, Fake):
            return (transport if callable(transport) else spawn_subprocess), command
        if callable(transport):
            return transport, command.argv()
        if (transport or DEFAULT_TRANSPORT) == "subprocess":
            return spawn_subprocess, command.argv()
        options = command.options()
        return in_memory(lambda: ScenarioAgent(command.scenario, **options)), command.argv()

    def types(self) -> list[str]:
        return [e.type for e in self.events]

    def of(self, event_type: str) -> list[Any]:
        return [e.payload for e in self.events if e.type == event_type]


FAST_STOP = SubprocessLauncher(close_grace=0.3, kill_grace=0.3)
"""A subprocess transport with short stop steps, for tests that wait through them."""


def group_gone(pgid: int) -> bool:
    return not group_alive(pgid)


def migrated_store(tmp_path_factory: pytest.TempPathFactory, db_path: Path) -> None:
    """Put a copy of a store with every migration applied at ``db_path`` (mode 0600).

    The session's first call opens and closes a store in the session's temp directory, as
    ``Baton.open`` does; later calls copy its file (about 20 ms less per test: fourteen
    migration commits, each fsynced). ``Baton.open`` still opens the copy through the
    same code, finding nothing to migrate: what every baton after the first one sees.
    """
    base = tmp_path_factory.getbasetemp()
    template = base / "migrated-store" / "baton.db"
    if not template.exists():
        building = base / f"migrated-store-{os.getpid()}" / template.name
        open_store(building).close()
        building.parent.replace(template.parent)  # whole or not at all
    db_path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
    db_path.touch(mode=0o600, exist_ok=False)
    shutil.copyfile(template, db_path)


@pytest.fixture
async def harness(
    tmp_path: Path, tmp_path_factory: pytest.TempPathFactory
) -> AsyncIterator[Harness]:
    migrated_store(tmp_path_factory, tmp_path / "baton.db")
    async with contextlib.AsyncExitStack() as stack:
        baton = await stack.enter_async_context(
            Baton.open(state_dir=tmp_path / "state", db_path=tmp_path / "baton.db")
        )
        loop = asyncio.get_running_loop()
        if isinstance(loop, FastForwardLoop):
            loop.mark_private(baton.store.wake_channel.directory)
        h = Harness(tmp=tmp_path, baton=baton, stack=stack)
        try:
            yield h
        finally:
            for session in h.sessions:
                await session.close()
                process = _agent_process(session.transport)
                if process is not None:
                    assert group_gone(process.pgid), "agent process group left behind"


def _agent_process(transport: object) -> AgentProcess | None:
    """The agent's process under any wrapping (a tap keeps its transport as ``inner``)."""
    while not isinstance(transport, AgentProcess) and hasattr(transport, "inner"):
        transport = transport.inner
    return transport if isinstance(transport, AgentProcess) else None


FakeCommand = Callable[..., list[str]]
