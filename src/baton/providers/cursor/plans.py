"""``cursor/create_plan`` → a plan-approval document for the durable-requests ledger.

Cursor's params (acp.md §2)::

    {toolCallId, name?, overview?, plan: "<markdown>", todos: [{id, content, status}],
     isProject?, phases?: [{name, todos: [{id, content, status}]}]}

An approval is authoritative: the human must see the *whole* plan the agent will
act on, so nothing is cut. A plan that cannot be shown faithfully (no Markdown, a
malformed todo or phase) or that is too large (196 KiB of canonical JSON) is
refused, and Cursor is answered ``rejected`` with the reason at once.

The document (``request``) is a plain dict in exactly the shape of
``baton.requests.model.PlanRequest``::

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
digest ``baton.requests.model.PlanRequest`` derives). An answer names the revision
it approves, so an approval given while looking at an older plan cannot approve a
changed one.

Replies: :data:`HEADLESS_REPLY` (``rejected``, "no human surface attached") when
no human surface is attached; a human's decision is mapped by
``baton.requests.replies.reply_for`` (``accepted`` without a ``planUri``: baton
does not fabricate a plan artifact, so Cursor writes its own file; ``rejected``
with the optional reason; ``cancelled``).
"""

from __future__ import annotations

import hashlib
from collections.abc import Mapping
from typing import Any

from baton.providers.cursor._common import native_id, outcome
from baton.providers.cursor.questions import MAX_DOCUMENT_BYTES, canonical_json

METHOD = "cursor/create_plan"
HEADLESS_REPLY: dict[str, Any] = outcome("rejected", reason="no human surface attached")


class PlanRefused(ValueError):
    """The request cannot become a plan document; ``oversize`` says which kind."""

    def __init__(self, reason: str, *, oversize: bool = False) -> None:
        super().__init__(reason)
        self.oversize = oversize


def plan_revision(fields: Mapping[str, Any]) -> str:
    """SHA-256 (hex) of the canonical JSON of every field except ``revision``."""
    body = {k: v for k, v in fields.items() if k != "revision"}
    return hashlib.sha256(canonical_json(body).encode("utf-8")).hexdigest()


def normalize_plan(params: Mapping[str, Any]) -> dict[str, Any]:
    """The plan document for ``params``, or :class:`PlanRefused`."""
    markdown = params.get("plan")
    if not isinstance(markdown, str) or not markdown.strip():
        raise PlanRefused("plan must be non-empty Markdown text")
    name = _opt_text(params, "name")
    overview = _opt_text(params, "overview")
    is_project = params.get("isProject", False)
    if not isinstance(is_project, bool):
        raise PlanRefused("isProject is not a boolean")
    todos = _todos(params.get("todos", []), "todos")
    raw_phases = params.get("phases", [])
    if raw_phases is None:
        raw_phases = []
    if not isinstance(raw_phases, list):
        raise PlanRefused("phases is not a list")
    phases: list[dict[str, Any]] = []
    for index, phase in enumerate(raw_phases, start=1):
        if not isinstance(phase, Mapping) or not isinstance(phase.get("name"), str):
            raise PlanRefused(f"phase {index} needs a name")
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
    try:
        size = len(canonical_json(document).encode("utf-8"))
    except UnicodeEncodeError:
        raise PlanRefused("plan text is not valid Unicode (lone surrogate)") from None
    if size > MAX_DOCUMENT_BYTES:
        raise PlanRefused(
            f"plan is {size} bytes of UTF-8; the limit is {MAX_DOCUMENT_BYTES} "
            "(rejected, not truncated)",
            oversize=True,
        )
    document["revision"] = plan_revision(document)
    return document


def _opt_text(params: Mapping[str, Any], key: str) -> str | None:
    value = params.get(key)
    if value is not None and not isinstance(value, str):
        raise PlanRefused(f"{key} is not a string")
    return value


def _todos(value: Any, where: str) -> list[dict[str, str]]:
    if value is None:
        return []
    if not isinstance(value, list):
        raise PlanRefused(f"{where} is not a list")
    todos: list[dict[str, str]] = []
    for index, todo in enumerate(value, start=1):
        if not isinstance(todo, Mapping):
            raise PlanRefused(f"{where} item {index} is not an object")
        tid = native_id(todo.get("id"))
        content = todo.get("content")
        status = todo.get("status", "pending")
        if tid is None or not isinstance(content, str) or not isinstance(status, str):
            raise PlanRefused(f"{where} item {index} needs an id, content and status")
        todos.append({"id": tid, "content": content, "status": status})
    return todos
