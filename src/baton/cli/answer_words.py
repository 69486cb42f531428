"""How ``baton answer``'s words become an answer: one vocabulary for every kind.

Yes is ``--allow``, ``--approve`` or ``--accept``; no is ``--deny`` or ``--reject``; a
flag that does not fit the kind is refused with the word that does. Kept apart from the
command so the rules read as one table of cases, and :func:`next_step` says what happens
after the answer (who has to act for it).
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from types import MappingProxyType
from typing import Any

from baton.app.facade.requests import (
    GRANT_SCOPES,
    Answer,
    BooleanField,
    ContentValue,
    ElicitationAnswer,
    ElicitationRequest,
    GrantSpec,
    InvalidAnswer,
    MultiSelectField,
    NumberField,
    PermissionAnswer,
    PermissionRequest,
    PlanAnswer,
    PlanRequest,
    QuestionAnswer,
    QuestionRequest,
    QuestionSelection,
    RequestDocument,
    RequestRecord,
    ReviewAnswer,
    ReviewRequest,
)

__all__ = ["build_answer", "next_step", "parse_duration"]


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


@dataclass(kw_only=True, frozen=True, slots=True)
class _Words:
    """The flags of one ``baton answer``, as every kind's builder reads them."""

    yes: bool
    no: bool
    yes_word: str
    select: list[str]
    text: list[str]
    reason: str | None
    revision: str | None
    granting: list[str]
    scope: str | None
    for_: str | None
    uses: int | None
    subject: str | None


def _no_select(kind: str, words: _Words) -> None:
    if words.select:
        raise InvalidAnswer(f"a {kind} request does not take --select")


def _permission(doc: PermissionRequest, words: _Words) -> Answer:
    if words.select or words.text:
        raise InvalidAnswer("a permission request takes --allow or --deny, not --select/--text")
    if not (words.yes or words.no):
        raise InvalidAnswer(
            "a permission request needs --allow or --deny "
            "(add --scope turn|task|role|run|project to allow it again)"
        )
    if words.granting and not words.yes:
        raise InvalidAnswer(f"{', '.join(words.granting)} go with --allow, not --deny")
    if words.granting and words.scope is None:
        raise InvalidAnswer("--for, --uses and --subject need --scope turn|task|role|run|project")
    grant = None
    if words.scope is not None:
        if words.scope not in GRANT_SCOPES:
            raise InvalidAnswer(f"--scope {words.scope!r}: choose one of {', '.join(GRANT_SCOPES)}")
        grant = GrantSpec(
            scope=words.scope,
            for_seconds=parse_duration(words.for_) if words.for_ else None,
            uses=words.uses,
            subject=words.subject or "",
        )
    return PermissionAnswer(decision="allow" if words.yes else "deny", grant=grant)


def _question(doc: QuestionRequest, words: _Words) -> Answer:
    if words.text:
        raise InvalidAnswer("questions take --select, not --text")
    if words.yes:
        raise InvalidAnswer(
            f"a question is answered with --select QUESTION=OPTION, not {words.yes_word} "
            "(or --reject to skip it)"
        )
    if words.no:
        if words.select:
            raise InvalidAnswer("--reject skips the questions; do not also --select")
        return QuestionAnswer(outcome="skipped", reason=words.reason or "skipped by a human")
    if not words.select:
        raise InvalidAnswer(
            "questions need --select QUESTION=OPTION for each question (or --reject)"
        )
    return QuestionAnswer(selections=_selections(doc, words.select), reason=words.reason)


def _yes_or_no(kind: str, words: _Words, *, what: str, flags: str) -> None:
    """A request answered yes or no with an optional reason (a plan, a review)."""
    _no_select(kind, words)
    if words.text:
        raise InvalidAnswer(f"{what} does not take --text")
    if not (words.yes or words.no):
        raise InvalidAnswer(f"{what} needs {flags} [--reason TEXT]")


def _plan(doc: PlanRequest, words: _Words) -> Answer:
    _yes_or_no(doc.kind, words, what="a plan", flags="--accept or --reject")
    bound = doc.revision
    revision = words.revision
    if revision is not None:
        bound = (
            doc.revision if len(revision) >= 8 and doc.revision.startswith(revision) else revision
        )
    return PlanAnswer(
        decision="accept" if words.yes else "reject", revision=bound, reason=words.reason
    )


def _elicitation(doc: ElicitationRequest, words: _Words) -> Answer:
    _no_select(doc.kind, words)
    if words.no:
        if words.text:
            raise InvalidAnswer("--reject declines the form; do not also give --text")
        return ElicitationAnswer(action="decline")
    if not words.yes:
        raise InvalidAnswer("a form needs --accept --text FIELD=VALUE ... (or --reject)")
    return ElicitationAnswer(action="accept", content=_content(doc, words.text))


def _review(doc: ReviewRequest, words: _Words) -> Answer:
    _yes_or_no(doc.kind, words, what="a review", flags="--approve or --reject")
    return ReviewAnswer(decision="approve" if words.yes else "reject", reason=words.reason)


# Any: each builder takes its own document type; the table holds them all.
_BUILDERS: Mapping[type[RequestDocument], Callable[[Any, _Words], Answer]] = MappingProxyType(
    {
        PermissionRequest: _permission,
        QuestionRequest: _question,
        PlanRequest: _plan,
        ElicitationRequest: _elicitation,
        ReviewRequest: _review,
    }
)
"""How each kind reads the words (a test checks every document type has a row)."""


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
    yes = allow or accept
    no = deny or reject
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
    words = _Words(
        yes=yes,
        no=no,
        yes_word="--allow" if allow else "--approve",
        select=select or [],
        text=text or [],
        reason=reason,
        revision=revision,
        granting=granting,
        scope=scope,
        for_=for_,
        uses=uses,
        subject=subject,
    )
    return _BUILDERS[type(doc)](doc, words)


def next_step(record: RequestRecord, *, team_loop_running: bool) -> str:
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
        if team_loop_running:
            return f"baton up is running: it will {act}"
        return f"run `baton up` to {act}"
    if record.connection_id is None:  # the team loop's own question or attention request
        if team_loop_running:
            return "baton up is running: it will act on your answer"
        return "run `baton up` to act on your answer"
    return "the waiting agent has your answer and continues"
