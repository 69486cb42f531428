"""Opening a real npm agent through baton's runner, with its wire traffic recorded.

Every session opened here runs the agent behind :mod:`tests.support.wiretap`, so a test can
end with :func:`assert_wire_conforms`: every message of both directions checked against the
official ACP JSON Schema (:mod:`tests.support.acp_schema`).
"""

from __future__ import annotations

import asyncio
import dataclasses
import os
from pathlib import Path
from typing import Any

from baton.agent_profile import AgentProfile
from baton.requests.policy import Policy
from baton.runner.requests_broker import RequestBroker
from baton.runner.session import AgentSession
from tests.support.acp_schema import WireValidator
from tests.support.agents import DUMMY_KEY
from tests.support.harness import Harness
from tests.support.wiretap import read_tap, tapped

__all__ = ["assert_cancels_cleanly", "assert_wire_conforms", "open_real", "tap_log"]

_VALIDATOR: WireValidator | None = None


def tap_log(harness: Harness) -> Path:
    return harness.tmp / "wire.ndjson"


async def open_real(
    harness: Harness,
    profile: AgentProfile,
    *,
    preset: str = "reads",
    policy: Policy | None = None,
    wait_timeout: float | None = 0,
    broker: RequestBroker | None = None,
    **kwargs: Any,
) -> AgentSession:
    """Open ``profile`` (its command behind the tap) with baton's real runner."""
    profile = dataclasses.replace(profile, command=tuple(tapped(profile.argv(), tap_log(harness))))
    requests = broker or RequestBroker(
        harness.ledger, policy or Policy.preset(preset), wait_timeout=wait_timeout
    )
    environ = {
        "PATH": os.environ["PATH"],
        "ANTHROPIC_API_KEY": DUMMY_KEY,
        "OPENAI_API_KEY": DUMMY_KEY,
        "GEMINI_API_KEY": DUMMY_KEY,
        # No tools-dir install may stand in for the command under test.
        "BATON_TOOLS_DIR": str(harness.tmp / "no-tools"),
    }
    session = await AgentSession.open(
        profile,
        workspace=harness.workspace,
        emitter=(await harness.run()).emitter,
        requests=requests,
        state_dir=harness.tmp / "state",
        environ=environ,
        **kwargs,
    )
    harness.sessions.append(session)
    return session


async def assert_cancels_cleanly(
    harness: Harness, stub: Any, profile: AgentProfile, *, vendor: tuple[str, ...] = ()
) -> None:
    """Cancel a turn while its model call stalls: one ``turn.cancelled``, not forced, and
    the wire still conforms. ``stub`` is a scripted server started with ``script="hang"``."""
    session = await open_real(harness, profile)
    turn = asyncio.create_task(session.prompt("wait for me", timeout=180))
    await asyncio.to_thread(stub.stalled.wait, 120)
    await session.cancel("test cancel")
    outcome = await asyncio.wait_for(turn, 60)
    stub.release()
    assert outcome.status == "cancelled"
    cancelled = harness.of("turn.cancelled")
    assert len(cancelled) == 1 and not cancelled[0].forced
    assert_wire_conforms(harness, vendor=vendor)


def assert_wire_conforms(harness: Harness, *, vendor: tuple[str, ...] = ()) -> list[dict[str, Any]]:
    """Validate the recorded traffic against the ACP schema; return the records.

    ``vendor``: the agent's own method prefixes that break ACP's ``_`` rule (Qwen Code's).
    """
    global _VALIDATOR
    if _VALIDATOR is None:
        _VALIDATOR = WireValidator.load()
    records = read_tap(tap_log(harness))
    assert records, "nothing was recorded on the wire"
    problems = _VALIDATOR.validate(records, vendor=vendor)
    assert problems == [], "\n".join(problems)
    return records
