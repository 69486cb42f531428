"""Start-up without the cyclic garbage collector walking the freshly imported world.

For the ``baton`` command line and the built-in agent. Importing the command line
creates a few hundred thousand objects (pydantic builds every event model's schema),
and the collector runs again and again while it does, finding nothing: the imported
modules, classes and schemas live as long as the process. :func:`importing` turns it off for an import and then freezes what exists
(:func:`gc.freeze`), so later collections, and the last one at exit, skip it. On this
machine it saves about a sixth of a trivial ``baton run``'s CPU.
"""

from __future__ import annotations

import gc
from collections.abc import Iterator
from contextlib import contextmanager

__all__ = ["importing"]


@contextmanager
def importing() -> Iterator[None]:
    """Import inside: no collection meanwhile; what the import made is frozen after."""
    was_enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        gc.freeze()
        if was_enabled:
            gc.enable()
