"""``baton inbox`` and ``baton answer``: the human side of the request ledger.

Both work from any process on the machine: they open the same SQLite database
as the daemon (WAL, so reads never block it) and ``answer`` rings the ledger's
doorbell after committing, which wakes the waiting daemon at once. Answers are
validated here first, for an immediate and specific error, and again by the
ledger against the persisted request.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Annotated, TypeVar

import typer

from baton.cli.project import ProjectOption, project_config
from baton.cli.shared import command_app, out, plural, print_json, print_ndjson
from baton.cli.worktree_cmds import rebase_reason
from baton.config import BatonConfig
from baton.requests.errors import InvalidAnswer
from baton.requests.ledger import Ledger, RequestRecord
from baton.requests.model import (
    Answer,
    BooleanField,
    ContentValue,
    ElicitationAnswer,
    ElicitationRequest,
    MultiSelectField,
    NumberField,
    PermissionAnswer,
    PermissionRequest,
    PlanAnswer,
    PlanRequest,
    QuestionAnswer,
    QuestionRequest,
    QuestionSelection,
    ReviewAnswer,
)
from baton.requests.render import render, to_data
from baton.requests.states import State
from baton.requests.validate import validate_answer

__all__ = ["CLI_RULE", "app", "build_answer"]

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


def _selections(document: QuestionRequest, values: list[str]) -> tuple[QuestionSelection, ...]:
    merged: dict[str, list[str]] = {}
    for value in values:
        if "=" in value:
            question_id, _, options = value.partition("=")
        elif len(document.questions) == 1:
            question_id, options = document.questions[0].id, value
        else:
            raise InvalidAnswer(
                f"--select {value!r}: this request has {len(document.questions)} questions; "
                "write QUESTION=OPTION (e.g. question-1=option-2)"
            )
        merged.setdefault(question_id.strip(), []).extend(o.strip() for o in options.split(","))
    return tuple(QuestionSelection(question_id=q, option_ids=tuple(o)) for q, o in merged.items())


_TRUE = {"true", "yes", "y", "1", "on"}
_FALSE = {"false", "no", "n", "0", "off"}


def _content(document: ElicitationRequest, values: list[str]) -> dict[str, ContentValue]:
    if len(values) == 1 and values[0].lstrip().startswith("{"):
        try:
            raw = json.loads(values[0])
        except json.JSONDecodeError as exc:
            raise InvalidAnswer(f"--text is not a JSON object: {exc}") from None
        answer = ElicitationAnswer.model_validate({"action": "accept", "content": raw})
        return dict(answer.content or {})
    content: dict[str, ContentValue] = {}
    for value in values:
        name, sep, text = value.partition("=")
        if not sep:
            raise InvalidAnswer(f"--text {value!r}: write FIELD=VALUE")
        field = document.requested_schema.field(name)
        if field is None:
            names = ", ".join(f.name for f in document.requested_schema.fields)
            raise InvalidAnswer(f"unknown form field {name!r}; the form has {names}")
        try:
            if isinstance(field, NumberField):
                content[name] = int(text) if field.type == "integer" else float(text)
            elif isinstance(field, BooleanField):
                if text.lower() not in _TRUE | _FALSE:
                    raise ValueError(text)
                content[name] = text.lower() in _TRUE
            elif isinstance(field, MultiSelectField):
                content[name] = tuple(v.strip() for v in text.split(",") if v.strip())
            else:
                content[name] = text
        except ValueError:
            article = "an" if field.type[0] in "aeiou" else "a"
            raise InvalidAnswer(
                f"field {name!r} wants {article} {field.type}, got {text!r}"
            ) from None
    return content


def build_answer(
    record: RequestRecord,
    *,
    allow: bool = False,
    deny: bool = False,
    select: list[str] | None = None,
    text: list[str] | None = None,
    accept: bool = False,
    reject: bool = False,
    reason: str | None = None,
    revision: str | None = None,
) -> Answer:
    """Turn CLI flags into an answer for ``record``'s kind, refusing flags that do not fit."""
    doc = record.document
    select, text = select or [], text or []
    given = [
        f
        for f, on in (
            ("--allow", allow),
            ("--deny", deny),
            ("--select", select),
            ("--text", text),
            ("--accept/--approve", accept),
            ("--reject", reject),
        )
        if on
    ]

    def only(*allowed: str) -> None:
        extra = [f for f in given if f not in allowed]
        if extra:
            raise InvalidAnswer(f"a {record.kind} request does not take {', '.join(extra)}")

    if doc is None:
        raise InvalidAnswer(
            f"request {record.request_id} was rejected on arrival; nothing to answer"
        )
    if (accept and reject) or (allow and deny):
        raise InvalidAnswer("choose one decision")
    if isinstance(doc, PermissionRequest):
        only("--allow", "--deny")
        if not (allow or deny):
            raise InvalidAnswer("a permission request needs --allow or --deny")
        return PermissionAnswer(decision="allow" if allow else "deny")
    if isinstance(doc, QuestionRequest):
        only("--select", "--reject")
        if reject:
            if select:
                raise InvalidAnswer("--reject skips the questions; do not also --select")
            return QuestionAnswer(outcome="skipped", reason=reason or "skipped by a human")
        if not select:
            raise InvalidAnswer(
                "questions need --select QUESTION=OPTION for each question (or --reject)"
            )
        return QuestionAnswer(selections=_selections(doc, select), reason=reason)
    if isinstance(doc, PlanRequest):
        only("--accept/--approve", "--reject")
        if not (accept or reject):
            raise InvalidAnswer("a plan needs --accept or --reject [--reason TEXT]")
        bound = doc.revision
        if revision is not None:
            bound = (
                doc.revision
                if len(revision) >= 8 and doc.revision.startswith(revision)
                else revision
            )
        return PlanAnswer(decision="accept" if accept else "reject", revision=bound, reason=reason)
    if isinstance(doc, ElicitationRequest):
        only("--accept/--approve", "--reject", "--text")
        if reject:
            if text:
                raise InvalidAnswer("--reject declines the form; do not also give --text")
            return ElicitationAnswer(action="decline")
        if not accept:
            raise InvalidAnswer("a form needs --accept --text FIELD=VALUE ... (or --reject)")
        return ElicitationAnswer(action="accept", content=_content(doc, text))
    only("--accept/--approve", "--reject")
    if not (accept or reject):
        raise InvalidAnswer("a review needs --approve or --reject [--reason TEXT]")
    return ReviewAnswer(decision="approve" if accept else "reject", reason=reason)


@app.command()
def answer(
    request_id: Annotated[str, typer.Argument(help="The request id (a unique prefix is enough).")],
    allow: Annotated[bool, typer.Option("--allow", help="Permission: allow once.")] = False,
    deny: Annotated[bool, typer.Option("--deny", help="Permission: deny.")] = False,
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
            "--accept", "--approve", help="Review: approve; plan or form: accept (same flag)."
        ),
    ] = False,
    reject: Annotated[
        bool, typer.Option("--reject", help="Plan, review: reject; question: skip; form: decline.")
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
    json_out: JsonOption = False,
    db: DbOption = None,
    project: ProjectOption = None,
) -> None:
    """Answer a pending request; the waiting agent continues at once.

    Permission: --allow or --deny. Review: --approve or --reject. Plan: --accept or
    --reject. Question: --select (or --reject to skip). Form: --accept --text, or
    --reject. --reason is optional everywhere.
    """

    async def run(ledger: Ledger) -> tuple[RequestRecord, bool]:
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
        )
        assert record.document is not None
        validate_answer(record.document, built)  # first check, at the surface
        result = await ledger.answer(record.request_id, built, decided_by="human", rule=CLI_RULE)
        return result.record, result.replayed

    record, replayed = _with_ledger(_db_path(db, project), run)
    if json_out:
        print_json(to_data(record) | {"replayed": replayed})
        return
    note = " (already answered with the same answer)" if replayed else ""
    out().print(f"{record.request_id}: {record.state.value}{note}", markup=False)
