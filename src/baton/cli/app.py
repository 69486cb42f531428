"""The ``baton`` command line: a thin typer layer over the runner and the store.

Each command group lives in its own module with its own ``app``; this module
mounts them at the top level, each imported only when it is used
(:mod:`baton.cli.mount`), and owns :func:`main`, the one place that turns
errors into one line and an exit code (the rules are in :mod:`baton.cli.shared`):

* a usage mistake (unknown command or flag, missing argument) prints
  ``baton: <problem> — <fix>`` (with "did you mean" for commands) and exits 2;
* one of baton's errors prints its message and exits with its code;
* anything else is a bug in baton: one line naming the report file that holds the
  traceback (:func:`~baton.cli.shared.crash_report`), exit 1.
"""

from __future__ import annotations

import functools
import os
import signal
import sys
from collections.abc import Mapping
from typing import Annotated, Any

import typer
from typer.core import TyperGroup

from baton.cli.mount import COMMAND_MODULES, LazyCommands
from baton.cli.project import ProjectOption, set_global_project
from baton.cli.shared import (
    EXIT_FAILED,
    EXIT_OK,
    EXIT_USAGE,
    INVOCATION,
    BatonTyper,
    report,
    say_error,
)
from baton.cli.version import version_line
from baton.errors import BatonError

__all__ = ["COMMAND_MODULES", "app", "main"]

app = BatonTyper(
    name="baton",
    help="Run teams of ACP coding agents, durably and safely.",
    no_args_is_help=True,
    add_completion=True,
    pretty_exceptions_enable=False,
    context_settings={"help_option_names": ["-h", "--help"]},
)


def _version(value: bool) -> None:
    if value:
        typer.echo(version_line())
        raise typer.Exit(EXIT_OK)


@app.callback()
def _root(
    project: ProjectOption = None,
    version: Annotated[
        bool,
        typer.Option(
            "--version", "-V", callback=_version, is_eager=True, help="Print the version and exit."
        ),
    ] = False,
) -> None:
    """Run teams of ACP coding agents, durably and safely.

    Start in your repository with `baton init`; `baton COMMAND -h` explains each command.
    """
    set_global_project(project)


@functools.cache
def _usage_error_types() -> tuple[type[BaseException], ...]:
    """The usage-error classes of the installed typer (its own since 0.27) and of click."""
    found: list[type[BaseException]] = []
    exceptions = getattr(typer, "exceptions", None)
    typer_base = getattr(exceptions, "TyperException", None)
    if isinstance(typer_base, type) and issubclass(typer_base, BaseException):
        found.append(typer_base)
    try:
        import click

        found.append(click.ClickException)
    except ImportError:  # pragma: no cover - typer without click
        pass
    return tuple(found)


def _command_names(ctx: Any) -> list[str]:
    command = getattr(ctx, "command", None)
    commands = getattr(command, "commands", None)
    return sorted(commands) if isinstance(commands, Mapping) else []


def _usage_line(exc: BaseException) -> tuple[str, str | None, int]:
    """One line for a usage mistake: what is wrong, how to fix it, the exit code."""
    ctx = getattr(exc, "ctx", None)
    path = getattr(ctx, "command_path", "") or "baton"
    fmt = getattr(exc, "format_message", None)
    message = str(fmt() if callable(fmt) else exc).strip()
    if type(exc).__name__ == "NoArgsIsHelpError":
        # `baton` or `baton task` alone: the help *is* the answer.
        typer.echo(message)
        return "", None, EXIT_OK
    code = getattr(exc, "exit_code", EXIT_USAGE)
    code = EXIT_USAGE if not isinstance(code, int) or code == EXIT_FAILED else code
    where = path.removeprefix("baton").strip()
    prefix = f"{where}: " if where else ""
    if message.startswith("No such command"):
        typed = message.split("'")[1] if message.count("'") >= 2 else ""
        message = f"{prefix}no such command {typed!r}"
        import difflib  # only for a mistyped command

        close = difflib.get_close_matches(typed, _command_names(ctx), n=2, cutoff=0.7)
        if close:
            message += " (did you mean " + " or ".join(f"`{path} {c}`" for c in close) + "?)"
        return message, f"`{path} --help` lists the commands", code
    message = message.rstrip(".").replace("(Possible options:", "(did you mean")
    if "(did you mean" in message and not message.endswith("?)"):
        message = message.removesuffix(")") + "?)"
    return f"{prefix}{message[:1].lower()}{message[1:]}", f"see `{path} --help`", code


class BatonGroup(TyperGroup):
    """The root group: its commands are mounted lazily (:class:`~baton.cli.mount.LazyCommands`),
    and every command's errors become one line and an exit code here, so ``main()`` and
    typer's ``CliRunner`` behave the same."""

    # Any: click's own signature (commands by name, the group's settings).
    def __init__(self, *, commands: Any = None, **kwargs: Any) -> None:
        super().__init__(
            commands=LazyCommands(  # type: ignore[arg-type]  # typer stores a MutableMapping
                dict(commands or {}),
                pretty_exceptions_short=app.pretty_exceptions_short,
                rich_markup_mode=kwargs.get("rich_markup_mode"),
            ),
            **kwargs,
        )

    # Any: click's Context, as click types it.
    def list_commands(self, ctx: Any) -> list[str]:
        return list(self.commands)  # the names alone: no module is imported for them

    # Any: click's Context and a command's result, as click types them.
    def invoke(self, ctx: Any) -> Any:
        try:
            return super().invoke(ctx)
        except (typer.Exit, typer.Abort):
            raise
        except BaseException as exc:
            raise typer.Exit(handle(exc, sys.argv[1:])) from None


app.info.cls = BatonGroup


def handle(exc: BaseException, args: list[str]) -> int:
    """Print the one line for ``exc`` and return the exit code."""
    if isinstance(exc, typer.Exit):
        return exc.exit_code
    if isinstance(exc, BatonError | typer.Abort | KeyboardInterrupt):
        return report(exc, args)
    if isinstance(exc, BrokenPipeError):
        # `baton runs | head`: the reader left; say nothing more (and not on flush at exit).
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        return 128 + signal.SIGPIPE
    if isinstance(exc, _usage_error_types()):  # click only when something went wrong
        message, hint, code = _usage_line(exc)
        if message:
            say_error(message, hint)
        return code
    if isinstance(exc, Exception):
        return report(exc, args)
    raise exc


def main(argv: list[str] | None = None) -> None:
    """Entry point: run the command; errors become one line and an exit code."""
    args = sys.argv[1:] if argv is None else list(argv)
    INVOCATION[:] = args
    command = typer.main.get_command(app)
    try:
        result = command.main(args=args, prog_name="baton", standalone_mode=False)
        code = result if isinstance(result, int) else EXIT_OK
    except BaseException as exc:
        if isinstance(exc, SystemExit):
            raise
        code = handle(exc, args)
    sys.exit(code)
