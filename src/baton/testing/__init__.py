"""Test-side agents and transports, shipped for baton's tests and for users' own.

Transports (the httpx way: pass one to ``AgentSession.open(..., transport=...)``):

* :func:`in_memory` (:mod:`.memory`): a Python agent object on the other end, no process;
  :class:`ScenarioAgent` plays any fake-agent scenario there;
* :func:`replay` (:mod:`.recorded`): a recorded NDJSON wire trace plays the agent.

:mod:`baton.testing.cursor_bridge` is a scripted Cursor SDK bridge (the ``sdk/v1`` contract
the ``cursor-sdk`` client speaks, runs scripted in the prompt), for the ``cursor-sdk``
transport without a Cursor account: ``python -m baton.testing.cursor_bridge``.

:mod:`baton.testing.fake_agent` is the same scriptable fault-injection agent as a real
process (standard library only); run it as ``python -m baton.testing.fake_agent --scenario
NAME``, or build its command line with :func:`fake_agent_argv`. This package module stays
import-light on purpose (it is imported on every start of the fake agent): the transports are
loaded on first use.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from baton.testing.memory import (
        AgentEnd,
        InMemoryAgent,
        InMemoryTransport,
        MemoryPipe,
        ScenarioAgent,
        in_memory,
    )
    from baton.testing.recorded import ReplayAgent, load_trace, replay

__all__ = [
    "FAKE_AGENT_MODULE",
    "HOSTILE_SCENARIOS",
    "SCENARIOS",
    "AgentEnd",
    "InMemoryAgent",
    "InMemoryTransport",
    "MemoryPipe",
    "ReplayAgent",
    "ScenarioAgent",
    "fake_agent_argv",
    "in_memory",
    "load_trace",
    "replay",
]

_LAZY = {
    "AgentEnd": "baton.testing.memory",
    "InMemoryAgent": "baton.testing.memory",
    "InMemoryTransport": "baton.testing.memory",
    "MemoryPipe": "baton.testing.memory",
    "ScenarioAgent": "baton.testing.memory",
    "in_memory": "baton.testing.memory",
    "ReplayAgent": "baton.testing.recorded",
    "load_trace": "baton.testing.recorded",
    "replay": "baton.testing.recorded",
}


def __getattr__(name: str) -> Any:  # Any: whichever lazily imported name was asked for
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    import importlib

    return getattr(importlib.import_module(module), name)


FAKE_AGENT_MODULE = "baton.testing.fake_agent"

#: Every scenario the fake agent knows; see :mod:`baton.testing.fake_agent` for what each does.
SCENARIOS: tuple[str, ...] = (
    "ok",
    "malformed-json",
    "huge-line",
    "invalid-utf8",
    "die-mid-turn",
    "no-initialize",
    "stderr-flood",
    "ignore-cancel",
    "hang-prompt",
    "silent",
    "spawn-grandchild",
    "flood",
    "late-chunks",
    "repeat-tool-call",
    "unknown-variant",
    "cursor-ext",
    "auth-required",
    "permission",
    "usage",
    "fs",
    "replay",
    "skip-permission",
    "write-unasked",
    "terminal-unasked",
    "ignore-denial",
    "switch-mode",
    "terminal-login",
    "session-new-error",
    "permission-unannounced",
    "usage-meta",
    "usage-growing",
    "usage-context",
    "usage-result-meta",
    "agent-terminal",
    "client-terminal-tool",
)

#: Hostile scenarios (documented in :mod:`baton.testing.fake_agent`).
HOSTILE_SCENARIOS: tuple[str, ...] = (
    "cross-turn",
    "lone-surrogate",
    "request-order",
    "secrets",
)
SCENARIOS += HOSTILE_SCENARIOS


def fake_agent_argv(
    scenario: str = "ok",
    *,
    count: int | None = None,
    nbytes: int | None = None,
    trace: str | os.PathLike[str] | None = None,
    extra: Sequence[str] = (),
    python: str | None = None,
) -> list[str]:
    """The command line that starts the fake agent with ``scenario``.

    >>> fake_agent_argv("flood", count=10, python="python3")[-4:]
    ['--scenario', 'flood', '--count', '10']
    """
    if scenario not in SCENARIOS:
        raise ValueError(f"unknown fake agent scenario {scenario!r}; known: {', '.join(SCENARIOS)}")
    argv = [python or sys.executable, "-m", FAKE_AGENT_MODULE, "--scenario", scenario]
    if count is not None:
        argv += ["--count", str(count)]
    if nbytes is not None:
        argv += ["--bytes", str(nbytes)]
    if trace is not None:
        argv += ["--trace", os.fspath(trace)]
    argv += list(extra)
    return argv
