"""SIGINT, SIGTERM and SIGHUP, handled alike by every long-running command.

``run``, ``up`` and ``serve`` stop the same way whichever of the three arrives (Ctrl-C,
a supervisor's ``kill``, a closed terminal): the first signal asks for a clean stop
(cancel the turn, stop the team loop, close the server) so agents are not orphaned, runs
are finished in the store and private roots are removed; a second one forces it. The
exit code then says which signal interrupted the command: ``128 + N`` (130 for SIGINT,
143 for SIGTERM, 129 for SIGHUP), the shell's convention.
"""

from __future__ import annotations

import asyncio
import signal
from collections.abc import Callable
from typing import Final

from baton.cli.shared import exit_for_signal

__all__ = ["STOP_SIGNALS", "Interrupts", "describe_signal"]

STOP_SIGNALS: Final = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)


class Interrupts:
    """Installs the handlers on the running loop for the duration of a ``with`` block."""

    def __init__(
        self,
        on_first: Callable[[int], None],
        on_again: Callable[[int], None] | None = None,
    ) -> None:
        self.on_first = on_first
        self.on_again = on_again
        self.first: int | None = None
        self.count = 0
        self._loop: asyncio.AbstractEventLoop | None = None

    def _handle(self, signum: int) -> None:
        self.count += 1
        if self.first is None:
            self.first = signum
            self.on_first(signum)
        elif self.on_again is not None:
            self.on_again(signum)

    @property
    def exit_code(self) -> int | None:
        """``128 + N`` for the first signal received, or ``None``."""
        return None if self.first is None else exit_for_signal(self.first)

    @property
    def name(self) -> str:
        return describe_signal(self.first) if self.first is not None else ""

    def __enter__(self) -> Interrupts:
        self._loop = asyncio.get_running_loop()
        for sig in STOP_SIGNALS:
            self._loop.add_signal_handler(sig, self._handle, sig)
        return self

    def __exit__(self, *exc_info: object) -> None:
        if self._loop is not None:
            for sig in STOP_SIGNALS:
                self._loop.remove_signal_handler(sig)


def describe_signal(signum: int) -> str:
    """``Ctrl-C (SIGINT)``, ``SIGTERM``, ``SIGHUP``: how a person would name it."""
    name = signal.Signals(signum).name
    return f"Ctrl-C ({name})" if signum == signal.SIGINT else name
