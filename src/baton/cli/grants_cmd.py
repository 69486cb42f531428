"""``baton grants``: the human's scoped grants, listed and revoked.

A grant is made by answering a permission with ``--scope`` (``baton answer ID --allow
--scope task --for 1h --uses 5``) or the dashboard's grant form; baton answers later
requests it covers with the agent's one-time option itself, naming the grant. Revoking
takes effect for the next request: a revoked (or expired, or spent) grant never answers.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Annotated, TypeVar

import typer
from rich.table import Table

from baton.app.facade.requests import Grant, GrantBook, grant_data
from baton.cli.project import ProjectOption, project_config
from baton.cli.shared import command_app, out, print_json, print_ndjson
from baton.security.display import terminal_safe

__all__ = ["app"]

T = TypeVar("T")

app = command_app(help="Scoped grants: what baton allows again without asking.")

grants_app = typer.Typer(
    help="Scoped grants: list them (or `baton grants revoke ID`).",
    invoke_without_command=True,
    no_args_is_help=False,
)
app.add_typer(grants_app, name="grants")

JsonOption = Annotated[bool, typer.Option("--json", help="Print NDJSON, one grant per line.")]


def _with_book(project: Path | None, fn: Callable[[GrantBook], Awaitable[T]]) -> T:
    from baton.app import Baton

    config = project_config(project)

    async def main() -> T:
        async with Baton.open(config=config, recover=False) as baton:
            return await fn(GrantBook(baton.store))

    return asyncio.run(main())


def _row(grant: Grant, now: str) -> list[str]:
    left = "unlimited" if grant.uses_left is None else str(grant.uses_left)
    return [
        grant.grant_id,
        grant.state(now),
        grant.tool_kind,
        terminal_safe(grant.subject, inline=True),
        grant.scope + ("" if grant.scope == "project" else f" {grant.scope_key}"),
        grant.expires_at or "never",
        f"{grant.uses} used · {left} left",
    ]


@grants_app.callback()
def grants(
    ctx: typer.Context,
    json_out: JsonOption = False,
    project: ProjectOption = None,
) -> None:
    """List the project's grants (active ones first), newest first."""
    if ctx.invoked_subcommand is not None:
        return

    async def read(book: GrantBook) -> tuple[list[Grant], str]:
        return await book.list(), book.now()

    found, now = _with_book(project, read)
    found = sorted(found, key=lambda g: g.state(now) != "active")
    if json_out:
        print_ndjson(grant_data(g, now) for g in found)
        return
    console = out()
    if not found:
        console.print("no grants yet (answer a permission with --allow --scope …)")
        return
    table = Table("id", "state", "kind", "subject", "scope", "expires", "uses", box=None)
    for grant in found:
        table.add_row(*_row(grant, now))
    console.print(table)


@grants_app.command()
def revoke(
    grant_id: Annotated[str, typer.Argument(help="The grant id (a unique prefix is enough).")],
    json_out: Annotated[bool, typer.Option("--json", help="Print the grant as JSON.")] = False,
    project: ProjectOption = None,
) -> None:
    """Revoke a grant: it answers nothing from now on."""

    async def write(book: GrantBook) -> tuple[Grant, bool, str]:
        grant, changed = await book.revoke(grant_id)
        return grant, changed, book.now()

    grant, changed, now = _with_book(project, write)
    if json_out:
        print_json(grant_data(grant, now) | {"revoked_now": changed})
        return
    note = "revoked" if changed else f"already revoked at {grant.revoked_at}"
    out().print(f"{grant.grant_id}: {note} ({grant.describe()})", markup=False)
