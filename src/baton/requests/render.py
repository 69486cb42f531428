"""How surfaces show a request: rich renderables for a terminal, plain data for ``--json``.

A permission shows the tool call with its command or diff; questions show every
question and option with the opaque ids a human answers with; a plan shows its
full Markdown (links shown, never made clickable), todos and phases. Agent text
goes through :func:`baton.security.display.terminal_safe` (controls, escapes, bidi
and invisible characters made visible, never read as markup); the stored document
is untouched. Ids are never cut: the panel's first line carries them whole.
"""

from __future__ import annotations

import difflib
import json
from typing import Any

from rich.console import Group, RenderableType
from rich.rule import Rule
from rich.table import Table
from rich.text import Text

from baton.request_model.documents import (
    DiffPreview,
    ElicitationRequest,
    PermissionRequest,
    PlanRequest,
    QuestionRequest,
    RequestDocument,
    ReviewRequest,
)
from baton.requests.grants import Grant
from baton.requests.ledger import RequestRecord
from baton.security.display import terminal_safe

__all__ = ["answer_hint", "render", "safe_text", "to_data"]


def safe_text(text: str) -> str:
    """Untrusted text for a :class:`~rich.text.Text` or a plain surface (never markup)."""
    return terminal_safe(text, markup=False)


def _t(text: str, style: str = "") -> Text:
    return Text(safe_text(text), style=style)


def answer_hint(record: RequestRecord) -> str:
    """The ``baton answer`` command line that answers this request."""
    rid = record.request_id
    doc = record.document
    if isinstance(doc, PermissionRequest):
        scope = "task" if doc.context is not None and doc.context.task else "run"
        return f"baton answer {rid} --allow | --deny  (--allow --scope {scope} allows it again)"
    if isinstance(doc, QuestionRequest):
        example = " ".join(f"--select {q.id}={q.options[0].id}" for q in doc.questions[:2])
        return f"baton answer {rid} {example}  (or --reject to skip)"
    if isinstance(doc, PlanRequest):
        return f"baton answer {rid} --accept | --reject [--reason TEXT]"
    if isinstance(doc, ElicitationRequest):
        names = [f.name for f in doc.requested_schema.fields[:2]]
        example = " ".join(f"--text {n}=..." for n in names)
        return f"baton answer {rid} --accept {example}  (or --reject)"
    return f"baton answer {rid} --approve | --reject [--reason TEXT]"


# Any: JSON out (``--json``).
def grant_data(grant: Grant, now: str | None = None) -> dict[str, Any]:
    """Plain JSON data for a grant (``baton grants --json``, ``baton answer --json``)."""
    return {
        "grant_id": grant.grant_id,
        "tool_kind": grant.tool_kind,
        "subject": grant.subject,
        "scope": grant.scope,
        "scope_key": grant.scope_key,
        "state": grant.state(now) if now is not None else None,
        "created_at": grant.created_at,
        "expires_at": grant.expires_at,
        "uses_left": grant.uses_left,
        "uses": grant.uses,
        "request_id": grant.request_id,
        "revoked_at": grant.revoked_at,
        "last_used_at": grant.last_used_at,
    }


# Any: JSON out (``--json``, the notification hook).
def to_data(record: RequestRecord) -> dict[str, Any]:
    """Plain JSON data for ``--json`` and the notification hook (the whole document)."""
    return {
        "request_id": record.request_id,
        "kind": record.kind,
        "state": record.state.value,
        "title": record.title,
        "run_id": record.run_id,
        "session_id": record.session_id,
        "turn_id": record.turn_id,
        "created_at": record.created_at,
        "updated_at": record.updated_at,
        "document": json.loads(record.document_json) if record.document_json else None,
        "document_bytes": record.document_bytes,
        "document_sha256": record.document_sha256,
        "revision": record.revision,
        "answer": json.loads(record.answer_json) if record.answer_json else None,
        "decided_by": record.decided_by,
        "rule": record.rule,
        "reason": record.reason,
        "supersedes": record.supersedes,
        "answer_with": answer_hint(record) if record.state.value == "pending" else None,
    }


def _diff(diff: DiffPreview) -> RenderableType:
    from rich.syntax import Syntax  # pygments and markdown only when a request is shown

    old = (diff.old_text or "").splitlines()
    new = diff.new_text.splitlines()
    label = safe_text(diff.path)
    lines = difflib.unified_diff(
        old,
        new,
        fromfile="/dev/null" if diff.old_text is None else label,
        tofile=label,
        lineterm="",
    )
    return Syntax(safe_text("\n".join(lines)) or "(no change)", "diff", word_wrap=True)


def _permission(doc: PermissionRequest) -> list[RenderableType]:
    from rich.syntax import Syntax

    call = doc.tool_call
    parts: list[RenderableType] = [
        Text.assemble(
            ("tool ", "dim"), _t(call.kind, "bold"), ("  call ", "dim"), _t(call.tool_call_id)
        ),
    ]
    if call.command:
        parts.append(Syntax(safe_text(call.command), "bash", word_wrap=True))
    parts += [_diff(d) for d in call.diffs]
    if call.locations:
        parts.append(
            Text.assemble(("paths ", "dim"), _t(", ".join(loc.path for loc in call.locations)))
        )
    if not call.command and not call.diffs and call.raw_input is not None:
        parts.append(_t(json.dumps(call.raw_input, ensure_ascii=False, indent=2)))
    parts.append(
        Text.assemble(
            ("agent options ", "dim"),
            _t(", ".join(f"{o.name} ({o.kind})" for o in doc.options)),
        )
    )
    return parts


def _questions(doc: QuestionRequest) -> list[RenderableType]:
    parts: list[RenderableType] = []
    for q in doc.questions:
        mode = "choose one" if q.selection == "single" else "choose one or more"
        parts.append(
            Text.assemble((q.id, "bold cyan"), "  ", _t(q.prompt, "bold"), (f"  ({mode})", "dim"))
        )
        if q.description:
            parts.append(_t(q.description))
        for o in q.options:
            line = Text.assemble("   ", (o.id, "cyan"), "  ", _t(o.label))
            if o.description:
                line.append_text(Text.assemble((" — ", "dim"), _t(o.description, "dim")))
            parts.append(line)
    return parts


def _plan(doc: PlanRequest) -> list[RenderableType]:
    from rich.markdown import Markdown

    parts: list[RenderableType] = []
    if doc.overview:
        parts.append(_t(doc.overview, "italic"))
    parts.append(Markdown(safe_text(doc.markdown), hyperlinks=False))
    if doc.todos:
        table = Table("todo", "status", title="todos", show_edge=False)
        for todo in doc.todos:
            table.add_row(_t(todo.content), _t(todo.status))
        parts.append(table)
    for phase in doc.phases:
        parts.append(_t(f"phase: {phase.name}", "bold"))
        parts += [
            Text.assemble("  - ", _t(t.content), (f" [{t.status}]", "dim")) for t in phase.todos
        ]
    flag = "  project plan" if doc.is_project else ""
    parts.append(Text(f"revision {doc.revision[:12]}{flag}", style="dim"))
    return parts


def _elicitation(doc: ElicitationRequest) -> list[RenderableType]:
    table = Table("field", "type", "required", "description", show_edge=False)
    for f in doc.requested_schema.fields:
        choices = getattr(f, "choices", None)
        kind = f.type + (f" of {', '.join(c.value for c in choices)}" if choices else "")
        required = "yes" if f.name in doc.requested_schema.required else ""
        table.add_row(_t(f.name), _t(kind), required, _t(f.description or f.title or ""))
    return [_t(doc.message), table]


def _review(doc: ReviewRequest) -> list[RenderableType]:
    return [
        Text.assemble(("task ", "dim"), _t(doc.task_id), ("  report ", "dim"), _t(doc.report_ref)),
        _t(doc.summary),
    ]


def _body(doc: RequestDocument) -> list[RenderableType]:
    if isinstance(doc, PermissionRequest):
        return _permission(doc)
    if isinstance(doc, QuestionRequest):
        return _questions(doc)
    if isinstance(doc, PlanRequest):
        return _plan(doc)
    if isinstance(doc, ElicitationRequest):
        return _elicitation(doc)
    return _review(doc)


def render(record: RequestRecord) -> RenderableType:
    """One request: a heading with its id and kind, its document, state, and how to answer.

    No box around it: a box narrows the text and makes long ids wrap inside it; soft-wrapped
    lines keep every id whole for copying.
    """
    parts: list[RenderableType] = [
        Rule(style="dim"),
        Text.assemble(
            (record.request_id, "bold"),
            "  ",
            (record.kind, "magenta"),
            "  ",
            _t(record.title, "bold"),
        ),
    ]
    if record.document is not None:
        parts += _body(record.document)
    else:
        parts.append(
            Text(
                f"document not kept ({record.document_bytes} bytes, sha256 {record.document_sha256[:12]})",
                style="dim",
            )
        )
    status = f"{record.state.value}"
    if record.decided_by:
        status += f" by {record.decided_by}" + (f" ({record.rule})" if record.rule else "")
    if record.reason:
        status += f": {record.reason}"
    parts.append(Text(safe_text(status), style="dim"))
    if record.state.value == "pending":
        parts.append(Text(answer_hint(record), style="green"))
    return Group(*parts)
