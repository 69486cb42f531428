"""Rules every ``baton`` command shares: exit codes, how errors are printed, renderers.

Exit codes:

====  ===========================================================
0     the turn completed with ``end_turn``
1     the turn failed (agent error, timeout, agent died)
2     bad usage or configuration
3     the agent could not be started or its session not created
4     refused by a security control (admission, pin, containment)
5     the turn completed with another stop reason (refusal, max_tokens…)
130   the turn was cancelled (Ctrl-C)
====  ===========================================================
"""

from __future__ import annotations

from typing import Literal

from rich.console import Console

from baton.cli.render import HumanRenderer, NdjsonRenderer
from baton.errors import AgentError, ConfigError, SecurityError

__all__ = [
    "EXIT_AGENT",
    "EXIT_CANCELLED",
    "EXIT_FAILED",
    "EXIT_OK",
    "EXIT_SECURITY",
    "EXIT_STOP",
    "EXIT_USAGE",
    "ApprovePreset",
    "err",
    "exit_for",
    "renderer",
]

err = Console(stderr=True, highlight=False)

EXIT_OK, EXIT_FAILED, EXIT_USAGE, EXIT_AGENT, EXIT_SECURITY, EXIT_STOP, EXIT_CANCELLED = (
    0,
    1,
    2,
    3,
    4,
    5,
    130,
)
ApprovePreset = Literal["reads", "all", "none"]


def exit_for(exc: BaseException) -> int:
    if isinstance(exc, SecurityError):
        return EXIT_SECURITY
    if isinstance(exc, ConfigError):
        return EXIT_USAGE
    if isinstance(exc, AgentError):
        return EXIT_AGENT
    return EXIT_FAILED


def renderer(json_output: bool) -> HumanRenderer | NdjsonRenderer:
    return NdjsonRenderer() if json_output else HumanRenderer()
