"""``cursor/ask_question`` → a question document for the durable-requests ledger.

Cursor's params (acp.md §2)::

    {toolCallId, title?, questions: [{id, prompt, options: [{id, label}], allowMultiple?}]}

This module only normalizes shapes; :mod:`baton.requests` persists, shows,
validates answers (twice) and delivers. The extension answers with
``VendorOutcome(route="human", request=<document>, result=HEADLESS_REPLY)``.

The document (``request``) is a plain dict in exactly the shape of
``baton.requests.model.QuestionRequest`` (so the ledger can validate it as is)::

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
is refused as ``malformed``; an oversize one (over 64 questions, 128 options, a
100,000-character prompt or 196 KiB of canonical JSON) as oversize, never
truncated: both are answered ``skipped`` with the reason at once.

Replies (acp.md §2, ``{"outcome": {...}}``): :data:`HEADLESS_REPLY` (``skipped``
with the reason) is the answer when no human surface is attached. Answers from a
human are mapped back to native ids by ``baton.requests.replies.reply_for``, the
one place that turns a *validated* answer into the agent's reply, from the
``native_id`` fields of this document.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from baton.providers.cursor._common import native_id, outcome

METHOD = "cursor/ask_question"
MAX_QUESTIONS = 64
MAX_OPTIONS = 128
MAX_PROMPT_CHARS = 100_000
MAX_DOCUMENT_BYTES = 196 * 1024

HEADLESS_REPLY: dict[str, Any] = outcome(
    "skipped", reason="no human surface attached; baton skipped the question"
)


class QuestionRefused(ValueError):
    """The request cannot become a question document; ``oversize`` says which kind."""

    def __init__(self, reason: str, *, oversize: bool = False) -> None:
        super().__init__(reason)
        self.oversize = oversize


def canonical_json(value: Any) -> str:
    """Sorted keys, no whitespace, real characters: the spelling baton hashes and measures."""
    return json.dumps(
        value, ensure_ascii=False, sort_keys=True, separators=(",", ":"), allow_nan=False
    )


def normalize_question(params: Mapping[str, Any]) -> dict[str, Any]:
    """The question document for ``params``, or :class:`QuestionRefused`."""
    raw_questions = params.get("questions")
    if not isinstance(raw_questions, list) or not raw_questions:
        raise QuestionRefused("questions must be a non-empty list")
    if len(raw_questions) > MAX_QUESTIONS:
        raise QuestionRefused(
            f"{len(raw_questions)} questions; the limit is {MAX_QUESTIONS}", oversize=True
        )
    title = params.get("title")
    if title is not None and not isinstance(title, str):
        raise QuestionRefused("title is not a string")
    questions: list[dict[str, Any]] = []
    seen_questions: set[str] = set()
    for qi, raw in enumerate(raw_questions, start=1):
        questions.append(_question(qi, raw, seen_questions))
    tool_call_id = native_id(params.get("toolCallId"))
    document: dict[str, Any] = {
        "kind": "question",
        "tool_call_id": tool_call_id,
        "title": title,
        "questions": questions,
    }
    size = _utf8_size(canonical_json(document))
    if size > MAX_DOCUMENT_BYTES:
        raise QuestionRefused(
            f"question document is {size} bytes of UTF-8; the limit is {MAX_DOCUMENT_BYTES}",
            oversize=True,
        )
    return document


def _question(index: int, raw: Any, seen: set[str]) -> dict[str, Any]:
    if not isinstance(raw, Mapping):
        raise QuestionRefused(f"question {index} is not an object")
    nid = native_id(raw.get("id"))
    if nid is None:
        raise QuestionRefused(f"question {index} has no id")
    if nid in seen:
        raise QuestionRefused(f"duplicate question id {nid!r}")
    seen.add(nid)
    prompt = raw.get("prompt")
    if not isinstance(prompt, str) or not prompt.strip():
        raise QuestionRefused(f"question {index} has no prompt")
    if len(prompt) > MAX_PROMPT_CHARS:
        raise QuestionRefused(
            f"question {index} prompt has {len(prompt)} characters; the limit is "
            f"{MAX_PROMPT_CHARS}",
            oversize=True,
        )
    multiple = raw.get("allowMultiple", False)
    if not isinstance(multiple, bool):
        raise QuestionRefused(f"question {index} allowMultiple is not a boolean")
    raw_options = raw.get("options")
    if not isinstance(raw_options, list) or not raw_options:
        raise QuestionRefused(f"question {index} has no options")
    if len(raw_options) > MAX_OPTIONS:
        raise QuestionRefused(
            f"question {index} has {len(raw_options)} options; the limit is {MAX_OPTIONS}",
            oversize=True,
        )
    options: list[dict[str, Any]] = []
    seen_options: set[str] = set()
    for oi, option in enumerate(raw_options, start=1):
        if not isinstance(option, Mapping):
            raise QuestionRefused(f"question {index} option {oi} is not an object")
        oid = native_id(option.get("id"))
        label = option.get("label")
        if oid is None or not isinstance(label, str):
            raise QuestionRefused(f"question {index} option {oi} needs an id and a label")
        if oid in seen_options:
            raise QuestionRefused(f"question {index} has duplicate option id {oid!r}")
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


def _utf8_size(text: str) -> int:
    try:
        return len(text.encode("utf-8"))
    except UnicodeEncodeError:
        raise QuestionRefused("text is not valid Unicode (lone surrogate)") from None
