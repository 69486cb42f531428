"""Documents: limits (rejected, never truncated), plan revisions, the elicitation subset."""

from __future__ import annotations

import hashlib
import json

import pytest
from pydantic import ValidationError

from baton.request_model.documents import (
    MAX_DESCRIPTION_CHARS,
    MAX_DOCUMENT_BYTES,
    ElicitationSchema,
    NativeQuestion,
    PlanRequest,
    QuestionRequest,
    canonical_json,
    check_limits,
    headline,
    parse_document,
    plan_revision,
)
from baton.request_model.errors import InvalidDocument, PayloadTooLarge
from tests.requests.reqbuild import cursor_plan, cursor_questions, elicitation, permission


def _plan_of_size(size: int, filler: str = "a") -> PlanRequest:
    """A plan whose canonical JSON is exactly ``size`` bytes of UTF-8."""
    base = len(check_limits(cursor_plan("")).encode("utf-8"))
    pad = size - base
    unit = len(filler.encode("utf-8"))
    text = filler * (pad // unit) + "a" * (pad % unit)
    plan = cursor_plan(text)
    return plan


@pytest.mark.parametrize("filler", ["a", "é", "👩‍👩‍👧"])
def test_exactly_at_the_limit_passes(filler: str) -> None:
    plan = _plan_of_size(MAX_DOCUMENT_BYTES, filler)
    text = check_limits(plan)
    assert len(text.encode("utf-8")) == MAX_DOCUMENT_BYTES == 196 * 1024


def test_one_byte_over_is_rejected_not_truncated() -> None:
    plan = _plan_of_size(MAX_DOCUMENT_BYTES + 1)
    with pytest.raises(PayloadTooLarge) as info:
        check_limits(plan)
    assert info.value.what == "document"
    assert info.value.size == MAX_DOCUMENT_BYTES + 1
    assert info.value.limit == MAX_DOCUMENT_BYTES
    assert "not truncated" in str(info.value)
    # the document itself is untouched
    assert len(plan.markdown) > 190_000


def test_question_description_limit_in_characters() -> None:
    def ask(n: int) -> QuestionRequest:
        return QuestionRequest.from_native(
            [NativeQuestion("q", "p", [("a", "A")], description="x" * n)]
        )

    check_limits(ask(MAX_DESCRIPTION_CHARS))
    with pytest.raises(PayloadTooLarge) as info:
        check_limits(ask(MAX_DESCRIPTION_CHARS + 1))
    assert info.value.what == "description"
    assert "question-1 description" in str(info.value)


def test_lone_surrogates_are_refused() -> None:
    broken = json.loads('"\\ud800 broken"')
    question = QuestionRequest.from_native([NativeQuestion("q", broken, [("a", "A")])])
    with pytest.raises(InvalidDocument, match="lone surrogate"):
        check_limits(question)
    data = cursor_plan().model_dump(mode="json") | {"markdown": broken, "revision": ""}
    with pytest.raises(InvalidDocument):
        parse_document(data)


def test_plan_revision_is_sha256_of_canonical_json_without_revision() -> None:
    plan = cursor_plan()
    body = plan.model_dump(mode="json")
    del body["revision"]
    expected = hashlib.sha256(canonical_json(body).encode("utf-8")).hexdigest()
    assert plan.revision == expected == plan_revision(plan.model_dump(mode="json"))
    # any change to any field changes the revision
    assert cursor_plan(is_project=True).revision != plan.revision
    assert cursor_plan("# Plan\n\n1. Do it \n").revision != plan.revision


def test_plan_with_a_tampered_revision_does_not_load() -> None:
    data = cursor_plan().model_dump(mode="json")
    data["markdown"] += "!"
    with pytest.raises(ValidationError, match="does not match its content"):
        PlanRequest.model_validate(data)
    with pytest.raises(InvalidDocument):
        parse_document(data)


def test_opaque_ids_are_numbered_and_map_to_native_ids() -> None:
    doc = cursor_questions()
    assert [q.id for q in doc.questions] == ["question-1", "question-2"]
    assert [(o.id, o.native_id) for o in doc.questions[1].options] == [
        ("option-1", "auth"),
        ("option-2", "billing"),
        ("option-3", "search"),
    ]
    assert doc.questions[1].selection == "multiple"


@pytest.mark.parametrize(
    "mutate",
    [
        lambda d: d["questions"][0].update(id="q1"),
        lambda d: d["questions"][0]["options"][0].update(id="opt-1"),
        lambda d: d["questions"][1].update(id="question-1"),
        lambda d: d["questions"][1].update(native_id="db"),
        lambda d: d["questions"][0]["options"][1].update(native_id="pg"),
        lambda d: d["questions"][0].update(options=[]),
        lambda d: d.update(questions=[]),
        lambda d: d.update(questions=d["questions"] * 33),
    ],
)
def test_malformed_question_documents_are_refused(mutate: object) -> None:
    data = cursor_questions().model_dump(mode="json")
    mutate(data)  # type: ignore[operator]
    with pytest.raises(InvalidDocument):
        parse_document(data)


def test_elicitation_wire_schema_is_parsed() -> None:
    schema = elicitation().requested_schema
    assert [f.name for f in schema.fields] == [
        "version",
        "retries",
        "dry_run",
        "channel",
        "targets",
    ]
    assert schema.required == ("version", "channel")


@pytest.mark.parametrize(
    "prop",
    [
        {"type": "object", "properties": {}},
        {"type": "array", "items": {"type": "number"}},
        {"type": "_vendor"},
        {"type": "string", "$ref": "#/x"},
        {"type": "string", "pattern": "("},
    ],
)
def test_elicitation_outside_the_flat_subset_is_refused(prop: dict[str, object]) -> None:
    with pytest.raises(InvalidDocument):
        ElicitationSchema.from_wire({"type": "object", "properties": {"x": prop}})


def test_headline_is_one_bounded_line() -> None:
    assert headline(permission(command="ls\nrm")) == "ls"
    assert headline(cursor_plan(name="x" * 300)).endswith("…")
    assert len(headline(cursor_plan(name="x" * 300))) == 120
