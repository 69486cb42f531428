"""Rules every ``baton`` command shares: exit codes, error lines, JSON output, consoles.

Exit codes (the same for every command):

====  ===========================================================================
0     success; for ``run``: the turn completed with ``end_turn`` and every step ran
1     failed: the turn failed (agent error, timeout, agent died), a check failed,
      a thing named on the command line does not exist, or a bug inside baton
2     bad usage or configuration (unknown command or flag, not in a project, …)
3     the agent could not be started or its session not created
4     refused by a security control (admission, pin, containment)
5     ``run``: the turn completed with another stop reason (refusal, max_tokens…)
6     ``run``: the turn completed but a step was denied or failed
130   interrupted by Ctrl-C (SIGINT); 143 by SIGTERM, 129 by SIGHUP (128 + signal)
====  ===========================================================================

Errors are one line on stderr, ``baton: <what is wrong> — <how to fix it>``, in
plain words (no exception class names, no stack). A bug inside baton prints one
line naming the report file that holds the full traceback (see :func:`crash_report`).

``--json`` output has one shape rule: every listing command (``runs``, ``inbox``,
``agents``, ``sessions``, ``task list``) prints NDJSON, one compact object per line,
and nothing else on stdout; every single-object command (``status``, ``task show``,
``probe``, ``answer``) prints one compact JSON object on one line. Event streams
(``run --json``, ``up --json``, ``log --json``) are canonical-event NDJSON.
"""

from __future__ import annotations

import contextlib
import functools
import inspect
import json
import os
import re
import signal
import sys
import tempfile
import threading
import time
import traceback
from collections.abc import Callable, Iterable, Iterator, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any, Final, Literal, ParamSpec, TypeVar

import typer
from rich.console import Console

from baton.errors import AgentError, BatonError, BudgetRefused, ConfigError, SecurityError

if TYPE_CHECKING:
    from baton.cli.render import HumanRenderer, NdjsonRenderer

__all__ = [
    "EXIT_AGENT",
    "EXIT_BUDGET",
    "EXIT_CANCELLED",
    "EXIT_FAILED",
    "EXIT_OK",
    "EXIT_SECURITY",
    "EXIT_STEPS",
    "EXIT_STOP",
    "EXIT_USAGE",
    "ApprovePreset",
    "BatonTyper",
    "CommandError",
    "JsonOption",
    "command_app",
    "crash_report",
    "err",
    "exit_for",
    "exit_for_signal",
    "fail_line",
    "guarded",
    "out",
    "print_json",
    "print_ndjson",
    "progress",
    "renderer",
    "report",
    "say_error",
]

EXIT_OK: Final = 0
EXIT_FAILED: Final = 1
EXIT_USAGE: Final = 2
EXIT_AGENT: Final = 3
EXIT_SECURITY: Final = 4
EXIT_STOP: Final = 5
EXIT_STEPS: Final = 6
EXIT_BUDGET: Final = 7
EXIT_CANCELLED: Final = 128 + signal.SIGINT

PROGRESS_AFTER_SECONDS: Final = 2.0
"""A step that takes longer than this says what it is doing (:func:`progress`)."""

ApprovePreset = Literal["reads", "all", "none"]

JsonOption = Annotated[bool, typer.Option("--json", help="Print JSON.")]
"""The ``--json`` flag of the commands whose JSON is one document (NDJSON ones say so)."""

INVOCATION: list[str] = []
"""The arguments :func:`baton.cli.app.main` was called with (for crash reports)."""

P = ParamSpec("P")
R = TypeVar("R")
CommandFunction = TypeVar("CommandFunction", bound=Callable[..., Any])

err = Console(stderr=True, highlight=False)
"""stderr: progress, hints and errors (never data). At a terminal rich wraps a long line at
word boundaries (the terminal broke words in two); elsewhere lines go out whole."""
err.soft_wrap = not err.is_terminal


PIPE_WIDTH: Final = 10_000
"""The width a table is laid out in when stdout is not a terminal: as wide as its content."""


def out() -> Console:
    """stdout for people, no highlighting (it would colour agent text).

    At a terminal rich wraps what is too long at word boundaries (the terminal's own
    wrapping broke words, and ids, mid-word); to a pipe or a file every line and every
    table row is whole, one line each (rich's default, 80 columns, wrapped table cells
    when nobody was looking at a screen). ``--json`` is the format for programs.
    """
    console = Console(highlight=False)
    if console.is_terminal:
        return console
    return Console(highlight=False, soft_wrap=True, width=PIPE_WIDTH)


class CommandError(BatonError):
    """A problem the command line itself found (a missing run, a bad combination of
    flags): ``message`` says what is wrong, ``hint`` how to fix it, ``code`` the exit code."""

    def __init__(self, message: str, *, hint: str | None = None, code: int = EXIT_FAILED) -> None:
        super().__init__(message)
        self.hint = hint
        self.code = code


def exit_for(exc: BaseException) -> int:
    """The exit code for one of baton's errors (see the table above)."""
    if isinstance(exc, CommandError):
        return exc.code
    if isinstance(exc, SecurityError):
        return EXIT_SECURITY
    if isinstance(exc, ConfigError):
        return EXIT_USAGE
    if isinstance(exc, BudgetRefused):
        return EXIT_BUDGET
    if isinstance(exc, AgentError):
        return EXIT_AGENT
    return EXIT_FAILED


def exit_for_signal(signum: int) -> int:
    """``128 + N``, the shell's convention for "ended by signal N"."""
    return 128 + int(signum)


def fail_line(message: str, hint: str | None = None) -> str:
    """The one error line, ``baton: what — fix``, as rich markup (the text made safe)."""
    from baton.security.display import terminal_safe

    text = message.strip()
    multiline = "\n" in text
    if not multiline:
        text = " ".join(text.split())
    line = "baton: " + terminal_safe(text, inline=not multiline, mark=multiline)
    if hint:
        line += " — " + terminal_safe(hint, inline=True, mark=False)
    return line


def say_error(message: str, hint: str | None = None) -> None:
    """Print the error line on stderr."""
    err.print(fail_line(message, hint), style="red")


def _boundary_hint(exc: BatonError) -> str | None:
    """The "how to fix it" half for errors raised below the command line, which cannot know
    which command the person typed (the one place they are translated for people)."""
    from baton.app.facade.requests import UnknownRequest
    from baton.errors import AgentNotInstalled

    if isinstance(exc, UnknownRequest):
        return "`baton inbox` lists the pending requests (a unique prefix of an id is enough)"
    if isinstance(exc, AgentNotInstalled):
        return (
            "`baton agents install NAME` installs a built-in profile's agent "
            "(`baton agents` shows what is installed), or put the command on PATH"
        )
    return None


def describe(exc: BatonError) -> tuple[str, str | None]:
    """What to tell the user about ``exc``: its message and a hint, without class names."""
    hint = getattr(exc, "hint", None) or _boundary_hint(exc)
    guidance = getattr(exc, "guidance", None)
    message = str(exc) or type(exc).__name__
    if isinstance(guidance, str) and guidance:
        message = f"{message}\n{guidance}"
    return message, hint if isinstance(hint, str) else None


def crash_report(exc: BaseException, *, argv: Iterable[str], where: Path | None = None) -> Path:
    """Write the full traceback of a bug inside baton to a report file and return its path.

    The report goes to the project's ``.baton/crash/`` when there is one (it is already
    out of git), else to the system temporary directory; never to the terminal.
    """
    from baton import __version__
    from baton.app.facade.agents import Redactor

    directory = where if where is not None else Path(tempfile.gettempdir())
    directory.mkdir(parents=True, exist_ok=True, mode=0o700)
    stamp = time.strftime("%Y%m%d-%H%M%S", time.gmtime())
    path = directory / f"baton-crash-{stamp}-{os.getpid()}.txt"
    body = "".join(traceback.format_exception(exc))
    text = (
        f"baton {__version__} on Python {sys.version.split()[0]} ({sys.platform})\n"
        f"argv: {list(argv)!r}\n\n{body}"
    )
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w", encoding="utf-8") as stream:
        stream.write(Redactor().text(text))
    return path


def report(exc: BaseException, args: Iterable[str] = ()) -> int:
    """Print the one line for one of baton's errors (or a bug) and return the exit code."""
    if isinstance(exc, BatonError):
        say_error(*describe(exc))
        return exit_for(exc)
    if isinstance(exc, KeyboardInterrupt) or type(exc).__name__ == "Abort":
        return EXIT_CANCELLED
    from baton.app.facade.config import find_project_dir

    argv = ["baton", *args]
    try:
        project = find_project_dir(Path.cwd())
        where = project / ".baton" / "crash" if project is not None else None
        path = crash_report(exc, argv=argv, where=where)
    except OSError:
        path = crash_report(exc, argv=argv)
    say_error(
        f"internal error ({type(exc).__name__}), a bug in baton",
        f"the full report is in {path}; please attach it to an issue",
    )
    return EXIT_FAILED


def guarded(fn: Callable[P, R]) -> Callable[P, R]:
    """A command whose errors become the shared one line and exit code, wherever it is
    invoked from (the ``baton`` entry point, a sub-app, typer's ``CliRunner``)."""

    @functools.wraps(fn)
    def wrapper(*args: P.args, **kwargs: P.kwargs) -> R:
        try:
            return fn(*args, **kwargs)
        except (typer.Exit, typer.Abort):
            raise
        except BrokenPipeError:
            raise
        except Exception as exc:  # an unexpected error is a bug: a crash report, never a traceback
            raise typer.Exit(report(exc, INVOCATION or sys.argv[1:])) from None

    return wrapper


_KEEP_LINE = re.compile(r"^(?:[-*•] |\d+[.)] |```|\s)")
"""A help line that starts a list item, a code fence or an indented block: kept as a line."""


def reflow_help(text: str) -> str:
    """A help text whose paragraphs are each one line, so the terminal wraps them once.

    Docstrings are hard-wrapped at the source's width; typer keeps those line breaks and
    then wraps again at the terminal's, which gave ragged help. Lists, code fences and
    indented lines keep their own lines (a list item's continuation joins its item).
    """
    out: list[str] = []
    fenced = False
    for paragraph in inspect.cleandoc(text).split("\n\n"):
        lines: list[str] = []
        for line in paragraph.split("\n"):
            keep = fenced or bool(_KEEP_LINE.match(line))
            if line.lstrip().startswith("```"):
                fenced = not fenced
                keep = True
            if lines and not keep and not lines[-1].lstrip().startswith("```"):
                lines[-1] = f"{lines[-1].rstrip()} {line.strip()}"
            else:
                lines.append(line.rstrip())
        out.append("\n".join(lines))
    return "\n\n".join(out)


class BatonTyper(typer.Typer):
    """``typer.Typer`` whose commands are :func:`guarded` and whose help texts are reflowed
    (:func:`reflow_help`); every cli module uses it."""

    # Any: typer's own ``command`` arguments, passed through.
    def command(self, *args: Any, **kwargs: Any) -> Callable[[CommandFunction], CommandFunction]:
        def decorator(fn: CommandFunction) -> CommandFunction:
            text = kwargs.get("help") or fn.__doc__
            extra = {"help": reflow_help(text)} if text else {}
            super(BatonTyper, self).command(*args, **(kwargs | extra))(guarded(fn))
            return fn

        return decorator


# Any: typer.Typer's own keyword arguments, passed through.
def command_app(**kwargs: Any) -> BatonTyper:
    """The ``app`` of a cli module (mounted at the top level by :mod:`baton.cli.app`)."""
    kwargs.setdefault("add_completion", False)
    kwargs.setdefault("pretty_exceptions_enable", False)
    return BatonTyper(**kwargs)


# Any: JSON out.
def print_json(obj: Mapping[str, Any]) -> None:
    """One compact JSON object on one line (single-object commands)."""
    sys.stdout.write(json.dumps(obj, ensure_ascii=False, sort_keys=True) + "\n")
    sys.stdout.flush()


# Any: JSON out.
def print_ndjson(rows: Iterable[Mapping[str, Any]]) -> None:
    """One compact JSON object per line (listing commands)."""
    for row in rows:
        sys.stdout.write(json.dumps(row, ensure_ascii=False, sort_keys=True) + "\n")
    sys.stdout.flush()


def plural(count: int, word: str, many: str | None = None) -> str:
    """``1 step``, ``2 steps``, ``0 steps``."""
    return f"{count} {word if count == 1 else (many or word + 's')}"


@contextlib.contextmanager
def progress(
    label: str, *, after: float = PROGRESS_AFTER_SECONDS, spinner: bool = True
) -> Iterator[None]:
    """Say what a slow step is doing: a spinner on a terminal, one line otherwise (or
    always one line when ``spinner`` is off: a live event view owns the terminal).

    Nothing is shown when the step ends within ``after`` seconds.
    """
    if spinner and err.is_terminal:
        status = err.status(label, spinner="dots")
        timer = threading.Timer(after, status.start)
        timer.start()
        try:
            yield
        finally:
            timer.cancel()
            status.stop()
        return
    timer = threading.Timer(after, lambda: err.print(f"baton: {label}", style="dim", markup=False))
    timer.daemon = True
    timer.start()
    try:
        yield
    finally:
        timer.cancel()


def renderer(json_output: bool) -> HumanRenderer | NdjsonRenderer:
    # The event model (pydantic) loads with the first command that renders events.
    from baton.cli.render import HumanRenderer, NdjsonRenderer

    return NdjsonRenderer() if json_output else HumanRenderer()
