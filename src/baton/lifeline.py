"""Process lifelines: die with the parent, and tell a live process from a reused pid.

* :func:`preexec_die_with_parent`: :mod:`baton.acp.process` starts every agent with
  ``PR_SET_PDEATHSIG = SIGKILL`` (Linux), so the kernel kills the agent when baton dies;
* :func:`process_start_ticks`: a pid plus its kernel start time names one process for
  good (the store records the team loop that way; the role MCP servers check it);
* :func:`proc_stat` / :func:`processes`: the one reader of ``/proc/PID/stat`` (state,
  parent, process group, session, start time), for liveness, process groups and the
  team's reaper; :func:`boot_id`: which boot of this machine a recorded pid belongs to.

Imports nothing heavy: the role MCP server's entry (:mod:`baton.role_tools.slot_server`)
uses it before anything else, in a process that must not be slow to start.
"""

from __future__ import annotations

import os
import signal
import sys
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import NamedTuple

__all__ = [
    "ProcStat",
    "boot_id",
    "die_with_parent",
    "preexec_die_with_parent",
    "proc_stat",
    "process_start_ticks",
    "processes",
]

_PR_SET_PDEATHSIG = 1


def _prctl() -> Callable[[int, int], int] | None:
    if not sys.platform.startswith("linux"):
        return None
    try:
        import ctypes

        fn: Callable[[int, int], int] = ctypes.CDLL(None, use_errno=True).prctl
    except (OSError, AttributeError):
        return None
    return fn


_PRCTL = _prctl()
"""Resolved once at import, so a forked child does as little as possible before exec."""


def die_with_parent(expected_parent: int | None = None) -> bool:
    """Ask the kernel to SIGKILL this process when its parent dies; False where unsupported.

    If the parent is already gone (it is not ``expected_parent``, or this process was
    re-parented to init), exit at once: the request would never fire.
    """
    prctl = _PRCTL
    if prctl is None:
        return False
    prctl(_PR_SET_PDEATHSIG, int(signal.SIGKILL))
    parent = os.getppid()
    if (expected_parent is not None and parent != expected_parent) or parent == 1:
        os._exit(1)
    return True


def preexec_die_with_parent(parent: int) -> Callable[[], None] | None:
    """A ``preexec_fn`` for a child that must die with ``parent`` (None where unsupported)."""
    if _PRCTL is None:
        return None

    def preexec() -> None:
        die_with_parent(parent)

    return preexec


class ProcStat(NamedTuple):
    """The fields of ``/proc/PID/stat`` baton reads."""

    state: str
    ppid: int
    pgrp: int
    session: int
    start_ticks: int

    @property
    def live(self) -> bool:
        """Not a zombie (exited, not reaped yet) and not dead: a zombie counts as gone."""
        return self.state not in ("Z", "X")


def proc_stat(pid: int | str) -> ProcStat | None:
    """``/proc/PID/stat`` parsed; ``None`` when no such process exists (or it is unreadable
    as a stat line). Other ``OSError`` (no permission to look) propagates."""
    try:
        text = Path(f"/proc/{pid}/stat").read_text()
    except FileNotFoundError:
        return None
    # pid (comm) state ppid pgrp session ...; comm may hold spaces and parentheses.
    fields = text[text.rfind(")") + 2 :].split()
    try:
        return ProcStat(fields[0], int(fields[1]), int(fields[2]), int(fields[3]), int(fields[19]))
    except (IndexError, ValueError):
        return None


def processes() -> Iterator[tuple[int, ProcStat]]:
    """Every process ``/proc`` lists, with its stat (one that vanishes meanwhile is skipped)."""
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = proc_stat(entry.name)
        except OSError:
            continue
        if stat is not None:
            yield int(entry.name), stat


def boot_id() -> str:
    """This boot of this machine (``""`` where the kernel does not say): a pid recorded in
    another boot names no process of this one."""
    try:
        return Path("/proc/sys/kernel/random/boot_id").read_text().strip()
    except OSError:
        return ""


def process_start_ticks(pid: int) -> int | None:
    """The kernel's start time of ``pid`` (clock ticks since boot): a pid plus this is unique.

    ``None`` when no such live process exists (or it is a zombie).
    """
    try:
        stat = proc_stat(pid)
    except OSError:
        return None
    return stat.start_ticks if stat is not None and stat.live else None
