"""``baton schema``: the JSON Schema of the canonical event stream.

The schema ships inside the package (``baton/events/events.schema.json``, package
data, so an installed baton has it); ``schema/events.schema.json`` in a checkout is a
link to that file. ``--check`` compares the shipped file with the models.
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Final

import typer

from baton.cli.shared import CommandError, command_app, err

__all__ = ["SHIPPED_SCHEMA", "app"]

app = command_app()

SHIPPED_SCHEMA: Final = Path(__file__).resolve().parents[1] / "events" / "events.schema.json"


@app.command()
def schema(
    write: Annotated[
        bool, typer.Option(help="Rewrite the shipped schema file from the models.")
    ] = False,
    check: Annotated[
        bool, typer.Option(help="Exit 1 if the shipped schema file is stale.")
    ] = False,
) -> None:
    """Print (or write/check) the JSON Schema of the canonical event stream."""
    from baton.app.facade.runs import render_schema
    from baton.fsutil import atomic_write

    text = render_schema()
    if check:
        current = SHIPPED_SCHEMA.read_text(encoding="utf-8") if SHIPPED_SCHEMA.exists() else ""
        if current != text:
            raise CommandError(f"{SHIPPED_SCHEMA} is stale", hint="run `baton schema --write`")
        err.print(f"{SHIPPED_SCHEMA} is up to date", markup=False)
        return
    if write:
        atomic_write(SHIPPED_SCHEMA, text.encode("utf-8"), mode=0o644)
        err.print(f"wrote {SHIPPED_SCHEMA}", markup=False)
        return
    typer.echo(text, nl=False)
