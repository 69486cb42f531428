"""``baton schema``: the JSON Schema of the canonical event stream."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from baton.cli.shared import err

__all__ = ["app"]

app = typer.Typer(add_completion=False, pretty_exceptions_enable=False)


@app.command()
def schema(
    write: Annotated[bool, typer.Option(help="Write schema/events.schema.json.")] = False,
    check: Annotated[bool, typer.Option(help="Exit 1 if the committed schema is stale.")] = False,
) -> None:
    """Print (or write/check) the JSON Schema of the canonical event stream."""
    from baton.events.schema import render_schema

    text = render_schema()
    target = Path(__file__).resolve().parents[3] / "schema" / "events.schema.json"
    if check:
        current = target.read_text(encoding="utf-8") if target.exists() else ""
        if current != text:
            err.print(f"{target} is stale; run `baton schema --write`")
            raise typer.Exit(1)
        return
    if write:
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(text, encoding="utf-8")
        err.print(f"wrote {target}")
        return
    typer.echo(text, nl=False)
