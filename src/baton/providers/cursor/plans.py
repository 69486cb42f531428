"""``cursor/create_plan`` → a plan-approval document for the durable-requests ledger.

Cursor's params (acp.md §2)::

    {toolCallId, name?, overview?, plan: "<markdown>", todos: [{id, content, status}],
     isProject?, phases?: [{name, todos: [{id, content, status}]}]}

An approval is authoritative: the human must see the *whole* plan the agent will
act on, so nothing is cut. A plan that cannot be shown faithfully (no Markdown, a
malformed todo or phase) or that is too large (196 KiB of canonical JSON) is
refused, and Cursor is answered ``rejected`` with the reason at once.

The document (``request``) is a plain dict in exactly the shape of
``baton.request_model.documents.PlanRequest``::

    {
      "kind": "plan",
      "tool_call_id": str | None,
      "name": str | None,
      "overview": str | None,
      "markdown": str,                          # the full plan, verbatim
      "todos": [{"id": str, "content": str, "status": str}],
      "phases": [{"name": str, "todos": [{"id", "content", "status"}]}],
      "is_project": bool,
      "revision": "<sha256 hex>"
    }

``revision`` is the SHA-256 of the canonical JSON (sorted keys, no whitespace,
UTF-8) of every other field: the whole plan, including its tool call (the same
digest ``baton.request_model.documents.PlanRequest`` derives). An answer names the revision
it approves, so an approval given while looking at an older plan cannot approve a
changed one.

Replies: :data:`HEADLESS_REPLY` (``rejected``, "no human surface attached") when
no human surface is attached; a human's decision is mapped by
``baton.requests.replies.reply_for`` (``accepted`` without a ``planUri``: baton
does not fabricate a plan artifact, so Cursor writes its own file; ``rejected``
with the optional reason; ``cancelled``).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from baton.events.redaction import NoRedaction, Redaction
from baton.jsontypes import JsonMapping
from baton.providers.cursor._common import native_id, outcome
from baton.request_model.documents import PlanRequest, parse_document
from baton.request_model.errors import InvalidDocument

__all__ = ["HEADLESS_REPLY", "METHOD", "normalize_plan"]

METHOD = "cursor/create_plan"
HEADLESS_REPLY: dict[str, Any] = outcome("rejected", reason="no human surface attached")


def normalize_plan(params: JsonMapping, redaction: Redaction | None = None) -> PlanRequest:
    """The plan document for ``params`` (its revision derived by the document model), or
    ``InvalidDocument``/``PayloadTooLarge``."""
    markdown = params.get("plan")
    if not isinstance(markdown, str) or not markdown.strip():
        raise InvalidDocument("plan must be non-empty Markdown text")
    name = _opt_text(params, "name")
    overview = _opt_text(params, "overview")
    is_project = params.get("isProject", False)
    if not isinstance(is_project, bool):
        raise InvalidDocument("isProject is not a boolean")
    todos = _todos(params.get("todos", []), "todos")
    raw_phases = params.get("phases", [])
    if raw_phases is None:
        raw_phases = []
    if not isinstance(raw_phases, list):
        raise InvalidDocument("phases is not a list")
    phases: list[dict[str, Any]] = []
    for index, phase in enumerate(raw_phases, start=1):
        if not isinstance(phase, Mapping) or not isinstance(phase.get("name"), str):
            raise InvalidDocument(f"phase {index} needs a name")
        phases.append(
            {"name": phase["name"], "todos": _todos(phase.get("todos", []), f"phase {index}")}
        )
    document: dict[str, Any] = {
        "kind": "plan",
        "tool_call_id": native_id(params.get("toolCallId")),
        "name": name,
        "overview": overview,
        "markdown": markdown,
        "todos": todos,
        "phases": phases,
        "is_project": is_project,
    }
    parsed = parse_document((redaction or NoRedaction()).value(document))
    assert isinstance(parsed, PlanRequest)
    return parsed


def _opt_text(params: Mapping[str, Any], key: str) -> str | None:
    value = params.get(key)
    if value is not None and not isinstance(value, str):
        raise InvalidDocument(f"{key} is not a string")
    return value


def _todos(value: Any, where: str) -> list[dict[str, str]]:
    if value is None:
        return []
    if not isinstance(value, list):
        raise InvalidDocument(f"{where} is not a list")
    todos: list[dict[str, str]] = []
    for index, todo in enumerate(value, start=1):
        if not isinstance(todo, Mapping):
            raise InvalidDocument(f"{where} item {index} is not an object")
        tid = native_id(todo.get("id"))
        content = todo.get("content")
        status = todo.get("status", "pending")
        if tid is None or not isinstance(content, str) or not isinstance(status, str):
            raise InvalidDocument(f"{where} item {index} needs an id, content and status")
        todos.append({"id": tid, "content": content, "status": status})
    return todos
