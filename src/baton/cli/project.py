"""Which project a command works on: ``-C/--project DIR``, else found upward from the cwd.

One rule for every command, like git: the project is the nearest directory at or
above the start directory (``-C DIR``, or the current one) that holds a
``baton.toml``. Commands that keep state (the store, the team) need one and fail the
same way outside one (:func:`not_in_project`, exit 2); nothing falls back silently
to a global store. ``BATON_STATE_DIR`` in the environment is an explicit choice of
state directory and counts as one for commands that need only the store.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer

from baton.app.facade.config import BatonConfig, find_project_dir, load_config
from baton.cli.shared import EXIT_USAGE, CommandError

if TYPE_CHECKING:
    from baton.app.facade.fcop import CoordinationContext

__all__ = [
    "ProjectOption",
    "any_config",
    "coordination",
    "not_in_project",
    "project_config",
    "set_global_project",
    "start_dir",
]

ProjectOption = Annotated[
    Path | None,
    typer.Option(
        "-C",
        "--project",
        help="The project directory (default: found upward from the current one, like git).",
        metavar="DIR",
        show_default=False,
    ),
]

_global_project: Path | None = None


def set_global_project(path: Path | None) -> None:
    """``baton -C DIR COMMAND``: the root's option, used when the command's own is absent."""
    global _global_project
    _global_project = path


def start_dir(option: Path | None) -> Path:
    """Where discovery starts: ``-C DIR`` (the command's, else the root's), else the cwd."""
    chosen = option if option is not None else _global_project
    if chosen is None:
        return Path.cwd()
    if not chosen.is_dir():
        raise CommandError(
            f"-C {chosen}: no such directory", hint="pass the project's directory", code=EXIT_USAGE
        )
    return chosen.resolve()


def checked(config: BatonConfig) -> BatonConfig:
    """Every table of the configuration checked now (see :func:`check_config`)."""
    from baton.app.configuration import check_config

    return check_config(config)


def not_in_project(start: Path) -> CommandError:
    """The one failure of every command that needs a project, outside one."""
    return CommandError(
        f"not in a baton project (no baton.toml in {start} or any parent)",
        hint="run `baton init` in your repository, or pass -C DIR",
        code=EXIT_USAGE,
    )


def project_config(option: Path | None) -> BatonConfig:
    """The project's configuration, for commands that read or write the store."""
    start = start_dir(option)
    config = checked(load_config(start))
    if config.project_dir is None and not os.environ.get("BATON_STATE_DIR"):
        raise not_in_project(start)
    return config


def any_config(option: Path | None) -> BatonConfig:
    """The configuration for commands that also work outside a project (built-ins only)."""
    return checked(load_config(start_dir(option)))


def coordination(option: Path | None) -> CoordinationContext:
    """The project's team and FCoP workspace (``up``, ``status``, ``task``, ``sessions``)."""
    from baton.app.facade.fcop import open_context

    start = start_dir(option)
    if find_project_dir(start) is None:
        raise not_in_project(start)
    checked(load_config(start))
    return open_context(start)
