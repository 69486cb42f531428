"""Test-side agents for exercising baton's ACP adapter.

:mod:`baton.testing.fake_agent` is a scriptable, standard-library-only ACP agent with fault
injection; run it as ``python -m baton.testing.fake_agent --scenario NAME``. This package module
stays import-light on purpose (it is imported on every start of the fake agent) and must not
import :mod:`baton.testing.fake_agent` itself.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Sequence

__all__ = ["FAKE_AGENT_MODULE", "HOSTILE_SCENARIOS", "SCENARIOS", "fake_agent_argv"]

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
    "usage-context",
    "usage-result-meta",
    "agent-terminal",
    "client-terminal-tool",
)

#: Hostile scenarios (documented in :mod:`baton.testing.fake_agent`).
HOSTILE_SCENARIOS: tuple[str, ...] = ("lone-surrogate", "secrets")
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
