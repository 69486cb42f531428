"""``baton answer``'s words: every request kind has a builder."""

from __future__ import annotations

import typing

from baton.cli.answer_words import _BUILDERS
from baton.request_model.documents import RequestDocument


def test_every_document_type_has_a_builder() -> None:
    union = typing.get_args(RequestDocument)[0]  # Annotated[Union, discriminator]
    assert set(typing.get_args(union)) == set(_BUILDERS)
