"""``cursor/ask_question`` → a question document for the durable-requests ledger.

Cursor's params (acp.md §2)::

    {toolCallId, title?, questions: [{id, prompt, options: [{id, label}], allowMultiple?}]}

This module turns Cursor's shape into the ledger's own document,
:class:`baton.request_model.documents.QuestionRequest` (validated, limits checked, by the one
document model); :mod:`baton.requests` persists, shows, validates answers (twice) and
delivers. The extension answers with
``VendorOutcome(route="human", request=<document>, result=HEADLESS_REPLY)``.

The document, as JSON::

    {
      "kind": "question",
      "tool_call_id": str | None,
      "title": str | None,
      "questions": [
        {
          "id": "question-1",            # opaque, shown to humans
          "native_id": "<Cursor's question id>",
          "prompt": str,
          "description": None,
          "selection": "single" | "multiple",   # from allowMultiple
          "options": [
            {"id": "option-1", "native_id": "<Cursor's option id>",
             "label": str, "description": None}
          ]
        }
      ]
    }

Opaque ids (``question-N`` in Cursor's order, ``option-N`` per question) keep
agent-chosen ids out of the UI and out of what a human types; the native ids ride
along so the reply can be built from the persisted document alone, after a restart.

Every question is required. A request baton cannot present faithfully (no
questions, a question without options, duplicate ids, text that is not a string)
is refused as ``malformed``
(:class:`~baton.request_model.errors.InvalidDocument`); an oversize one (the document
model's limits: questions, options, prompt characters, canonical JSON bytes) as
oversize (:class:`~baton.request_model.errors.PayloadTooLarge`), never truncated: both are
answered ``skipped`` with the reason at once.

Replies (acp.md §2, ``{"outcome": {...}}``): :data:`HEADLESS_REPLY` (``skipped``
with the reason) is the answer when no human surface is attached. Answers from a
human are mapped back to native ids by ``baton.requests.replies.reply_for``, the
one place that turns a *validated* answer into the agent's reply, from the
``native_id`` fields of this document.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from baton.events.redaction import NoRedaction, Redaction
from baton.jsontypes import JsonMapping
from baton.providers.cursor._common import native_id, outcome
from baton.request_model.documents import (
    MAX_DESCRIPTION_CHARS,
    MAX_OPTIONS,
    MAX_QUESTIONS,
    QuestionRequest,
    parse_document,
)
from baton.request_model.errors import InvalidDocument, PayloadTooLarge

__all__ = ["HEADLESS_REPLY", "METHOD", "normalize_question"]

METHOD = "cursor/ask_question"

HEADLESS_REPLY: dict[str, Any] = outcome(
    "skipped", reason="no human surface attached; baton skipped the question"
)


def normalize_question(params: JsonMapping, redaction: Redaction | None = None) -> QuestionRequest:
    """The question document for ``params``, or ``InvalidDocument``/``PayloadTooLarge``."""
    raw_questions = params.get("questions")
    if not isinstance(raw_questions, list) or not raw_questions:
        raise InvalidDocument("questions must be a non-empty list")
    if len(raw_questions) > MAX_QUESTIONS:
        raise _too_large("questions", len(raw_questions), MAX_QUESTIONS)
    title = params.get("title")
    if title is not None and not isinstance(title, str):
        raise InvalidDocument("title is not a string")
    questions: list[dict[str, Any]] = []
    seen_questions: set[str] = set()
    for qi, raw in enumerate(raw_questions, start=1):
        questions.append(_question(qi, raw, seen_questions))
    document = {
        "kind": "question",
        "tool_call_id": native_id(params.get("toolCallId")),
        "title": title,
        "questions": questions,
    }
    parsed = parse_document((redaction or NoRedaction()).value(document))
    assert isinstance(parsed, QuestionRequest)
    return parsed


def _too_large(what: str, size: int, limit: int) -> PayloadTooLarge:
    return PayloadTooLarge(
        f"{size} {what}; the limit is {limit} (rejected, not truncated)",
        what=what,
        size=size,
        limit=limit,
    )


def _question(index: int, raw: Any, seen: set[str]) -> dict[str, Any]:
    if not isinstance(raw, Mapping):
        raise InvalidDocument(f"question {index} is not an object")
    nid = native_id(raw.get("id"))
    if nid is None:
        raise InvalidDocument(f"question {index} has no id")
    if nid in seen:
        raise InvalidDocument(f"duplicate question id {nid!r}")
    seen.add(nid)
    prompt = raw.get("prompt")
    if not isinstance(prompt, str) or not prompt.strip():
        raise InvalidDocument(f"question {index} has no prompt")
    if len(prompt) > MAX_DESCRIPTION_CHARS:
        raise _too_large(
            f"characters in question {index}'s prompt", len(prompt), MAX_DESCRIPTION_CHARS
        )
    multiple = raw.get("allowMultiple", False)
    if not isinstance(multiple, bool):
        raise InvalidDocument(f"question {index} allowMultiple is not a boolean")
    raw_options = raw.get("options")
    if not isinstance(raw_options, list) or not raw_options:
        raise InvalidDocument(f"question {index} has no options")
    if len(raw_options) > MAX_OPTIONS:
        raise _too_large(f"options in question {index}", len(raw_options), MAX_OPTIONS)
    options: list[dict[str, Any]] = []
    seen_options: set[str] = set()
    for oi, option in enumerate(raw_options, start=1):
        if not isinstance(option, Mapping):
            raise InvalidDocument(f"question {index} option {oi} is not an object")
        oid = native_id(option.get("id"))
        label = option.get("label")
        if oid is None or not isinstance(label, str):
            raise InvalidDocument(f"question {index} option {oi} needs an id and a label")
        if oid in seen_options:
            raise InvalidDocument(f"question {index} has duplicate option id {oid!r}")
        seen_options.add(oid)
        options.append(
            {"id": f"option-{oi}", "native_id": oid, "label": label, "description": None}
        )
    return {
        "id": f"question-{index}",
        "native_id": nid,
        "prompt": prompt,
        "description": None,
        "selection": "multiple" if multiple else "single",
        "options": options,
    }
