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
import re
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Annotated, TypeVar

import typer

from baton.app.worktrees import approval_refusal
from baton.cli.project import ProjectOption, project_config
from baton.cli.services import find
from baton.cli.shared import command_app, out, plural, print_json, print_ndjson
from baton.cli.worktree_cmds import rebase_reason
from baton.config import BatonConfig
from baton.requests.errors import InvalidAnswer
from baton.requests.grant_book import GrantBook
from baton.requests.grants import GRANT_SCOPES, Grant
from baton.requests.ledger import Ledger, RequestRecord
from baton.requests.model import (
    Answer,
    BooleanField,
    ContentValue,
    ElicitationAnswer,
    ElicitationRequest,
    GrantSpec,
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
    ReviewRequest,
)
from baton.requests.render import grant_data, render, to_data
from baton.requests.states import State
from baton.requests.validate import validate_answer

__all__ = ["CLI_RULE", "app", "build_answer", "next_step", "parse_duration"]

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


_DURATION = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*([smhdw]?)\s*$")
_UNIT = {"": 1, "s": 1, "m": 60, "h": 3600, "d": 86400, "w": 7 * 86400}


def parse_duration(text: str) -> float:
    """``90s``, ``30m``, ``1h``, ``2d``, ``1w`` (a bare number is seconds)."""
    found = _DURATION.match(text)
    if found is None or float(found.group(1)) <= 0:
        raise InvalidAnswer(f"--for {text!r}: write a duration such as 30m, 1h or 2d")
    return float(found.group(1)) * _UNIT[found.group(2)]


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
    scope: str | None = None,
    for_: str | None = None,
    uses: int | None = None,
    subject: str | None = None,
) -> Answer:
    """Turn CLI flags into an answer for ``record``'s kind, refusing flags that do not fit.

    One vocabulary: ``--allow``, ``--approve`` and ``--accept`` say yes, ``--deny`` and
    ``--reject`` say no, for every kind where that is unambiguous (a question needs its
    ``--select``ions; no to it skips it). A grant (``--scope``, with ``--for``, ``--uses``,
    ``--subject``) goes only with yes to a permission.
    """
    doc = record.document
    select, text = select or [], text or []
    yes = allow or accept
    no = deny or reject
    yes_word = "--allow" if allow else "--approve"
    granting = [
        f
        for f, on in (
            ("--scope", scope),
            ("--for", for_),
            ("--uses", uses is not None),
            ("--subject", subject),
        )
        if on
    ]
    if doc is None:
        raise InvalidAnswer(
            f"request {record.request_id} was rejected on arrival; nothing to answer"
        )
    if yes and no:
        raise InvalidAnswer("choose one decision: yes (--allow/--approve) or no (--deny/--reject)")
    if granting and not isinstance(doc, PermissionRequest):
        raise InvalidAnswer(
            f"{', '.join(granting)}: only a permission can be granted beyond this request"
        )
    if isinstance(doc, PermissionRequest):
        if select or text:
            raise InvalidAnswer("a permission request takes --allow or --deny, not --select/--text")
        if not (yes or no):
            raise InvalidAnswer(
                "a permission request needs --allow or --deny "
                "(add --scope turn|task|role|run|project to allow it again)"
            )
        if granting and not yes:
            raise InvalidAnswer(f"{', '.join(granting)} go with --allow, not --deny")
        if granting and scope is None:
            raise InvalidAnswer(
                "--for, --uses and --subject need --scope turn|task|role|run|project"
            )
        grant = None
        if scope is not None:
            if scope not in GRANT_SCOPES:
                raise InvalidAnswer(f"--scope {scope!r}: choose one of {', '.join(GRANT_SCOPES)}")
            grant = GrantSpec(
                scope=scope,
                for_seconds=parse_duration(for_) if for_ else None,
                uses=uses,
                subject=subject or "",
            )
        return PermissionAnswer(decision="allow" if yes else "deny", grant=grant)
    if isinstance(doc, QuestionRequest):
        if text:
            raise InvalidAnswer("questions take --select, not --text")
        if yes:
            raise InvalidAnswer(
                f"a question is answered with --select QUESTION=OPTION, not {yes_word} "
                "(or --reject to skip it)"
            )
        if no:
            if select:
                raise InvalidAnswer("--reject skips the questions; do not also --select")
            return QuestionAnswer(outcome="skipped", reason=reason or "skipped by a human")
        if not select:
            raise InvalidAnswer(
                "questions need --select QUESTION=OPTION for each question (or --reject)"
            )
        return QuestionAnswer(selections=_selections(doc, select), reason=reason)
    if select:
        raise InvalidAnswer(f"a {record.kind} request does not take --select")
    if isinstance(doc, PlanRequest):
        if text:
            raise InvalidAnswer("a plan does not take --text")
        if not (yes or no):
            raise InvalidAnswer("a plan needs --accept or --reject [--reason TEXT]")
        bound = doc.revision
        if revision is not None:
            bound = (
                doc.revision
                if len(revision) >= 8 and doc.revision.startswith(revision)
                else revision
            )
        return PlanAnswer(decision="accept" if yes else "reject", revision=bound, reason=reason)
    if isinstance(doc, ElicitationRequest):
        if no:
            if text:
                raise InvalidAnswer("--reject declines the form; do not also give --text")
            return ElicitationAnswer(action="decline")
        if not yes:
            raise InvalidAnswer("a form needs --accept --text FIELD=VALUE ... (or --reject)")
        return ElicitationAnswer(action="accept", content=_content(doc, text))
    if text:
        raise InvalidAnswer("a review does not take --text")
    if not (yes or no):
        raise InvalidAnswer("a review needs --approve or --reject [--reason TEXT]")
    return ReviewAnswer(decision="approve" if yes else "reject", reason=reason)


def next_step(record: RequestRecord, *, daemon_running: bool) -> str:
    """What happens after this answer, and who has to act for it (one line)."""
    answer = record.answer
    if record.kind == "review":
        doc = record.document
        approved = isinstance(answer, ReviewAnswer) and answer.decision == "approve"
        merges = isinstance(doc, ReviewRequest) and doc.changes is not None
        act = (
            ("merge the task tree's branch and close the task" if merges else "close the task")
            if approved
            else "send the task back with your reason"
        )
        if daemon_running:
            return f"baton up is running: it will {act}"
        return f"run `baton up` to {act}"
    if record.connection_id is None:  # the team loop's own question or attention request
        if daemon_running:
            return "baton up is running: it will act on your answer"
        return "run `baton up` to act on your answer"
    return "the waiting agent has your answer and continues"


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
    after = next_step(record, daemon_running=running)
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
