"""``baton agents``: the agent profiles and whether each is installed."""

from __future__ import annotations

import os
import shutil
from typing import Annotated, Any

import typer
from rich.table import Table

from baton.cli.project import ProjectOption, any_config
from baton.cli.render import safe
from baton.cli.shared import command_app, out, print_ndjson

__all__ = ["app"]

app = command_app()


@app.command()
def agents(
    json_output: Annotated[
        bool, typer.Option("--json", help="NDJSON, one profile per line.")
    ] = False,
    project: ProjectOption = None,
) -> None:
    """Agent profiles (built-in and the project's) and whether each is installed."""
    config = any_config(project)
    rows: list[dict[str, Any]] = []
    for profile in config.profiles.values():
        argv = profile.argv()
        found = shutil.which(argv[0], path=os.environ.get("PATH")) if argv else None
        rows.append(
            {
                "name": profile.name,
                "title": profile.title,
                "command": argv,
                "installed": found is not None,
                "path": found,
                "source": profile.source,
                "install_hint": profile.install_hint,
            }
        )
    if json_output:
        print_ndjson(rows)
        return
    console = out()
    table = Table(box=None, pad_edge=False, header_style="bold")
    table.add_column("agent", no_wrap=True)
    table.add_column("installed", no_wrap=True)
    table.add_column("command", overflow="fold")
    table.add_column("from", no_wrap=True)
    missing = []
    for row in rows:
        mark = "[green]yes[/]" if row["installed"] else "[dim]no[/]"
        table.add_row(safe(row["name"]), mark, safe(" ".join(row["command"])), safe(row["source"]))
        if not row["installed"] and row["install_hint"]:
            missing.append(row)
    console.print(table)
    for row in missing:
        # One line each, never cut: the command is what the user copies.
        console.print(f"install {safe(row['name'])}: {safe(row['install_hint'])}", soft_wrap=True)
