"""The ``baton`` console script: answers ``--version`` before importing the command line.

Importing :mod:`baton.cli.app` mounts every command and with them typer, rich, pydantic
models and the store (about half a second on an idle machine); ``baton --version``
needs none of it. Everything else goes to :func:`baton.cli.app.main` unchanged.
"""

from __future__ import annotations

import sys

from baton.cli.version import VERSION_FLAGS, version_line
from baton.import_gc import importing, own_process

__all__ = ["main"]


def main(argv: list[str] | None = None) -> None:
    args = sys.argv[1:] if argv is None else list(argv)
    if len(args) == 1 and args[0] in VERSION_FLAGS:
        sys.stdout.write(version_line() + "\n")
        return
    own_process()
    try:
        with importing():
            from baton.cli.app import main as run

        run(argv)
    except KeyboardInterrupt:
        # A Ctrl-C before a command installs its own handlers (imports take a while
        # on a loaded machine): one line and the shell's code for SIGINT, no traceback.
        sys.stderr.write("baton: interrupted (Ctrl-C) while starting\n")
        raise SystemExit(130) from None
