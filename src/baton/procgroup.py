"""Process groups: the one way baton stops what it started, and tells whether it lives.

Everything baton runs (agents, terminals the agent asked for, notification commands, the
built-in agent's shell steps) is started with ``start_new_session=True``, so it and all
it spawns share one process group. :func:`stop_group` ends such a group the same way
everywhere: SIGTERM the group, give the leader ``grace`` seconds, then SIGKILL whatever
of the group is left (leftover children too, which a leader's exit does not end).
Liveness ignores zombies: a process that exited but was not reaped yet is dead.
"""

from __future__ import annotations

import asyncio
import logging
import os
import signal
from collections.abc import Awaitable, Callable, Mapping, Sequence
from pathlib import Path

from baton.lifeline import proc_stat, processes

__all__ = [
    "exited_within",
    "group_alive",
    "group_gone",
    "process_alive",
    "signal_group",
    "start_group",
    "stop_group",
]

log = logging.getLogger(__name__)

WaitLeader = Callable[[float], Awaitable[bool]]
"""``wait(seconds)``: whether the group's leader has exited within ``seconds``."""


async def start_group(
    argv: Sequence[str],
    *,
    env: Mapping[str, str],
    cwd: Path | None = None,
    stdin: int | None = None,
    stdout: int | None = None,
    stderr: int | None = None,
    preexec_fn: Callable[[], None] | None = None,
) -> asyncio.subprocess.Process:
    """Start ``argv`` as the leader of a new process group (``start_new_session``), so
    :func:`stop_group` ends it and all it spawns; ``stdin``/``stdout``/``stderr`` as
    :func:`asyncio.create_subprocess_exec` takes them (``None``: inherited)."""
    return await asyncio.create_subprocess_exec(
        *argv,
        stdin=stdin,
        stdout=stdout,
        stderr=stderr,
        env=dict(env),
        cwd=None if cwd is None else str(cwd),
        start_new_session=True,
        preexec_fn=preexec_fn,
    )


def signal_group(pgid: int, sig: signal.Signals) -> bool:
    """Signal a process group; ``False`` when no process of it is left to signal."""
    try:
        os.killpg(pgid, sig)
    except ProcessLookupError:
        return False
    except PermissionError:
        log.warning("not allowed to signal process group %d", pgid)
        return False
    return True


def group_alive(pgid: int) -> bool:
    """Whether a process group has a live member; zombies (already dead) do not count.

    On Linux the answer comes from ``/proc`` (a killed grandchild re-parented to an
    init that reaps lazily stays a zombie for a while); elsewhere from ``killpg(0)``.
    """
    if Path("/proc").is_dir():
        return any(stat.pgrp == pgid and stat.live for _, stat in processes())
    try:
        os.killpg(pgid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def process_alive(pid: int) -> bool:
    """Whether ``pid`` is a live process (not missing, not a zombie)."""
    try:
        stat = proc_stat(pid)
    except OSError:
        return True  # it exists; we may not look
    return stat is not None and stat.live


async def stop_group(
    pgid: int, wait_leader: WaitLeader, *, grace: float, term: bool = True
) -> bool:
    """End the group led by ``pgid``: SIGTERM, ``grace`` for the leader, then SIGKILL.

    ``term=False`` skips the polite step (a kill the caller asked for). Leftovers of the
    group are killed even when the leader exited on its own. Returns whether the leader
    has exited (``False`` only if it survived SIGKILL for ``grace`` seconds).
    """
    exited = await wait_leader(0)
    if term and (not exited or group_alive(pgid)):
        signal_group(pgid, signal.SIGTERM)
        exited = await wait_leader(grace)
        # The leader may be gone while its children still shut down: give them the grace.
        await group_gone(pgid, grace)
    if not exited or group_alive(pgid):
        signal_group(pgid, signal.SIGKILL)
        exited = await wait_leader(grace)
        await group_gone(pgid, grace)
    return exited


async def group_gone(pgid: int, timeout: float) -> bool:
    """Until no live member of the group is left (a signalled process takes a moment to
    die on a loaded machine), at most ``timeout`` seconds; whether it is gone."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout
    while group_alive(pgid):
        if loop.time() >= deadline:
            return False
        await asyncio.sleep(0.02)
    return True


def exited_within(proc: asyncio.subprocess.Process) -> WaitLeader:
    """The :data:`WaitLeader` of an asyncio child process."""

    async def wait(seconds: float) -> bool:
        if proc.returncode is not None:
            return True
        try:
            await asyncio.wait_for(proc.wait(), seconds)
        except TimeoutError:
            return False
        return True

    return wait
