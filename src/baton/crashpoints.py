"""A fault-injection hook for the crash-point harness: SIGKILL ``baton up`` at its Nth durable write.

Inert unless ``BATON_CRASH_COUNTER`` is set (only ``tests/crash`` sets it). Then
every durable write of the team (``fcop``'s publication, receipt-stage
replacement and authoritative removal; every store commit) in every process of
one ``baton up`` (the daemon and its role MCP servers, which inherit the
variables) increments one shared counter (a file, under ``flock``) and appends
``<n> <kind> <pid>`` to ``BATON_CRASH_TRACE``. The write that makes the counter
equal ``BATON_CRASH_AT`` kills the daemon (``BATON_CRASH_DAEMON``, else this
process) with SIGKILL right *after* it completed: a crash at exactly that
durable boundary, with everything before it on disk and nothing after it.
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

__all__ = ["ENV", "durable_write", "install_from_env"]

ENV = ("BATON_CRASH_AT", "BATON_CRASH_COUNTER", "BATON_CRASH_TRACE", "BATON_CRASH_DAEMON")
F = TypeVar("F", bound=Callable[..., Any])

_installed = False
_FCOP_WRITERS = ("publish", "replace_durable", "remove_authoritative")
_FCOP_MODULES = (
    "fcop.v4.encoding",
    "fcop.v4.creation",
    "fcop.v4.lifecycle",
    "fcop.v4.receipts",
    "fcop.v4.recovery",
    "fcop.v4.reports",
    "fcop.v4.authorization",
    "fcop.v4.merge",
)


def _count(kind: str) -> None:
    counter = os.environ.get("BATON_CRASH_COUNTER")
    if not counter:
        return
    path = Path(counter)
    fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o600)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        raw = os.pread(fd, 32, 0).strip()
        n = int(raw) + 1 if raw else 1
        data = str(n).encode()
        os.pwrite(fd, data.ljust(32), 0)
        trace = os.environ.get("BATON_CRASH_TRACE")
        if trace:
            with open(trace, "a", encoding="utf-8") as stream:
                stream.write(f"{n} {kind} {os.getpid()}\n")
        target = int(os.environ.get("BATON_CRASH_AT", "0") or 0)
    finally:
        os.close(fd)
    if n == target:
        daemon = int(os.environ.get("BATON_CRASH_DAEMON", "0") or 0) or os.getpid()
        with contextlib.suppress(ProcessLookupError):
            os.kill(daemon, signal.SIGKILL)
        os.kill(os.getpid(), signal.SIGKILL)


def durable_write(kind: str) -> None:
    """Report one completed durable write (a no-op unless the harness is active)."""
    if _installed:
        _count(kind)


def _wrap(fn: F, kind: str) -> F:
    @functools.wraps(fn)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        result = fn(*args, **kwargs)
        target = args[0] if args else kwargs.get("path")
        _count(f"{kind}:{Path(str(target)).parent.name}/{Path(str(target)).name.split('-')[0]}")
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
    wrapped = {name: _wrap(fn, f"fcop.{name}") for name, fn in originals.items()}
    for module_name in _FCOP_MODULES:
        with contextlib.suppress(ImportError):
            module = importlib.import_module(module_name)
            for name, fn in wrapped.items():
                if getattr(module, name, None) is originals[name]:
                    setattr(module, name, fn)
    _installed = True
    return True
