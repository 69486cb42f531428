"""An elicitation (a form): every value checked against its field's constraints."""

from __future__ import annotations

import math
import re
from datetime import date, datetime
from urllib.parse import urlsplit

from baton.request_model.documents import (
    BooleanField,
    ContentValue,
    ElicitationAnswer,
    ElicitationRequest,
    MultiSelectField,
    NumberField,
    StringField,
)
from baton.request_model.errors import InvalidAnswer
from baton.requests.kinds.rules import AutomaticDecision, KindRules, Reply, listed

__all__ = ["ELICITATION"]

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
            f"field {field.name!r}: {value!r} is not one of {listed([c.value for c in field.choices])}"
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
            raise InvalidAnswer(f"field {field.name!r}: {item!r} is not one of {listed(allowed)}")
    if field.min_items is not None and len(value) < field.min_items:
        raise InvalidAnswer(f"field {field.name!r} needs at least {field.min_items} choices")
    if field.max_items is not None and len(value) > field.max_items:
        raise InvalidAnswer(f"field {field.name!r} allows at most {field.max_items} choices")
    return tuple(v for v in allowed if v in value)


def _validate(document: ElicitationRequest, answer: ElicitationAnswer) -> ElicitationAnswer:
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
            raise InvalidAnswer(f"unknown form field {name!r}; the form has {listed(names)}")
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
        raise InvalidAnswer(f"missing required form fields {listed(missing)}")
    ordered = {n: normalized[n] for n in names if n in normalized}
    return answer.model_copy(update={"content": ordered})


def _reply(document: ElicitationRequest, answer: ElicitationAnswer) -> Reply:
    form = _validate(document, answer)
    if form.action == "accept":
        content = {
            k: list(v) if isinstance(v, tuple) else v for k, v in (form.content or {}).items()
        }
        return {"action": "accept", "content": content}
    return {"action": form.action}


def _cancelled(document: ElicitationRequest) -> Reply:
    return {"action": "cancel"}


def _expired(document: ElicitationRequest) -> Reply:
    return {"action": "decline"}


def _automatic(document: ElicitationRequest, decision: AutomaticDecision) -> ElicitationAnswer:
    return ElicitationAnswer(action="decline")


ELICITATION: KindRules[ElicitationRequest, ElicitationAnswer] = KindRules(
    answer_type=ElicitationAnswer,
    validate=_validate,
    reply=_reply,
    cancelled_reply=_cancelled,
    expired_reply=_expired,
    automatic_answer=_automatic,
)
