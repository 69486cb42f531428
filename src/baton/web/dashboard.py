"""The dashboard: server-rendered HTML of pending requests and recent runs.

Everything an agent can influence (titles, commands, diffs, plan Markdown,
question text, ids, paths) reaches the page only through :func:`_text` or
:func:`_block`, which run :func:`~baton.security.display.escape_html`: HTML
metacharacters are escaped (quotes too, so attribute values are safe), and
terminal controls and bidi overrides are made *visible* rather than passed to
the browser, where an RLO could reorder what the human reads before approving
it. Multi-line agent text additionally gets
:func:`~baton.security.display.mark_agent_lines`, so a line in a plan cannot
pass for baton's own words. Plan Markdown is shown as escaped preformatted
text, never rendered: what the human approves is exactly what the agent wrote.

The page is honest about its limits: it lists what is pending when loaded
(the script only offers a reload when that changes), and answers go through the
same JSON API as any client (``POST /api/requests/{id}/answer``).
"""

from __future__ import annotations

import asyncio
import difflib
import json
from collections.abc import Iterable
from typing import Any, Final
from urllib.parse import quote

from starlette.requests import Request
from starlette.responses import HTMLResponse, Response
from starlette.routing import Route

from baton.requests.ledger import RequestRecord
from baton.requests.model import (
    BooleanField,
    DiffPreview,
    ElicitationRequest,
    MultiSelectField,
    NumberField,
    PermissionRequest,
    PlanRequest,
    QuestionRequest,
    ReviewRequest,
    StringField,
)
from baton.security.display import escape_html, safe_agent_text
from baton.store.records import RunRecord
from baton.web import assets
from baton.web.context import WebContext

__all__ = ["MAX_CARDS", "dashboard_routes", "render_dashboard", "render_run_page"]

MAX_CARDS: Final = 100
"""Pending requests shown as cards; past that the page says how many more wait."""
RECENT_RUNS: Final = 20


def _text(value: object) -> str:
    """Agent or user text for an element or an attribute value."""
    return escape_html(str(value))


def _block(value: str) -> str:
    """Multi-line agent text for a ``<pre>``: escaped, and forged framing marked."""
    return escape_html(safe_agent_text(value))


def _attr_json(value: dict[str, Any]) -> str:
    """A JSON answer template for a ``data-answer`` attribute (escaped like any text)."""
    return _text(json.dumps(value, ensure_ascii=False, separators=(",", ":")))


def _run_href(run_id: str) -> str:
    return _text("/runs/" + quote(run_id, safe=""))


def page(title: str, body: str) -> str:
    """The HTML shell: our stylesheet and script only (the CSP allows nothing else)."""
    return (
        '<!doctype html>\n<html lang="en"><head><meta charset="utf-8">'
        '<meta name="viewport" content="width=device-width, initial-scale=1">'
        f"<title>{_text(title)}</title>"
        f'<link rel="stylesheet" href="{assets.CSS_PATH}">'
        f'<script src="{assets.JS_PATH}" defer></script>'
        f"</head><body>{body}</body></html>"
    )


# ----------------------------------------------------------------- request bodies


def _diff(diff: DiffPreview) -> str:
    old = (diff.old_text or "").splitlines()
    new = diff.new_text.splitlines()
    source = "/dev/null" if diff.old_text is None else diff.path
    rows: list[str] = []
    for line in difflib.unified_diff(old, new, fromfile=source, tofile=diff.path, lineterm=""):
        if line.startswith(("+++", "---")):
            css = "file"
        elif line.startswith("@@"):
            css = "hunk"
        elif line.startswith("+"):
            css = "add"
        elif line.startswith("-"):
            css = "del"
        else:
            css = "ctx"
        rows.append(f'<span class="{css}">{_block(line)}</span>')
    body = "\n".join(rows) if rows else "(no change)"
    return (
        f'<figure class="diff"><figcaption>{_text(diff.path)}</figcaption>'
        f"<pre>{body}</pre></figure>"
    )


def _button(label: str, answer: dict[str, Any], *, css: str = "", with_reason: bool = False) -> str:
    extra = " data-with-reason" if with_reason else ""
    klass = f' class="{css}"' if css else ""
    return (
        f'<button type="button"{klass} data-action="answer" '
        f'data-answer="{_attr_json(answer)}"{extra}>{_text(label)}</button>'
    )


_REASON: Final = (
    '<label class="reason">Reason (sent to the agent, optional)'
    '<textarea data-reason rows="2"></textarea></label>'
)


def _permission(doc: PermissionRequest) -> tuple[str, str]:
    call = doc.tool_call
    parts = [
        f"<dl><dt>tool</dt><dd>{_text(call.kind)}</dd>"
        f"<dt>call</dt><dd><code>{_text(call.tool_call_id)}</code></dd></dl>"
    ]
    if call.command:
        parts.append(f'<pre class="command">{_block(call.command)}</pre>')
    parts += [_diff(d) for d in call.diffs]
    if call.locations:
        paths = ", ".join(_text(loc.path) for loc in call.locations)
        parts.append(f'<p class="paths">paths: {paths}</p>')
    if not call.command and not call.diffs and call.raw_input is not None:
        raw = json.dumps(call.raw_input, ensure_ascii=False, indent=2)
        parts.append(f'<pre class="raw">{_block(raw)}</pre>')
    offered = ", ".join(f"{_text(o.name)} ({_text(o.kind)})" for o in doc.options)
    parts.append(f'<p class="hint">agent options: {offered}</p>')
    buttons = [_button("Allow once", {"kind": "permission", "decision": "allow"}, css="allow")]
    if doc.allow_always_granted and any(o.kind == "allow_always" for o in doc.options):
        buttons.append(
            _button(
                "Allow always",
                {"kind": "permission", "decision": "allow", "scope": "always"},
                css="allow",
            )
        )
    buttons.append(_button("Deny", {"kind": "permission", "decision": "deny"}, css="deny"))
    return "".join(parts), "".join(buttons)


def _questions(record: RequestRecord, doc: QuestionRequest) -> tuple[str, str]:
    parts: list[str] = []
    for q in doc.questions:
        single = q.selection == "single"
        mode = "choose one" if single else "choose one or more"
        kind = "radio" if single else "checkbox"
        name = _text(f"{record.request_id}/{q.id}")
        options = []
        for o in q.options:
            described = (
                f' <span class="hint">— {_text(o.description)}</span>' if o.description else ""
            )
            options.append(
                f'<label class="option"><input type="{kind}" name="{name}" '
                f'value="{_text(o.id)}" data-question="{_text(q.id)}"> '
                f"<code>{_text(o.id)}</code> {_text(o.label)}{described}</label>"
            )
        description = (
            f'<pre class="description">{_block(q.description)}</pre>' if q.description else ""
        )
        parts.append(
            f"<fieldset><legend><code>{_text(q.id)}</code> {_text(q.prompt)} "
            f'<span class="hint">({mode})</span></legend>{description}{"".join(options)}</fieldset>'
        )
    parts.append(_REASON)
    buttons = (
        '<button type="button" class="allow" data-action="questions">Send answers</button>'
        + _button(
            "Skip all", {"kind": "question", "outcome": "skipped"}, css="deny", with_reason=True
        )
    )
    return "".join(parts), buttons


def _plan(doc: PlanRequest) -> tuple[str, str]:
    parts: list[str] = []
    if doc.overview:
        parts.append(f'<p class="overview">{_text(doc.overview)}</p>')
    parts.append(f'<pre class="markdown">{_block(doc.markdown)}</pre>')
    if doc.todos:
        items = "".join(
            f'<li>{_text(t.content)} <span class="hint">[{_text(t.status)}]</span></li>'
            for t in doc.todos
        )
        parts.append(f'<h4>todos</h4><ul class="todos">{items}</ul>')
    for phase in doc.phases:
        items = "".join(
            f'<li>{_text(t.content)} <span class="hint">[{_text(t.status)}]</span></li>'
            for t in phase.todos
        )
        parts.append(f"<h4>phase: {_text(phase.name)}</h4><ul>{items}</ul>")
    project = " · project plan" if doc.is_project else ""
    parts.append(f'<p class="hint">revision <code>{_text(doc.revision[:12])}</code>{project}</p>')
    parts.append(_REASON)
    decide = {"kind": "plan", "revision": doc.revision}
    buttons = _button("Accept plan", decide | {"decision": "accept"}, css="allow", with_reason=True)
    buttons += _button("Reject plan", decide | {"decision": "reject"}, css="deny", with_reason=True)
    return "".join(parts), buttons


def _field(
    field: StringField | NumberField | BooleanField | MultiSelectField, required: bool
) -> str:
    label = _text(field.title or field.name) + (" *" if required else "")
    data = f'data-field="{_text(field.name)}" data-type="{_text(field.type)}"'
    hint = f'<span class="hint">{_text(field.description)}</span>' if field.description else ""
    if isinstance(field, MultiSelectField):
        boxes = "".join(
            f'<label class="option"><input type="checkbox" value="{_text(c.value)}"> '
            f"{_text(c.title or c.value)}</label>"
            for c in field.choices
        )
        return f"<fieldset {data}><legend>{label}</legend>{hint}{boxes}</fieldset>"
    if isinstance(field, BooleanField):
        checked = " checked" if field.default else ""
        return (
            f'<label class="field"><input type="checkbox" {data}{checked}> {label} {hint}</label>'
        )
    if isinstance(field, NumberField):
        step = "1" if field.type == "integer" else "any"
        value = f' value="{_text(field.default)}"' if field.default is not None else ""
        control = f'<input type="number" step="{step}" {data}{value}>'
    elif field.choices is not None:
        options = "".join(
            f'<option value="{_text(c.value)}"{" selected" if c.value == field.default else ""}>'
            f"{_text(c.title or c.value)}</option>"
            for c in field.choices
        )
        control = f'<select {data}><option value="">—</option>{options}</select>'
    else:
        value = f' value="{_text(field.default)}"' if field.default is not None else ""
        control = f'<input type="text" {data}{value}>'
    return f'<label class="field">{label} {control} {hint}</label>'


def _elicitation(doc: ElicitationRequest) -> tuple[str, str]:
    schema = doc.requested_schema
    fields = "".join(_field(f, f.name in schema.required) for f in schema.fields)
    body = f'<pre class="description">{_block(doc.message)}</pre><div class="form">{fields}</div>'
    buttons = '<button type="button" class="allow" data-action="form">Submit form</button>'
    buttons += _button("Decline", {"kind": "elicitation", "action": "decline"}, css="deny")
    return body, buttons


def _review(doc: ReviewRequest) -> tuple[str, str]:
    role = f"<dt>role</dt><dd>{_text(doc.role)}</dd>" if doc.role else ""
    body = (
        f"<dl><dt>task</dt><dd><code>{_text(doc.task_id)}</code></dd>"
        f"<dt>report</dt><dd><code>{_text(doc.report_ref)}</code></dd>{role}</dl>"
        f'<pre class="description">{_block(doc.summary)}</pre>{_REASON}'
    )
    buttons = _button(
        "Approve", {"kind": "review", "decision": "approve"}, css="allow", with_reason=True
    )
    buttons += _button(
        "Reject", {"kind": "review", "decision": "reject"}, css="deny", with_reason=True
    )
    return body, buttons


def request_card(record: RequestRecord) -> str:
    """One pending request: what the agent asks, and the controls that answer it."""
    doc = record.document
    if isinstance(doc, PermissionRequest):
        body, buttons = _permission(doc)
    elif isinstance(doc, QuestionRequest):
        body, buttons = _questions(record, doc)
    elif isinstance(doc, PlanRequest):
        body, buttons = _plan(doc)
    elif isinstance(doc, ElicitationRequest):
        body, buttons = _elicitation(doc)
    elif isinstance(doc, ReviewRequest):
        body, buttons = _review(doc)
    else:
        body = f'<p class="hint">document not kept ({record.document_bytes} bytes)</p>'
        buttons = ""
    session = f" · session <code>{_text(record.session_id)}</code>" if record.session_id else ""
    return (
        f'<article class="request kind-{_text(record.kind)}" '
        f'data-request-id="{_text(record.request_id)}">'
        f"<header><h3>{_text(record.title)}</h3>"
        f'<p class="meta"><code>{_text(record.request_id)}</code> · {_text(record.kind)}'
        f' · run <a href="{_run_href(record.run_id)}"><code>{_text(record.run_id)}</code></a>'
        f"{session} · {_text(record.created_at)}</p></header>"
        f'{body}<div class="actions">{buttons}</div>'
        '<p class="status" role="status" aria-live="polite"></p></article>'
    )


def _runs_table(runs: Iterable[RunRecord]) -> str:
    rows = "".join(
        f'<tr><td><a href="{_run_href(run.run_id)}"><code>{_text(run.run_id)}</code></a></td>'
        f"<td>{_text(run.agent)}</td><td>{_text(run.kind)}</td>"
        f'<td class="run-{_text(run.status)}">{_text(run.status)}</td>'
        f"<td>{_text(run.created_at)}</td><td>{_text(run.ended_at or '')}</td>"
        f"<td><code>{_text(run.cwd)}</code></td></tr>"
        for run in runs
    )
    if not rows:
        return '<p class="empty">No runs yet.</p>'
    return (
        "<table><thead><tr><th>run</th><th>agent</th><th>kind</th><th>status</th>"
        f"<th>started</th><th>ended</th><th>cwd</th></tr></thead><tbody>{rows}</tbody></table>"
    )


def render_dashboard(pending: list[RequestRecord], runs: list[RunRecord]) -> str:
    """The whole dashboard page (pure: records in, HTML out)."""
    cards = "".join(request_card(r) for r in pending[:MAX_CARDS])
    if len(pending) > MAX_CARDS:
        cards += (
            f'<p class="notice">{len(pending) - MAX_CARDS} more pending requests are not shown; '
            "answer these first, or use <code>baton inbox</code>.</p>"
        )
    if not pending:
        cards = '<p class="empty">Nothing is waiting for you.</p>'
    # Every pending id, shown or not: the script compares them with the API's to
    # tell the human that something new arrived.
    ids = _text(" ".join(r.request_id for r in pending))
    body = (
        '<header class="top"><h1>baton</h1><nav><a href="/">refresh</a></nav></header>'
        '<p id="notice" class="notice" hidden></p><main>'
        f'<section id="requests" data-pending="{ids}">'
        f"<h2>Pending requests ({len(pending)})</h2>{cards}</section>"
        f'<section id="runs"><h2>Recent runs</h2>{_runs_table(runs)}</section></main>'
    )
    return page("baton", body)


def render_run_page(run: RunRecord, last_seq: int) -> str:
    """A run's live event view; the script fills it from the SSE stream."""
    body = (
        '<header class="top"><h1>baton</h1><nav><a href="/">dashboard</a></nav></header><main>'
        f"<h2>Run <code>{_text(run.run_id)}</code></h2>"
        f'<p class="meta">{_text(run.agent)} · {_text(run.kind)} · {_text(run.status)} · '
        f"<code>{_text(run.cwd)}</code> · {last_seq} events so far</p>"
        '<p id="stream-state" role="status">connecting…</p>'
        f'<ol id="events" class="events" data-run-id="{_text(run.run_id)}"></ol></main>'
    )
    return page(f"baton run {run.run_id}", body)


def dashboard_routes(ctx: WebContext) -> list[Route]:
    """``/``, ``/runs/{run_id}`` and the two static assets."""

    async def home(request: Request) -> Response:
        pending = await ctx.ledger.pending()
        runs = await asyncio.to_thread(ctx.store.list_runs, RECENT_RUNS)
        return HTMLResponse(render_dashboard(pending, runs))

    async def run_page(request: Request) -> Response:
        run_id = request.path_params["run_id"]
        run = await asyncio.to_thread(ctx.store.get_run, run_id)
        if run is None:
            return HTMLResponse(page("baton: no such run", "<h1>No such run</h1>"), status_code=404)
        last_seq = await asyncio.to_thread(ctx.store.last_seq, run_id)
        return HTMLResponse(render_run_page(run, last_seq))

    async def script(request: Request) -> Response:
        return Response(assets.DASHBOARD_JS, media_type="text/javascript")

    async def stylesheet(request: Request) -> Response:
        return Response(assets.DASHBOARD_CSS, media_type="text/css")

    return [
        Route("/", home, methods=["GET"]),
        Route("/runs/{run_id}", run_page, methods=["GET"]),
        Route(assets.JS_PATH, script, methods=["GET"]),
        Route(assets.CSS_PATH, stylesheet, methods=["GET"]),
    ]
