"""What ``baton --version`` prints: one rule for the fast path and the typer option.

Its own module (importing only :mod:`baton`) so :mod:`baton.cli.entry` can answer
``--version`` before the command line is imported, and :mod:`baton.cli.app` can say the
same without importing the entry point.
"""

from __future__ import annotations

__all__ = ["VERSION_FLAGS", "version_line"]

VERSION_FLAGS = ("--version", "-V")


def version_line() -> str:
    from baton import __version__

    return f"baton {__version__}"
