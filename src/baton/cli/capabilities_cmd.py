"""``baton capabilities``: print the capability matrix derived from the provider tables.

A thin layer over :mod:`baton.providers.capabilities`: plain text by default,
``--markdown`` (what ``docs/capabilities.md`` holds) or ``--json``; ``--agent`` limits
it to one provider (a profile name such as ``cursor`` or a family); ``--probe``
merges live ``baton probe`` JSON results.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Annotated

import typer

from baton.app.facade.agents import (
    build_matrix,
    family_of,
    load_probes,
    render_json,
    render_markdown,
    render_text,
)
from baton.cli.shared import command_app
from baton.errors import ConfigError

__all__ = [
    "EXIT_USAGE",
    "app",
    "capabilities",
]

app = command_app(help="What baton supports, per provider.", add_completion=False)

EXIT_USAGE = 2


@app.command()
def capabilities(
    agent: Annotated[
        str | None, typer.Option("--agent", help="One provider (profile or family name).")
    ] = None,
    markdown: Annotated[bool, typer.Option("--markdown", help="Markdown, as in the docs.")] = False,
    json_out: Annotated[bool, typer.Option("--json", help="JSON for tools.")] = False,
    probe: Annotated[
        Path | None,
        typer.Option("--probe", help="Merge live `baton probe` JSON results from this file."),
    ] = None,
) -> None:
    """Print the capability matrix: every seed capability × every provider, with reasons."""
    if markdown and json_out:
        raise ConfigError("choose one of --markdown and --json")
    only = None
    if agent is not None:
        try:
            only = family_of(agent)
        except KeyError:
            raise ConfigError(f"unknown agent {agent!r}") from None
    probes = []
    if probe is not None:
        try:
            probes = load_probes(probe.read_text(encoding="utf-8"))
        except (OSError, json.JSONDecodeError) as exc:
            raise ConfigError(f"cannot read probe results {str(probe)!r}: {exc}") from None
    matrix = build_matrix(probes)
    if markdown:
        text = render_markdown(matrix, only=only)
    elif json_out:
        text = render_json(matrix, only=only)
    else:
        text = render_text(matrix, only=only)
    typer.echo(text, nl=False)
