"""``baton agents``: the agent profiles and whether each is installed."""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path
from typing import Annotated

import typer
from rich.console import Console
from rich.table import Table

from baton.config import load_config

__all__ = ["app"]

app = typer.Typer(add_completion=False, pretty_exceptions_enable=False)


@app.command()
def agents(json_output: Annotated[bool, typer.Option("--json")] = False) -> None:
    """Agent profiles and whether each is installed."""
    config = load_config(Path.cwd())
    rows = []
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
        for row in rows:
            typer.echo(json.dumps(row))
        return
    table = Table("agent", "installed", "command", "source", box=None)
    for profile, row in zip(config.profiles.values(), rows, strict=True):
        mark = "[green]yes[/]" if row["installed"] else f"[dim]no — {profile.install_hint}[/]"
        table.add_row(profile.name, mark, " ".join(profile.argv()), profile.source)
    Console(highlight=False).print(table)
