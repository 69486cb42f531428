"""The ``baton`` command line: a thin typer layer over the runner and the store.

Each command group lives in its own module with its own ``app``; this module
mounts them at the top level and owns :func:`main`, the one place that turns
errors into a message and an exit code (see :mod:`baton.cli.shared`).
"""

from __future__ import annotations

import sys
from collections.abc import Callable
from typing import Any

import typer

from baton.cli.render import safe
from baton.cli.shared import EXIT_CANCELLED, EXIT_USAGE, err, exit_for
from baton.errors import BatonError

__all__ = ["app", "main"]

app = typer.Typer(
    name="baton",
    help="Run teams of ACP coding agents, durably and safely.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
)


def _mount(module: str) -> None:
    """Add the commands of a sub-app (owned by another module) at the top level."""
    import importlib

    try:
        sub = importlib.import_module(module).app
    except ImportError:
        return
    for command in sub.registered_commands:
        app.registered_commands.append(command)
    for group in sub.registered_groups:
        app.registered_groups.append(group)


for _module in (
    "baton.cli.run_cmd",
    "baton.cli.up_cmd",
    "baton.cli.runs_cmds",
    "baton.cli.agents_cmds",
    "baton.cli.probe_cmd",
    "baton.cli.schema_cmd",
    "baton.cli.security_cmds",
    "baton.cli.requests_cmds",
    "baton.cli.coordination_cmds",
    "baton.cli.capabilities_cmd",
    "baton.cli.web_cmd",
):
    _mount(_module)


def main(argv: list[str] | None = None) -> None:
    """Entry point: one place that turns baton errors into ``Type: message`` and a code."""
    handler: Callable[..., Any] = typer.main.get_command(app)
    try:
        code = handler(args=argv, standalone_mode=False)
    except BatonError as exc:
        err.print(f"[red]{type(exc).__name__}:[/] {safe(str(exc))}")
        sys.exit(exit_for(exc))
    except typer.Exit as exc:
        sys.exit(exc.exit_code)
    except (typer.Abort, KeyboardInterrupt):
        sys.exit(EXIT_CANCELLED)
    except Exception as exc:
        import click

        if isinstance(exc, click.ClickException):
            exc.show()
            sys.exit(EXIT_USAGE)
        raise
    sys.exit(code if isinstance(code, int) else 0)
