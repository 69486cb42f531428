"""Process lifelines: die with the parent, and tell a live process from a reused pid.

* :func:`preexec_die_with_parent`: :mod:`baton.acp.process` starts every agent with
  ``PR_SET_PDEATHSIG = SIGKILL`` (Linux), so the kernel kills the agent when baton dies;
* :func:`process_start_ticks`: a pid plus its kernel start time names one process for
  good (the store records the daemon that way; the role MCP servers check it).

Imports nothing heavy: the role MCP server's entry (:mod:`baton.coordination.role_mcp`)
uses it before anything else, in a process that must not be slow to start.
"""

from __future__ import annotations

import os
import signal
import sys
from collections.abc import Callable
from pathlib import Path

__all__ = ["die_with_parent", "preexec_die_with_parent", "process_start_ticks"]

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


def process_start_ticks(pid: int) -> int | None:
    """The kernel's start time of ``pid`` (clock ticks since boot): a pid plus this is unique.

    ``None`` when no such live process exists (or it is a zombie).
    """
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    fields = stat[stat.rfind(")") + 2 :].split()
    if not fields or fields[0] in ("Z", "X"):
        return None
    try:
        return int(fields[19])
    except (IndexError, ValueError):
        return None
