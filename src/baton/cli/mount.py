"""Which module implements each top-level command, and mounting them only when used.

Importing every command module costs more than running most commands (the dashboard's
server, the inbox's markdown renderer, the team loop …), so the root group holds
:class:`LazyCommands`: the names are known from :data:`COMMANDS` without importing
anything, and a command's module is imported (and its click command built, with typer's
own builders) the first time that command is looked up: to run it, for ``baton CMD
--help``, or for completion of its options. Listing every command (``baton --help``,
completing a command name) imports them all. ``tests/cli/test_mount.py`` checks that
:data:`COMMANDS` names exactly what the modules register, in the same order.
"""

from __future__ import annotations

import importlib
from collections.abc import Iterator, MutableMapping
from typing import Any

import typer.main
from typer.core import MarkupMode

from baton.import_gc import importing

__all__ = ["COMMANDS", "COMMAND_MODULES", "LazyCommands", "module_commands"]

COMMANDS: dict[str, str] = {
    "run": "baton.cli.run_cmd",
    "up": "baton.cli.up_cmd",
    "down": "baton.cli.up_cmd",
    "runs": "baton.cli.runs_cmds",
    "log": "baton.cli.runs_cmds",
    "probe": "baton.cli.probe_cmd",
    "schema": "baton.cli.schema_cmd",
    "doctor": "baton.cli.security_cmds",
    "pin": "baton.cli.security_cmds",
    "verify": "baton.cli.security_cmds",
    "admit": "baton.cli.security_cmds",
    "inbox": "baton.cli.requests_cmds",
    "answer": "baton.cli.requests_cmds",
    "init": "baton.cli.coordination_cmds",
    "status": "baton.cli.status_cmds",
    "sessions": "baton.cli.status_cmds",
    "cancel": "baton.cli.status_cmds",
    "capabilities": "baton.cli.capabilities_cmd",
    "serve": "baton.cli.web_cmd",
    "worker": "baton.cli.cluster_cmds",
    "diff": "baton.cli.worktree_cmds",
    "worktrees": "baton.cli.worktree_cmds",
    "agents": "baton.cli.agents_cmds",
    "task": "baton.cli.coordination_cmds",
    "salvage": "baton.cli.worktree_cmds",
    "grants": "baton.cli.grants_cmd",
    "budget": "baton.cli.budget_cmds",
}
"""Top-level command (or group) name → the module whose ``app`` registers it, in the
order ``baton --help`` lists them (commands, then groups, as typer mounts them)."""

COMMAND_MODULES: tuple[str, ...] = tuple(dict.fromkeys(COMMANDS.values()))


# Any: click commands and groups (typer builds them; click does not type them).
def module_commands(
    module: str, *, pretty_exceptions_short: bool, rich_markup_mode: MarkupMode
) -> dict[str, Any]:
    """The click commands and groups a cli module's ``app`` registers, by name."""
    with importing():
        sub = importlib.import_module(module).app
    built: dict[str, Any] = {}
    for info in sub.registered_commands:
        command = typer.main.get_command_from_info(
            info, pretty_exceptions_short=pretty_exceptions_short, rich_markup_mode=rich_markup_mode
        )
        built[command.name or ""] = command
    for group_info in sub.registered_groups:
        group = typer.main.get_group_from_info(
            group_info,
            pretty_exceptions_short=pretty_exceptions_short,
            rich_markup_mode=rich_markup_mode,
            suggest_commands=sub.suggest_commands,
        )
        built[group.name or ""] = group
    return built


class LazyCommands(MutableMapping[str, Any]):
    """The root group's commands: every name of :data:`COMMANDS`, each built on first use."""

    # Any: click commands (see module_commands).
    def __init__(
        self,
        eager: MutableMapping[str, Any],
        *,
        pretty_exceptions_short: bool,
        rich_markup_mode: MarkupMode,
    ) -> None:
        self._built: dict[str, Any] = dict(eager)
        self._pretty_exceptions_short = pretty_exceptions_short
        self._rich_markup_mode = rich_markup_mode

    def loaded(self) -> set[str]:
        """The names whose module has been imported (for tests)."""
        return set(self._built)

    # Any: a click command or group (see module_commands).
    def __getitem__(self, name: str) -> Any:
        if name not in self._built:
            module = COMMANDS.get(name)
            if module is None:
                raise KeyError(name)
            built = module_commands(
                module,
                pretty_exceptions_short=self._pretty_exceptions_short,
                rich_markup_mode=self._rich_markup_mode,
            )
            for built_name, command in built.items():
                self._built.setdefault(built_name, command)
            if name not in self._built:
                raise RuntimeError(f"{module} does not register the command {name!r}")
        return self._built[name]

    # Any: a click command or group (see module_commands).
    def __setitem__(self, name: str, command: Any) -> None:
        self._built[name] = command

    def __delitem__(self, name: str) -> None:
        del self._built[name]

    def __iter__(self) -> Iterator[str]:
        yield from COMMANDS
        yield from (name for name in self._built if name not in COMMANDS)

    def __len__(self) -> int:
        return len(COMMANDS) + sum(1 for name in self._built if name not in COMMANDS)

    def __contains__(self, name: object) -> bool:
        return name in COMMANDS or name in self._built
