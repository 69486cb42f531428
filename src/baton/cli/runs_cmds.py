"""``baton runs`` and ``baton log``: the stored runs, and one replayed."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Annotated, Any

import typer
from rich.console import Console
from rich.table import Table

from baton.cli.render import HumanRenderer
from baton.cli.wiring import open_store
from baton.config import load_config
from baton.errors import ConfigError
from baton.store.records import RunRecord

__all__ = ["app"]

app = typer.Typer(add_completion=False, pretty_exceptions_enable=False)


@app.command()
def runs(
    limit: Annotated[int, typer.Option(help="How many.")] = 20,
    json_output: Annotated[bool, typer.Option("--json")] = False,
) -> None:
    """List recent runs."""
    config = load_config(Path.cwd())
    if not config.db_path.exists():
        records = []
    else:
        store = open_store(config)
        try:
            records = store.list_runs(limit)
        finally:
            store.close()
    if json_output:
        for r in records:
            typer.echo(json.dumps(_run_dict(r), ensure_ascii=False))
        return
    table = Table("run", "kind", "agent", "status", "started", "ended", box=None)
    for r in records:
        table.add_row(r.run_id, r.kind, r.agent, r.status, r.created_at, r.ended_at or "")
    Console(highlight=False).print(table)


def _run_dict(r: RunRecord) -> dict[str, Any]:
    return {
        "run_id": r.run_id,
        "kind": r.kind,
        "agent": r.agent,
        "cwd": r.cwd,
        "status": r.status,
        "created_at": r.created_at,
        "ended_at": r.ended_at,
    }


@app.command()
def log(
    run_id: Annotated[str, typer.Argument(help="Run id (see `baton runs`).")],
    json_output: Annotated[bool, typer.Option("--json")] = False,
) -> None:
    """Replay a stored run."""
    config = load_config(Path.cwd())
    store = open_store(config)
    try:
        if store.get_run(run_id) is None:
            raise ConfigError(f"no run {run_id!r} in {config.db_path}")
        if json_output:
            for line in store.iter_event_json(run_id):
                sys.stdout.write(line + "\n")
            return
        renderer = HumanRenderer(live=False)
        for event in store.iter_events(run_id):
            renderer(event)
        renderer.close()
    finally:
        store.close()
