"""The per-kind rules table: every document type has a row, and a row answers its own kind."""

from __future__ import annotations

import typing

import pytest

from baton.request_model.documents import RequestDocument, ReviewRequest
from baton.request_model.errors import RequestError
from baton.requests.kinds import REQUEST_KINDS, rules_for


def _document_types() -> set[type]:
    union = typing.get_args(RequestDocument)[0]  # Annotated[Union, discriminator]
    return set(typing.get_args(union))


def test_every_document_type_has_rules() -> None:
    assert _document_types() == set(REQUEST_KINDS)


def test_each_row_answers_its_own_kind() -> None:
    for document_type, rules in REQUEST_KINDS.items():
        kind = document_type.model_fields["kind"].default
        assert rules.answer_type.model_fields["kind"].default == kind


def test_a_type_without_a_row_fails_loudly() -> None:
    class Unlisted(ReviewRequest):
        pass

    document = Unlisted(task_id="t1", report_ref="r.md", summary="s")
    with pytest.raises(RequestError, match="no rules for a Unlisted request"):
        rules_for(document)
