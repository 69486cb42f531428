"""Start-up without the cyclic garbage collector walking the freshly imported world.

For the ``baton`` command line and the built-in agent. Importing the command line
creates a few hundred thousand objects (pydantic builds every event model's schema),
and the collector runs again and again while it does, finding nothing: the imported
modules, classes and schemas live as long as the process. :func:`importing` turns it off for an import and then freezes what exists
(:func:`gc.freeze`), so later collections, and the last one at exit, skip it. Only a
process's own entry point (the console script, ``python -m``) turns this on, with
:func:`own_process`: imported as a library (tests, ``CliRunner``) nothing changes the
host's collector. On this
machine it saves about a sixth of a trivial ``baton run``'s CPU.

An own process also collects its young generation less often
(:data:`YOUNG_THRESHOLD` allocations instead of 700): ingest allocates a few short-lived
objects per agent update (frames, drafts, events) and handles a read's run of updates at
once, so at 700 the collector walked the same in-flight run again and again (a sixth of
a mixed flood's time, ``docs/performance.md``). Cyclic garbage waits a little longer for
its collection; nothing else changes.
"""

from __future__ import annotations

import gc
from collections.abc import Iterator
from contextlib import contextmanager

__all__ = ["YOUNG_THRESHOLD", "importing", "own_process"]

YOUNG_THRESHOLD = 20_000
"""Allocations between collections of the youngest generation in baton's own process."""


class _Policy:
    owned = False
    """Set by :func:`own_process`: this process was started as baton."""


def own_process() -> None:
    """The entry point says the process is baton's: :func:`importing` applies from now on,
    and the young generation is collected every :data:`YOUNG_THRESHOLD` allocations."""
    _Policy.owned = True
    _, older, oldest = gc.get_threshold()
    gc.set_threshold(YOUNG_THRESHOLD, older, oldest)


@contextmanager
def importing() -> Iterator[None]:
    """Import inside: no collection meanwhile; what the import made is frozen after."""
    if not _Policy.owned:
        yield
        return
    was_enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        gc.freeze()
        if was_enabled:
            gc.enable()
