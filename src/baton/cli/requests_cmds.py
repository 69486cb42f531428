"""``baton inbox`` and ``baton answer``: the human side of the request ledger.

Both work from any process on the machine: they open the same SQLite database
as the team loop (WAL, so reads never block it) and ``answer`` rings the ledger's
doorbell after committing, which wakes the waiting team loop at once. Answers are
validated here first, for an immediate and specific error, and again by the
ledger against the persisted request.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Annotated, TypeVar

import typer

from baton.app.facade.config import BatonConfig
from baton.app.facade.requests import (
    Grant,
    GrantBook,
    InvalidAnswer,
    Ledger,
    RequestRecord,
    ReviewAnswer,
    State,
    grant_data,
    render,
    to_data,
    validate_answer,
)
from baton.app.worktrees import approval_refusal
from baton.cli.answer_words import build_answer, next_step
from baton.cli.project import ProjectOption, project_config
from baton.cli.services import find
from baton.cli.shared import command_app, out, plural, print_json, print_ndjson
from baton.cli.worktree_cmds import rebase_reason

__all__ = ["CLI_RULE", "app"]

CLI_RULE = "cli"
"""The ``rule`` of an answer given with ``baton answer`` (cf. ``web``, ``terminal``)."""

app = command_app(help="Human requests: what agents are waiting for.", no_args_is_help=True)

T = TypeVar("T")

DbOption = Annotated[
    Path | None,
    typer.Option("--db", hidden=True, help="A baton database file (instead of the project's)."),
]
JsonOption = Annotated[bool, typer.Option("--json", help="Print NDJSON instead of panels.")]


def _db_path(db: Path | None, project: Path | None) -> Path | BatonConfig:
    """``--db``'s file, else the project's configuration (its store: SQLite, or
    PostgreSQL with a ``[cluster]`` section)."""
    if db is not None:
        return db
    return project_config(project)


def _with_ledger(db: Path | BatonConfig, fn: Callable[[Ledger], Awaitable[T]]) -> T:
    """Open the ledger over the store; first, runs whose process died expire their
    open requests, so the inbox never shows a request nobody can deliver."""
    from baton.app import Baton

    async def main() -> T:
        opened = Baton.open(config=db) if isinstance(db, BatonConfig) else Baton.open(db_path=db)
        async with opened as baton:
            return await fn(baton.ledger)

    return asyncio.run(main())


@app.command()
def inbox(
    json_out: JsonOption = False,
    all_: Annotated[
        bool, typer.Option("--all", help="Every recent request, in any state.")
    ] = False,
    db: DbOption = None,
    project: ProjectOption = None,
) -> None:
    """Show pending requests (permissions with their command or diff, questions, plans)."""

    async def fetch(ledger: Ledger) -> list[RequestRecord]:
        if all_:
            return await ledger.list_requests()
        return await ledger.pending()

    records = _with_ledger(_db_path(db, project), fetch)
    if json_out:
        print_ndjson(to_data(record) for record in records)
        return
    console = out()
    if not records:
        console.print("no pending requests" if not all_ else "no requests yet")
    for record in records:
        console.print(render(record))
    if records and not all_:
        console.print(
            f"{plural(len(records), 'request')} waiting · `baton answer ID …` (a unique prefix"
            " of the id is enough; --reason is optional)",
            style="dim",
            markup=False,
        )


@app.command()
def answer(
    request_id: Annotated[str, typer.Argument(help="The request id (a unique prefix is enough).")],
    allow: Annotated[
        bool, typer.Option("--allow", help="Yes: allow a permission (same as --approve).")
    ] = False,
    deny: Annotated[bool, typer.Option("--deny", help="No: deny (same as --reject).")] = False,
    select: Annotated[
        list[str] | None,
        typer.Option("--select", help="Question: QUESTION=OPTION[,OPTION]; repeat per question."),
    ] = None,
    text: Annotated[
        list[str] | None,
        typer.Option("--text", help="Form: FIELD=VALUE (repeat), or one JSON object."),
    ] = None,
    accept: Annotated[
        bool,
        typer.Option(
            "--approve", "--accept", help="Yes: approve a review, accept a plan or form, allow."
        ),
    ] = False,
    reject: Annotated[
        bool,
        typer.Option(
            "--reject", help="No: reject a review or plan, skip questions, decline, deny."
        ),
    ] = False,
    reason: Annotated[str | None, typer.Option("--reason", help="Why (sent to the agent).")] = None,
    rebase: Annotated[
        bool,
        typer.Option(
            "--rebase",
            help="Review: send it back to rebase on its base (the merge preflight's "
            "conflicting files are the reason; --reason adds to it).",
        ),
    ] = False,
    revision: Annotated[
        str | None, typer.Option("--revision", help="Plan: the revision you reviewed (prefix ok).")
    ] = None,
    scope: Annotated[
        str | None,
        typer.Option(
            "--scope",
            help="Permission: also allow requests like this one in this turn, task (tree), "
            "role, run or project (a grant).",
        ),
    ] = None,
    for_: Annotated[
        str | None, typer.Option("--for", help="Grant: how long (30m, 1h, 2d).")
    ] = None,
    uses: Annotated[
        int | None, typer.Option("--uses", min=1, help="Grant: how many requests it answers.")
    ] = None,
    subject: Annotated[
        str | None,
        typer.Option(
            "--subject",
            help="Grant: the argv prefix (npm test), path glob (src/**) or host it covers "
            "(default: the program and its sub-command, the file, the host).",
        ),
    ] = None,
    json_out: JsonOption = False,
    db: DbOption = None,
    project: ProjectOption = None,
) -> None:
    """Answer a pending request; the waiting agent continues at once.

    Yes is --allow, --approve or --accept; no is --deny or --reject, for every kind.
    Question: --select (or --reject to skip). Form: --accept --text. A permission can be
    granted beyond this request: --allow --scope turn|task|role|run|project [--for 1h]
    [--uses 5] [--subject PREFIX|GLOB|HOST]. Review: --rebase sends a conflicting tree back
    to rebase on its base. --reason is optional everywhere.
    """
    where = _db_path(db, project)

    async def run(ledger: Ledger) -> tuple[RequestRecord, bool, Grant | None]:
        record = await ledger.get(await ledger.resolve_id(request_id))
        if record.state is not State.PENDING and record.answer is None:
            why = f" ({record.reason})" if record.reason else ""
            raise InvalidAnswer(f"request {record.request_id} is {record.state.value}{why}")
        built = build_answer(
            record,
            allow=allow,
            deny=deny,
            select=select,
            text=text,
            accept=accept,
            reject=reject or rebase,
            reason=rebase_reason(project, ledger.store, record, reason) if rebase else reason,
            revision=revision,
            scope=scope,
            for_=for_,
            uses=uses,
            subject=subject,
        )
        assert record.document is not None
        validate_answer(record.document, built)  # first check, at the surface
        project_dir = where.project_dir if isinstance(where, BatonConfig) else None
        if project_dir and isinstance(built, ReviewAnswer) and built.decision == "approve":
            refused = await asyncio.to_thread(approval_refusal, project_dir, ledger.store, record)
            if refused is not None:
                raise InvalidAnswer(
                    f"{refused}; the review stays open: --rebase sends it back to rebase, "
                    "--reject --reason with other work"
                )
        result = await ledger.answer(record.request_id, built, decided_by="human", rule=CLI_RULE)
        grant = await GrantBook(ledger.store).of_request(record.request_id)
        return result.record, result.replayed, grant

    record, replayed, grant = _with_ledger(where, run)
    running = isinstance(where, BatonConfig) and find(where.state_dir, "up") is not None
    after = next_step(record, team_loop_running=running)
    if json_out:
        print_json(
            to_data(record)
            | {
                "replayed": replayed,
                "next": after,
                "grant": grant_data(grant) if grant is not None else None,
            }
        )
        return
    note = " (already answered with the same answer)" if replayed else ""
    console = out()
    console.print(f"{record.request_id}: {record.state.value}{note} · {after}", markup=False)
    if grant is not None:
        console.print(
            f"granted {grant.grant_id}: {grant.describe()}"
            + (f", until {grant.expires_at}" if grant.expires_at else "")
            + (f", {grant.uses_left} uses" if grant.uses_left is not None else "")
            + f" · revoke with `baton grants revoke {grant.grant_id}`",
            markup=False,
        )
