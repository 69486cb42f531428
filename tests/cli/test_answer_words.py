"""``baton answer``'s words: every request kind has a builder."""

from __future__ import annotations

import dataclasses
import typing

import pytest

from baton.cli.answer_words import _BUILDERS, build_answer
from baton.request_model.documents import RequestDocument
from baton.request_model.errors import InvalidAnswer
from baton.requests.ledger import RequestRecord
from baton.requests.states import State
from tests.requests import reqbuild


def test_every_document_type_has_a_builder() -> None:
    union = typing.get_args(RequestDocument)[0]  # Annotated[Union, discriminator]
    assert set(typing.get_args(union)) == set(_BUILDERS)


def _pending(document: RequestDocument) -> RequestRecord:
    fields: dict[str, object] = {f.name: None for f in dataclasses.fields(RequestRecord)}
    fields.update(request_id="req-1", kind=document.kind, state=State.PENDING, document=document)
    return RequestRecord(**fields)  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("document", "yes", "no"),
    [
        (reqbuild.cursor_plan(), "--accept", "--reject"),
        (reqbuild.review(), "--approve", "--reject"),
    ],
)
def test_a_yes_or_no_request_refuses_text_and_needs_a_decision(
    document: RequestDocument, yes: str, no: str
) -> None:
    """A plan and a review are answered yes or no (with a reason): --text is refused and
    no decision says which flags to give, in the words of that kind."""
    what = f"a {document.kind}"
    record = _pending(document)
    with pytest.raises(InvalidAnswer, match=f"^{what} does not take --text$"):
        build_answer(record, accept=True, text=["x=1"])
    with pytest.raises(InvalidAnswer) as no_decision:
        build_answer(record, reason="why")
    assert str(no_decision.value) == f"{what} needs {yes} or {no} [--reason TEXT]"
    with pytest.raises(InvalidAnswer, match="does not take --select"):
        build_answer(record, accept=True, select=["a"])
    answer = build_answer(record, reject=True, reason="not yet")
    assert getattr(answer, "reason", None) == "not yet"
