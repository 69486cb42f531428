"""Answer validation against a request document: pure, and run twice.

A surface (CLI, web, a notifier's reply) validates an answer before sending it
so the human gets an immediate, specific error; the ledger validates it again
inside the write transaction against the *persisted* document, because the
surface may be another process holding an outdated copy, or a forger. Both use
:func:`validate_answer`, which returns the answer *normalized* (selections in
document order, the permission option resolved to the agent's own ``optionId``)
so that "the same answer twice" can be decided by comparing canonical JSON.

Every refusal names the request element and the problem: a forged id, a
duplicate, a missing answer, too many selections for a single-choice question,
a stale plan revision, a value outside an elicitation field's constraints.
"""

from __future__ import annotations

import math
import re
from collections.abc import Sequence
from datetime import date, datetime
from urllib.parse import urlsplit

from baton.request_model.documents import (
    Answer,
    BooleanField,
    ContentValue,
    ElicitationAnswer,
    ElicitationRequest,
    MultiSelectField,
    NumberField,
    PermissionAnswer,
    PermissionOption,
    PermissionRequest,
    PlanAnswer,
    PlanRequest,
    QuestionAnswer,
    QuestionRequest,
    QuestionSelection,
    RequestDocument,
    ReviewAnswer,
    ReviewRequest,
    StringField,
)
from baton.request_model.errors import InvalidAnswer, StaleAnswer
from baton.requests.grants import normalize_grant
from baton.requests.policy import tool_call_paths

__all__ = ["choose_permission_option", "validate_answer"]


def _ids(values: Sequence[str]) -> str:
    return ", ".join(values) if values else "none"


def validate_answer(document: RequestDocument, answer: Answer) -> Answer:
    """Return ``answer`` normalized, or raise :class:`InvalidAnswer` saying what is wrong."""
    if answer.kind != document.kind:
        raise InvalidAnswer(f"a {answer.kind} answer cannot answer a {document.kind} request")
    if isinstance(document, PermissionRequest) and isinstance(answer, PermissionAnswer):
        option = choose_permission_option(document, answer)
        if answer.grant is not None:
            grant = normalize_grant(document, answer.grant, tool_call_paths(document))
            answer = answer.model_copy(update={"grant": grant})
        return answer.model_copy(update={"option_id": option.option_id})
    if isinstance(document, QuestionRequest) and isinstance(answer, QuestionAnswer):
        return _question(document, answer)
    if isinstance(document, PlanRequest) and isinstance(answer, PlanAnswer):
        if answer.revision != document.revision:
            raise StaleAnswer(
                f"stale plan answer: it approves revision {answer.revision[:12] or '(none)'}, "
                f"but the plan awaiting approval is revision {document.revision[:12]}"
            )
        return answer
    if isinstance(document, ElicitationRequest) and isinstance(answer, ElicitationAnswer):
        return _elicitation(document, answer)
    if isinstance(document, ReviewRequest) and isinstance(answer, ReviewAnswer):
        return answer
    raise InvalidAnswer(f"cannot validate a {answer.kind} answer")  # pragma: no cover


# ------------------------------------------------------------------- permission


def choose_permission_option(
    document: PermissionRequest, answer: PermissionAnswer
) -> PermissionOption:
    """Pick the agent's own option for a decision, by option ``kind``.

    ``allow`` means ``allow_once``, always: baton never answers ``allow_always``,
    because the agent would remember it and stop asking, out of reach of baton's
    scopes and audit (a lasting approval is a grant, :mod:`baton.requests.grants`).
    ``deny`` means ``reject_once`` (falling back to ``reject_always`` when the agent
    offers no one-time rejection).
    """
    if answer.scope == "always":
        raise InvalidAnswer(
            "baton never answers allow_always (the agent would stop asking); "
            "allow once with a grant instead (--scope turn|task|role|run|project)"
        )
    kinds: tuple[str, ...] = (
        ("allow_once",) if answer.decision == "allow" else ("reject_once", "reject_always")
    )
    offered = [f"{o.option_id} ({o.kind})" for o in document.options]
    if answer.option_id is not None:
        chosen = next((o for o in document.options if o.option_id == answer.option_id), None)
        if chosen is None:
            raise InvalidAnswer(
                f"unknown permission option {answer.option_id!r}; the agent offered {_ids(offered)}"
            )
        if chosen.kind not in kinds:
            raise InvalidAnswer(
                f"option {chosen.option_id!r} is {chosen.kind}, which does not match "
                f"{answer.decision} ({answer.scope})"
            )
        return chosen
    for kind in kinds:
        for option in document.options:
            if option.kind == kind:
                return option
    raise InvalidAnswer(
        f"the agent offered no {' or '.join(kinds)} option to {answer.decision} with; "
        f"it offered {_ids(offered)}"
    )


# --------------------------------------------------------------------- question


def _question(document: QuestionRequest, answer: QuestionAnswer) -> QuestionAnswer:
    if answer.outcome == "skipped":
        if answer.selections:
            raise InvalidAnswer("a skipped question answer must not carry selections")
        return answer
    known = [q.id for q in document.questions]
    by_question: dict[str, QuestionSelection] = {}
    for selection in answer.selections:
        question = document.question(selection.question_id)
        if question is None:
            raise InvalidAnswer(
                f"unknown question id {selection.question_id!r}; the request has {_ids(known)}"
            )
        if question.id in by_question:
            raise InvalidAnswer(f"{question.id} is answered more than once")
        if not selection.option_ids:
            raise InvalidAnswer(f"{question.id}: no option selected (every question is required)")
        seen: set[str] = set()
        for option_id in selection.option_ids:
            if question.option(option_id) is None:
                options = [o.id for o in question.options]
                raise InvalidAnswer(
                    f"{question.id}: unknown option id {option_id!r}; it offers {_ids(options)}"
                )
            if option_id in seen:
                raise InvalidAnswer(f"{question.id}: option {option_id} selected more than once")
            seen.add(option_id)
        if question.selection == "single" and len(seen) != 1:
            raise InvalidAnswer(
                f"{question.id} takes exactly one option, got {len(seen)} "
                f"({_ids(list(selection.option_ids))})"
            )
        by_question[question.id] = QuestionSelection(
            question_id=question.id,
            option_ids=tuple(o.id for o in question.options if o.id in seen),
        )
    missing = [q for q in known if q not in by_question]
    if missing:
        raise InvalidAnswer(f"missing answers for {_ids(missing)} (every question is required)")
    return answer.model_copy(update={"selections": tuple(by_question[q] for q in known)})


# ------------------------------------------------------------------ elicitation

_EMAIL = re.compile(r"^[^@\s]+@[^@\s]+$")


def _check_string(field: StringField, value: ContentValue) -> None:
    if not isinstance(value, str):
        raise InvalidAnswer(f"field {field.name!r} wants a string, got {type(value).__name__}")
    if field.min_length is not None and len(value) < field.min_length:
        raise InvalidAnswer(f"field {field.name!r} needs at least {field.min_length} characters")
    if field.max_length is not None and len(value) > field.max_length:
        raise InvalidAnswer(f"field {field.name!r} allows at most {field.max_length} characters")
    if field.choices is not None and value not in {c.value for c in field.choices}:
        raise InvalidAnswer(
            f"field {field.name!r}: {value!r} is not one of {_ids([c.value for c in field.choices])}"
        )
    if field.pattern is not None and re.search(field.pattern, value) is None:
        raise InvalidAnswer(f"field {field.name!r} does not match pattern {field.pattern!r}")
    if field.format is not None:
        ok = True
        if field.format == "email":
            ok = _EMAIL.match(value) is not None
        elif field.format == "uri":
            parts = urlsplit(value)
            ok = bool(parts.scheme) and bool(parts.netloc or parts.path)
        else:
            try:
                (date.fromisoformat if field.format == "date" else datetime.fromisoformat)(value)
            except ValueError:
                ok = False
        if not ok:
            raise InvalidAnswer(f"field {field.name!r}: {value!r} is not a valid {field.format}")


def _check_number(field: NumberField, value: ContentValue) -> None:
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise InvalidAnswer(
            f"field {field.name!r} wants a {field.type}, got {type(value).__name__}"
        )
    if field.type == "integer" and not isinstance(value, int):
        raise InvalidAnswer(f"field {field.name!r} wants an integer, got {value!r}")
    if not math.isfinite(value):
        raise InvalidAnswer(f"field {field.name!r} wants a finite number")
    if field.minimum is not None and value < field.minimum:
        raise InvalidAnswer(f"field {field.name!r} must be at least {field.minimum:g}")
    if field.maximum is not None and value > field.maximum:
        raise InvalidAnswer(f"field {field.name!r} must be at most {field.maximum:g}")


def _check_multi(field: MultiSelectField, value: ContentValue) -> tuple[str, ...]:
    if not isinstance(value, tuple):
        raise InvalidAnswer(f"field {field.name!r} wants a list of choices")
    allowed = [c.value for c in field.choices]
    if len(set(value)) != len(value):
        raise InvalidAnswer(f"field {field.name!r}: a choice is selected more than once")
    for item in value:
        if item not in allowed:
            raise InvalidAnswer(f"field {field.name!r}: {item!r} is not one of {_ids(allowed)}")
    if field.min_items is not None and len(value) < field.min_items:
        raise InvalidAnswer(f"field {field.name!r} needs at least {field.min_items} choices")
    if field.max_items is not None and len(value) > field.max_items:
        raise InvalidAnswer(f"field {field.name!r} allows at most {field.max_items} choices")
    return tuple(v for v in allowed if v in value)


def _elicitation(document: ElicitationRequest, answer: ElicitationAnswer) -> ElicitationAnswer:
    if answer.action != "accept":
        if answer.content is not None:
            raise InvalidAnswer(f"an elicitation answer that {answer.action}s carries no content")
        return answer
    if answer.content is None:
        raise InvalidAnswer("an accepted elicitation answer needs content (the form values)")
    schema = document.requested_schema
    names = [f.name for f in schema.fields]
    normalized: dict[str, ContentValue] = {}
    for name, value in answer.content.items():
        field = schema.field(name)
        if field is None:
            raise InvalidAnswer(f"unknown form field {name!r}; the form has {_ids(names)}")
        if isinstance(field, StringField):
            _check_string(field, value)
        elif isinstance(field, NumberField):
            _check_number(field, value)
        elif isinstance(field, BooleanField):
            if not isinstance(value, bool):
                raise InvalidAnswer(f"field {name!r} wants true or false")
        else:
            value = _check_multi(field, value)
        normalized[name] = value
    missing = [r for r in schema.required if r not in normalized]
    if missing:
        raise InvalidAnswer(f"missing required form fields {_ids(missing)}")
    ordered = {n: normalized[n] for n in names if n in normalized}
    return answer.model_copy(update={"content": ordered})
