"""What the role-actor tests share: the fake agent as a role's profile, a coordinator run,
and waiting for a condition another process makes true."""

from __future__ import annotations

import asyncio
import inspect
import os
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any, TypeVar

from baton.agent_profile import AgentProfile
from baton.app.root import open_holder_root
from baton.cluster.actor import HolderSpec
from baton.events.sequencer import Sequencer, format_ts
from baton.runner.emitter import EventEmitter
from baton.store.pg import PgStore
from baton.store.records import RunRecord
from baton.testing import fake_agent_argv

__all__ = ["coordinator_run", "fake_profile", "holder_spec", "until"]

T = TypeVar("T")


def fake_profile(scenario: str) -> AgentProfile:
    return AgentProfile(
        name=f"fake-{scenario}",
        title="fake",
        command=tuple(fake_agent_argv(scenario)),
        family="generic",
    )


def coordinator_run(store: PgStore, run_id: str = "run-coordinator") -> EventEmitter:
    store.create_run(
        RunRecord(
            run_id=run_id,
            kind="team",
            agent="team",
            cwd="/",
            status="running",
            created_at=format_ts(time.time()),
        )
    )
    return EventEmitter(Sequencer(run_id), store)


def holder_spec(
    dsn: str, slot: str, scenario: str, root: Path, *, parent_run: str, lease_s: float
) -> HolderSpec:
    workspace = root / f"ws-{slot}"
    workspace.mkdir(parents=True, exist_ok=True)
    state = root / "state"
    state.mkdir(exist_ok=True)
    return HolderSpec(
        dsn=dsn,
        slot=slot,
        epoch=0,
        host="",
        lease_s=lease_s,
        parent_run=parent_run,
        profile=fake_profile(scenario),
        workspace=str(workspace),
        state_dir=str(state),
        permissions="ask",
        wait_timeout=300,
        environ={"PATH": os.environ["PATH"]},
        root=open_holder_root,
    )


async def until(
    check: Callable[[], Awaitable[T] | T], *, timeout: float = 120, what: str = "condition"
) -> T:
    """The first truthy ``check()`` (another process makes it true: a bounded back-off)."""
    deadline = time.monotonic() + timeout
    pause = 0.05
    while True:
        value: Any = check()
        if inspect.isawaitable(value):
            value = await value
        if value:
            return value
        if time.monotonic() > deadline:
            raise TimeoutError(f"{what} not met within {timeout} s")
        await asyncio.sleep(pause)
        pause = min(pause * 2, 0.5)
