"""A fault-injection hook for the crash-point harness: SIGKILL ``baton up`` at its Nth durable write.

Inert unless ``BATON_CRASH_COUNTER`` is set (only ``tests/crash`` sets it). Then
every durable write of the team (``fcop``'s publication, receipt-stage
replacement and authoritative removal, each named by kind, e.g.
``fcop.publish:active/TASK`` or ``fcop.replace_durable:operations/TARGET_DURABLE``;
every store commit, ``store.commit``) in every process of one ``baton up`` (the
team loop and its role MCP servers, which inherit the variables) increments one
shared counter (a file, under ``flock``) and appends ``<n> <kind> <pid>`` to
``BATON_CRASH_TRACE``. The write that makes the count equal ``BATON_CRASH_AT``
(counting only writes of kind ``BATON_CRASH_KIND`` when that is set) kills the
daemon (``BATON_CRASH_DAEMON``, else this process) with SIGKILL right *after* it
completed: a crash at exactly that durable boundary, with everything before it
on disk and nothing after it.
"""

from __future__ import annotations

import contextlib
import fcntl
import functools
import os
import signal
from collections.abc import Callable
from pathlib import Path
from typing import Any, TypeVar

__all__ = ["ENV", "FCOP_WRITER_MODULES", "durable_write", "install_from_env"]

ENV = (
    "BATON_CRASH_AT",
    "BATON_CRASH_KIND",
    "BATON_CRASH_COUNTER",
    "BATON_CRASH_TRACE",
    "BATON_CRASH_DAEMON",
)
F = TypeVar("F", bound=Callable[..., Any])

_installed = False
_FCOP_WRITERS = ("publish", "replace_durable", "remove_authoritative")
FCOP_WRITER_MODULES = (
    "fcop.v4.encoding",
    "fcop.v4.creation",
    "fcop.v4.lifecycle",
    "fcop.v4.receipts",
    "fcop.v4.recovery",
    "fcop.v4.reports",
    "fcop.v4.authorization",
    "fcop.v4.merge",
)
"""Every fcop module that binds its durable writers by name (wrapping one means all of them)."""


def _count(kind: str) -> None:
    counter = os.environ.get("BATON_CRASH_COUNTER")
    if not counter:
        return
    wanted = os.environ.get("BATON_CRASH_KIND") or None
    fd = os.open(counter, os.O_RDWR | os.O_CREAT, 0o600)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        raw = os.pread(fd, 64, 0).decode().split()
        total = int(raw[0]) + 1 if raw else 1
        matching = (int(raw[1]) if len(raw) > 1 else 0) + (wanted is None or kind == wanted)
        os.pwrite(fd, f"{total} {matching}".encode().ljust(64), 0)
        trace = os.environ.get("BATON_CRASH_TRACE")
        if trace:
            with open(trace, "a", encoding="utf-8") as stream:
                stream.write(f"{total} {kind} {os.getpid()}\n")
        target = int(os.environ.get("BATON_CRASH_AT", "0") or 0)
    finally:
        os.close(fd)
    if target and matching == target and (wanted is None or kind == wanted):
        team_loop = int(os.environ.get("BATON_CRASH_DAEMON", "0") or 0) or os.getpid()
        with contextlib.suppress(ProcessLookupError):
            os.kill(team_loop, signal.SIGKILL)
        os.kill(os.getpid(), signal.SIGKILL)


def durable_write(kind: str) -> None:
    """Report one completed durable write (a no-op unless the harness is active)."""
    if _installed:
        _count(kind)


def _kind(name: str, args: tuple[Any, ...], kwargs: dict[str, Any]) -> str:
    """``fcop.publish:active/TASK``, ``fcop.replace_durable:operations/TARGET_DURABLE``, ..."""
    target = Path(str(args[0] if args else kwargs.get("path", "")))
    what = target.name.split("-", 1)[0].removesuffix(".md").removesuffix(".json")
    if name == "replace_durable":
        data = args[1] if len(args) > 1 else kwargs.get("data", b"")
        for stage in ("TARGET_DURABLE", "COMMITTED", "PREPARED"):
            if f'"stage":"{stage}"'.encode() in data:
                what = stage
    return f"fcop.{name}:{target.parent.name}/{what}"


def _wrap(fn: F, name: str) -> F:
    @functools.wraps(fn)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        result = fn(*args, **kwargs)
        _count(_kind(name, args, kwargs))
        return result

    return wrapper  # type: ignore[return-value]


def install_from_env() -> bool:
    """Wrap ``fcop``'s durable writers in this process when the harness asks for it."""
    global _installed
    if _installed or not os.environ.get("BATON_CRASH_COUNTER"):
        return _installed
    import importlib

    originals: dict[str, Any] = {}
    encoding = importlib.import_module("fcop.v4.encoding")
    for name in _FCOP_WRITERS:
        originals[name] = getattr(encoding, name)
    wrapped = {name: _wrap(fn, name) for name, fn in originals.items()}
    for module_name in FCOP_WRITER_MODULES:
        with contextlib.suppress(ImportError):
            module = importlib.import_module(module_name)
            for name, fn in wrapped.items():
                if getattr(module, name, None) is originals[name]:
                    setattr(module, name, fn)
    _installed = True
    return True
