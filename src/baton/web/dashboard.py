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

Length: server-rendered HTML, mostly markup; every agent-controlled string passes the one escaping helper defined here.
"""

from __future__ import annotations

import asyncio
import difflib
import json
import time
from collections.abc import Iterable
from pathlib import Path
from typing import Final

from starlette.requests import Request
from starlette.responses import HTMLResponse, Response
from starlette.routing import Route

from baton.app.facade.agents import OUTSIDE_MASK, display_path
from baton.app.facade.requests import (
    BooleanField,
    DiffPreview,
    ElicitationRequest,
    MultiSelectField,
    NumberField,
    PermissionRequest,
    PlanRequest,
    QuestionRequest,
    RequestRecord,
    ReviewChanges,
    ReviewRequest,
    State,
    StringField,
)
from baton.app.facade.store import RunRecord
from baton.app.facade.team import changes_line
from baton.jsontypes import JsonObject
from baton.web import assets
from baton.web.context import WebContext
from baton.web.diffview import change_html, diff_table, files_html, merge_refused_html, split_files
from baton.web.grants import grant_controls, grantable_request
from baton.web.markdown import render_markdown
from baton.web.pages import block, href, page, text
from baton.web.summaries import decision_text
from baton.web.trees import ReviewTree, review_tree

__all__ = ["MAX_CARDS", "dashboard_routes", "render_dashboard", "render_run_page"]

MAX_CARDS: Final = 100
"""Pending requests shown as cards; past that the page says how many more wait."""
RECENT_RUNS: Final = 20


def _attr_json(value: JsonObject) -> str:
    """A JSON answer template for a ``data-answer`` attribute (escaped like any text)."""
    return text(json.dumps(value, ensure_ascii=False, separators=(",", ":")))


def _run_href(run_id: str) -> str:
    return href("/runs/", run_id)


# ----------------------------------------------------------------- request bodies


def shown_path(workspace: Path | None, path: str) -> str:
    """A path as a card shows it: relative to the workspace, as the docs promise; one
    outside it whole, and said to be outside (it is what the human is asked about)."""
    if workspace is None:
        return path
    shown = display_path(workspace, path)
    if shown.startswith("<"):  # outside the workspace, or under a private root
        return f"{path} ({OUTSIDE_MASK.strip('<>').replace('-', ' ')})"
    return shown


def _diff(diff: DiffPreview, workspace: Path | None = None) -> str:
    old = (diff.old_text or "").splitlines()
    new = diff.new_text.splitlines()
    path = shown_path(workspace, diff.path)
    source = "/dev/null" if diff.old_text is None else path
    lines = difflib.unified_diff(old, new, fromfile=source, tofile=path, lineterm="")
    return f'<figure class="diff"><figcaption>{text(path)}</figcaption>{diff_table(lines)}</figure>'


def _button(
    label: str,
    answer: JsonObject,
    *,
    css: str = "",
    with_reason: bool = False,
    needs_reason: bool = False,
) -> str:
    extra = " data-with-reason" if with_reason else ""
    extra += " data-needs-reason" if needs_reason else ""
    klass = f' class="{css}"' if css else ""
    return (
        f'<button type="button"{klass} data-action="answer" '
        f'data-answer="{_attr_json(answer)}"{extra}>{text(label)}</button>'
    )


def _reason(label: str = "optional") -> str:
    """The reason box; ``label`` says when it is needed (it must match what the buttons check)."""
    return (
        f'<label class="reason">Reason (sent to the agent; {label})'
        '<textarea data-reason rows="2"></textarea></label>'
    )


def _permission(doc: PermissionRequest, workspace: Path | None = None) -> tuple[str, str]:
    call = doc.tool_call
    parts = [
        f"<dl><dt>tool</dt><dd>{text(call.kind)}</dd>"
        f"<dt>call</dt><dd><code>{text(call.tool_call_id)}</code></dd></dl>"
    ]
    if call.command:
        parts.append(f'<pre class="command">{block(call.command)}</pre>')
    parts += [_diff(d, workspace) for d in call.diffs]
    if call.locations:
        paths = ", ".join(text(shown_path(workspace, loc.path)) for loc in call.locations)
        parts.append(f'<p class="paths">paths: {paths}</p>')
    if not call.command and not call.diffs and call.raw_input is not None:
        raw = json.dumps(call.raw_input, ensure_ascii=False, indent=2)
        parts.append(f'<pre class="raw">{block(raw)}</pre>')
    offered = ", ".join(f"{text(o.name)} ({text(o.kind)})" for o in doc.options)
    parts.append(f'<p class="hint">agent options: {offered}</p>')
    buttons = [_button("Allow once", {"kind": "permission", "decision": "allow"}, css="allow")]
    if grantable_request(doc):
        parts.append(grant_controls(doc))
        buttons.append(
            '<button type="button" class="allow" data-action="grant">Allow and grant</button>'
        )
    buttons.append(_button("Deny", {"kind": "permission", "decision": "deny"}, css="deny"))
    return "".join(parts), "".join(buttons)


def _questions(record: RequestRecord, doc: QuestionRequest) -> tuple[str, str]:
    parts: list[str] = []
    for q in doc.questions:
        single = q.selection == "single"
        mode = "choose one" if single else "choose one or more"
        kind = "radio" if single else "checkbox"
        name = text(f"{record.request_id}/{q.id}")
        options = []
        for o in q.options:
            described = (
                f' <span class="hint">— {text(o.description)}</span>' if o.description else ""
            )
            options.append(
                f'<label class="option"><input type="{kind}" name="{name}" '
                f'value="{text(o.id)}" data-question="{text(q.id)}"> '
                f"<code>{text(o.id)}</code> {text(o.label)}{described}</label>"
            )
        description = (
            f'<pre class="description">{block(q.description)}</pre>' if q.description else ""
        )
        parts.append(
            f"<fieldset><legend><code>{text(q.id)}</code> {text(q.prompt)} "
            f'<span class="hint">({mode})</span></legend>{description}{"".join(options)}</fieldset>'
        )
    parts.append(_reason("optional"))
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
        parts.append(f'<p class="overview">{text(doc.overview)}</p>')
    parts.append(f'<pre class="markdown">{block(doc.markdown)}</pre>')
    if doc.todos:
        items = "".join(
            f'<li>{text(t.content)} <span class="hint">[{text(t.status)}]</span></li>'
            for t in doc.todos
        )
        parts.append(f'<h4>todos</h4><ul class="todos">{items}</ul>')
    for phase in doc.phases:
        items = "".join(
            f'<li>{text(t.content)} <span class="hint">[{text(t.status)}]</span></li>'
            for t in phase.todos
        )
        parts.append(f"<h4>phase: {text(phase.name)}</h4><ul>{items}</ul>")
    project = " · project plan" if doc.is_project else ""
    parts.append(f'<p class="hint">revision <code>{text(doc.revision[:12])}</code>{project}</p>')
    parts.append(_reason("optional"))
    decide = {"kind": "plan", "revision": doc.revision}
    buttons = _button("Accept plan", decide | {"decision": "accept"}, css="allow", with_reason=True)
    buttons += _button("Reject plan", decide | {"decision": "reject"}, css="deny", with_reason=True)
    return "".join(parts), buttons


def _field(
    field: StringField | NumberField | BooleanField | MultiSelectField, required: bool
) -> str:
    label = text(field.title or field.name) + (" *" if required else "")
    data = f'data-field="{text(field.name)}" data-type="{text(field.type)}"'
    hint = f'<span class="hint">{text(field.description)}</span>' if field.description else ""
    if isinstance(field, MultiSelectField):
        boxes = "".join(
            f'<label class="option"><input type="checkbox" value="{text(c.value)}"> '
            f"{text(c.title or c.value)}</label>"
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
        value = f' value="{text(field.default)}"' if field.default is not None else ""
        control = f'<input type="number" step="{step}" {data}{value}>'
    elif field.choices is not None:
        options = "".join(
            f'<option value="{text(c.value)}"{" selected" if c.value == field.default else ""}>'
            f"{text(c.title or c.value)}</option>"
            for c in field.choices
        )
        control = f'<select {data}><option value="">—</option>{options}</select>'
    else:
        value = f' value="{text(field.default)}"' if field.default is not None else ""
        control = f'<input type="text" {data}{value}>'
    return f'<label class="field">{label} {control} {hint}</label>'


_FORM_LABELS: Final = {
    "retry": ("Retry", "Leave it as it is"),
    "answer": ("Send answer", "Decline"),
}
"""Button labels for the forms baton itself asks (a needs-attention retry, a role's question),
by the form's title; any other form says what its title says."""


def _form_labels(title: str | None) -> tuple[str, str]:
    key = (title or "").strip().rstrip("?").strip().lower()
    if key in _FORM_LABELS:
        return _FORM_LABELS[key]
    shown = (title or "").strip().rstrip("?").strip()
    return (shown if 0 < len(shown) <= 24 and "\n" not in shown else "Send", "Decline")


def _elicitation(doc: ElicitationRequest) -> tuple[str, str]:
    schema = doc.requested_schema
    fields = "".join(_field(f, f.name in schema.required) for f in schema.fields)
    body = f'<pre class="description">{block(doc.message)}</pre><div class="form">{fields}</div>'
    accept, decline = _form_labels(schema.title)
    buttons = f'<button type="button" class="allow" data-action="form">{text(accept)}</button>'
    buttons += _button(decline, {"kind": "elicitation", "action": "decline"}, css="deny")
    return body, buttons


def _reported_changes(changes: JsonObject, *, anchor: str) -> str:
    """A task without a branch of its own: the files its role reported, ``git diff HEAD``."""
    files = "".join(f"<li><code>{text(f)}</code></li>" for f in changes["files"])
    section = [f'<h4>changed files ({len(changes["files"])})</h4><ul class="files">{files}</ul>']
    if changes["note"]:
        section.append(f'<p class="hint">{text(changes["note"])}</p>')
    if changes["diff"]:
        sections = split_files(changes["diff"])
        section.append(
            '<h4>diff</h4><div class="diff-files">'
            f"{files_html(sections, {}, where='`git diff` in the project', anchor=anchor)}</div>"
        )
    return "".join(section)


def _review(
    record: RequestRecord,
    doc: ReviewRequest,
    changes: JsonObject | None,
    tree: ReviewTree | None,
) -> tuple[str, str]:
    """A review: what the task was, why an approval did not merge (first, when it did
    not), the report as rendered Markdown (as on the task page), then the change: the
    tree's branch against its base (preflight, files, commits, the diff per file), or
    the files its role reported; each in its own section."""
    role = f"<dt>from</dt><dd>{text(doc.role)}</dd>" if doc.role else ""
    task = href("/tasks/", doc.task_id)
    anchor = f"req-{record.request_id[:12]}"
    pending = record.state is State.PENDING
    parts = [
        f'<dl><dt>task</dt><dd><a href="{task}"><code>{text(doc.task_id)}</code></a></dd>'
        f'<dt>report</dt><dd><a href="{task}#{text(doc.report_ref)}">'
        f"<code>{text(doc.report_ref)}</code></a></dd>{role}</dl>",
    ]
    if tree is not None and tree.merge:  # a decided card: where its merge went, first
        parts.append(f'<p class="merge-state" role="status">{text(tree.merge)}</p>')
    if pending and doc.changes is not None and doc.changes.merge_refused:
        parts.append(merge_refused_html(doc.changes.merge_refused))
    summary = doc.summary
    if tree is not None and doc.changes is not None:
        # The terminal's one-line account of the change, drawn below in full and fresher.
        summary = summary.removesuffix(f"\n\n{changes_line(doc.changes)}\n")
    parts.append(
        '<section class="review-report"><h4>work summary</h4>'
        f'<div class="markdown">{render_markdown(summary)}</div></section>'
    )
    if tree is not None:
        body = change_html(
            tree.changes, task_id=doc.task_id, when=tree.when, anchor=anchor, open_files=pending
        )
        parts.append(f'<section class="review-changes"><h4>the change</h4>{body}</section>')
    elif changes is not None:
        body = _reported_changes(changes, anchor=anchor)
        parts.append(f'<section class="review-changes">{body}</section>')
    rebase = tree.rebase if tree is not None else None
    if pending:
        needed = "required to send back" + ("; added to the rebase prompt" if rebase else "")
        parts.append(_reason(needed))
    buttons = _button(
        "Accept", {"kind": "review", "decision": "approve"}, css="allow", with_reason=True
    )
    buttons += _button(
        "Send back",
        {"kind": "review", "decision": "reject"},
        css="deny",
        with_reason=True,
        needs_reason=True,
    )
    if rebase:
        buttons += _button(
            "Send back to rebase",
            {"kind": "review", "decision": "reject", "reason": rebase},
            css="deny rebase",
            with_reason=True,
        )
    return "".join(parts), buttons


def request_card(
    record: RequestRecord,
    *,
    expires: str | None = None,
    changes: JsonObject | None = None,
    subject: str | None = None,
    workspace: Path | None = None,
    tree: ReviewTree | None = None,
) -> str:
    """One request: what the agent asks, and the controls that answer it (while pending).

    ``expires``: when it expires (an ISO time, shown as a countdown); ``changes``:
    for a review of a task without a branch, its changed files and diff
    (:func:`baton.web.tasks.task_changes`); ``tree``: for a review of a task tree on
    its own branch, its change, preflight and merge (:func:`baton.web.trees.review_tree`);
    ``subject``: for a review, the task's subject (its title); ``workspace``: paths are
    shown relative to it.
    """
    doc = record.document
    title = record.title
    if isinstance(doc, PermissionRequest):
        body, buttons = _permission(doc, workspace)
    elif isinstance(doc, QuestionRequest):
        body, buttons = _questions(record, doc)
    elif isinstance(doc, PlanRequest):
        body, buttons = _plan(doc)
    elif isinstance(doc, ElicitationRequest):
        body, buttons = _elicitation(doc)
    elif isinstance(doc, ReviewRequest):
        body, buttons = _review(record, doc, changes, tree)
        title = f"Review: {subject}" if subject else title
    else:
        body = f'<p class="hint">document not kept ({record.document_bytes} bytes)</p>'
        buttons = ""
    session = f" · session <code>{text(record.session_id)}</code>" if record.session_id else ""
    countdown = (
        f' · <span class="expiry" data-expires="{text(expires)}">expires {text(expires)}</span>'
        if expires
        else ""
    )
    pending = record.state is State.PENDING
    status = "" if pending else text(decision_text(record))
    # An accepted tree not merged yet: the page fetches the card again when the request
    # moves (baton up acted on it), so the card says where the merge went.
    follow = (
        f' data-merge="waiting" data-state="{text(record.state.value)}"'
        if tree is not None and tree.waiting
        else ""
    )
    return (
        f'<article class="request kind-{text(record.kind)}{"" if pending else " done"}" '
        f'data-request-id="{text(record.request_id)}" id="req-{text(record.request_id)}"{follow}>'
        f"<header><h3>{text(title)}</h3>"
        f'<p class="meta"><code>{text(record.request_id[:12])}</code> · {text(record.kind)}'
        f' · run <a href="{_run_href(record.run_id)}"><code>{text(record.run_id)}</code></a>'
        f"{session} · <time>{text(record.created_at)}</time>{countdown}</p></header>"
        f'{body}<div class="actions">{buttons if pending else ""}</div>'
        f'<p class="status{"" if pending else " ok"}" role="status" aria-live="polite">'
        f"{status}</p></article>"
    )


# ------------------------------------------------------------------------- pages


async def _card(ctx: WebContext, record: RequestRecord) -> str:
    """A card with what only the server can add: expiry, and a review's change (its
    tree's branch with the preflight now, or the files its role reported)."""
    from baton.web.api import task_changes_for, task_subject
    from baton.web.summaries import expires_at

    changes = subject = tree = None
    if isinstance(record.document, ReviewRequest):
        tree = await review_tree(ctx.project_dir, ctx.store, record)
        if tree is None:
            changes = await task_changes_for(ctx, record.document.role)
        subject = await task_subject(ctx, record.document.task_id)
    run = await asyncio.to_thread(ctx.store.get_run, record.run_id)
    workspace = Path(run.cwd) if run is not None and run.cwd else ctx.project_dir
    return request_card(
        record,
        expires=expires_at(record),
        changes=changes,
        subject=subject,
        workspace=workspace,
        tree=tree,
    )


def render_dashboard(
    cards: list[str], total: int, *, agents: list[str], roles: list[str], as_of: float = 0.0
) -> str:
    """The inbox page: pending cards (kept live by the script), then the action forms.

    ``as_of``: the server time the cards were read at; the script ignores a live
    message computed earlier (:mod:`baton.web.live`)."""
    shown = "".join(cards[:MAX_CARDS])
    more = (
        f'<p class="notice">{total - MAX_CARDS} more pending requests are not shown; '
        "answer these first, or use <code>baton inbox</code>.</p>"
        if total > MAX_CARDS
        else ""
    )
    empty = "" if total else '<p class="empty" id="inbox-empty">Nothing is waiting for you.</p>'
    body = (
        f'<section id="requests" class="inbox" data-as-of="{as_of!r}">'
        f'<h2>Waiting for you (<span id="inbox-count">{total}</span>)</h2>'
        f'{empty}<div id="cards">{shown}</div>{more}</section>'
        '<section id="decided" class="inbox decided" hidden><h2>Just decided</h2>'
        '<div id="decided-cards"></div></section>' + _action_forms(agents, roles)
    )
    return page("baton", body, current="/")


def _options(values: list[str]) -> str:
    return "".join(f'<option value="{text(v)}">{text(v)}</option>' for v in values)


def _action_forms(agents: list[str], roles: list[str]) -> str:
    parts = ['<section id="act" class="act"><h2>Act</h2>']
    if roles:
        parts.append(
            '<form id="new-task" class="card" data-action="new-task">'
            "<h3>New task for a role</h3>"
            f'<label>Role <select name="to" required>{_options(roles)}</select></label>'
            '<label>Subject <input name="subject" required maxlength="200"></label>'
            "<label>Body (Markdown; <code>- [ ] @ROLE …</code> delegates, fenced "
            "<code>sh</code> blocks are steps for the built-in agent)"
            '<textarea name="body" rows="5"></textarea></label>'
            '<button type="submit" class="allow">Create task</button>'
            '<p class="status" role="status" aria-live="polite"></p></form>'
        )
    if agents:
        parts.append(
            '<form id="new-run" class="card" data-action="new-run">'
            "<h3>One-off run</h3>"
            f'<label>Agent <select name="agent" required>{_options(agents)}</select></label>'
            '<label>Prompt <textarea name="prompt" rows="4" required></textarea></label>'
            '<button type="submit" class="allow">Start run</button>'
            '<p class="status" role="status" aria-live="polite"></p></form>'
        )
    parts.append("</section>")
    return "".join(parts) if len(parts) > 2 else ""


def render_team_page(has_team: bool) -> str:
    """The board: an empty frame the script fills from the live ``board`` message."""
    if not has_team:
        return page(
            "baton: team",
            '<h2>Team</h2><p class="empty">This server has no team: run it in a project '
            "with a <code>baton.toml</code> (<code>baton init</code>).</p>",
            current="/team",
        )
    body = (
        '<section id="board" class="board" data-live="board">'
        '<h2>Team <span id="board-meta" class="meta"></span></h2>'
        '<div id="board-notes"></div>'
        '<h3>Roles</h3><div id="roles" class="roles"><p class="empty">loading…</p></div>'
        '<h3>Budgets</h3><div id="budgets" class="budgets-panel"></div>'
        '<h3>Tasks</h3><div id="stages" class="stages"></div></section>'
    )
    return page("baton: team", body, current="/team")


def _task_changes(detail: JsonObject) -> str:
    """The task page's changes: its tree's branch against the base when it has one (the
    review's view), else what its role reported, diffed in the project."""
    tree = detail.get("tree")
    if tree is None:
        changes = detail["changes"]
        who = text(detail["documents"][0]["recipient"])
        return (
            f'<section class="changes"><h3>Changes by {who}</h3>'
            f"{_reported_changes(changes, anchor='task')}</section>"
        )
    of = (
        ""
        if tree["root_task"] == detail["task_id"]
        else f' <span class="hint">(its tree: <a href="{href("/tasks/", tree["root_task"])}">'
        f"<code>{text(tree['root_task'])}</code></a>)</span>"
    )
    parts = [f'<section class="changes tree" id="change"><h3>The change{of}</h3>']
    if tree["merge"]:
        parts.append(f'<p class="merge-state">{text(tree["merge"])}</p>')
    else:
        parts.append(f'<p class="meta">its tree is {text(tree["state"])}</p>')
    if tree["state"] == "live" and tree["reason"]:  # kept until the next approval merges
        parts.append(
            f'<p class="notice warn">Its last approval did not merge: {text(tree["reason"])}.</p>'
        )
    if tree["note"]:
        parts.append(f'<p class="hint">{text(tree["note"])}</p>')
    if tree["changes"] is not None:
        changes = ReviewChanges.model_validate(tree["changes"])
        parts.append(
            change_html(changes, task_id=tree["root_task"], when=tree["preflight"], anchor="task")
        )
    parts.append("</section>")
    return "".join(parts)


def render_task_page(detail: JsonObject) -> str:
    """A task and its documents, rendered (agent Markdown made safe by ``render_markdown``)."""
    task = detail.get("task") or {}
    docs = []
    for doc in detail["documents"]:
        fields = " · ".join(f"{text(k)}: {text(v)}" for k, v in doc["fields"].items())
        if doc["refused"]:
            content = f'<p class="status error">refused by FCoP: {text(doc["refused"])}</p>'
        else:
            content = f'<div class="markdown">{doc["html"]}</div>'
        docs.append(
            f'<article class="doc kind-{text(doc["kind"].lower())}" id="{text(doc["doc_id"])}">'
            f'<header><h3><span class="tag">{text(doc["kind"])}</span> '
            f"<code>{text(doc['doc_id'])}</code></h3>"
            f'<p class="meta">{text(doc["sender"])} → {text(doc["recipient"])} · '
            f"{text(doc['created_at'])}{' · ' + fields if fields else ''}</p></header>"
            f"{content}</article>"
        )
    links = []
    if task.get("parent"):
        links.append(
            f'parent <a href="{href("/tasks/", task["parent"])}"><code>'
            f"{text(task['parent'])}</code></a>"
        )
    for child in task.get("children", ()):
        links.append(f'child <a href="{href("/tasks/", child)}"><code>{text(child)}</code></a>')
    if detail.get("tree") is not None:
        links.append('<a href="#change">the change ↓</a>')
    subject = task.get("subject") or detail["documents"][0]["fields"].get("subject", "")
    body = (
        f"<h2>Task <code>{text(detail['task_id'])}</code></h2>"
        f'<p class="meta">{text(subject)} · stage {text(task.get("stage", "?"))}'
        f"{' · ' + text(task['status']) if task.get('status') else ''}</p>"
        f'<p class="links">{" · ".join(links)}</p>'
        f"{''.join(docs)}"
        f"{_task_changes(detail)}"
    )
    return page(f"baton: {detail['task_id']}", body, current="/team")


_RUN_STATUSES: Final = ("running", "completed", "failed", "cancelled", "interrupted")
_REQUEST_STATES: Final = tuple(s.value for s in State)


def _select(name: str, values: Iterable[str], current: str | None, label: str) -> str:
    options = "".join(
        f'<option value="{text(v)}"{" selected" if v == current else ""}>{text(v)}</option>'
        for v in values
    )
    return f'<label>{label} <select name="{name}"><option value="">any</option>{options}</select></label>'


def _input(name: str, current: str | None, label: str, kind: str = "text") -> str:
    value = f' value="{text(current)}"' if current else ""
    return f'<label>{label} <input type="{kind}" name="{name}"{value}></label>'


def _next_link(path: str, query: dict[str, str | None], cursor: str | None) -> str:
    from urllib.parse import urlencode

    if cursor is None:
        return ""
    params = {k: v for k, v in query.items() if v and k != "before"} | {"before": cursor}
    return f'<p class="paging"><a href="{text(path + "?" + urlencode(params))}">older →</a></p>'


def render_runs_page(
    rows: list[JsonObject],
    query: dict[str, str | None],
    cursor: str | None,
    agents: list[str],
    roles: list[str],
) -> str:
    form = (
        '<form class="filters" method="get" action="/runs">'
        + _select("status", _RUN_STATUSES, query.get("status"), "status")
        + _select(
            "agent", sorted({*agents, *(r["agent"] for r in rows)}), query.get("agent"), "agent"
        )
        + _select("role", roles, query.get("role"), "role")
        + _input("since", query.get("since"), "from", "date")
        + _input("until", query.get("until"), "until", "date")
        + '<button type="submit">Filter</button> <a href="/runs">clear</a></form>'
    )
    items = []
    for run in rows:
        outcome = run["outcome"]
        prompt = run.get("prompt") or ""
        items.append(
            f'<tr><td data-label="run"><a href="{href("/runs/", run["run_id"])}">'
            f"<code>{text(run['run_id'])}</code></a></td>"
            f'<td data-label="status" class="tone-{text(outcome["tone"])}">'
            f"{text(outcome['label'])}</td>"
            f'<td data-label="agent">{text(run["agent"])} <span class="hint">'
            f"{text(run['kind'])}</span></td>"
            f'<td data-label="prompt" class="prompt">{text(prompt[:160])}</td>'
            f'<td data-label="started"><time>{text(run["created_at"])}</time></td></tr>'
        )
    table = (
        '<table class="history"><thead><tr><th>run</th><th>status</th><th>agent</th>'
        f"<th>prompt</th><th>started</th></tr></thead><tbody>{''.join(items)}</tbody></table>"
        if items
        else '<p class="empty">No runs match.</p>'
    )
    body = f"<h2>Runs</h2>{form}{table}{_next_link('/runs', query, cursor)}"
    return page("baton: runs", body, current="/runs")


def render_decisions_page(
    rows: list[JsonObject], query: dict[str, str | None], cursor: str | None, roles: list[str]
) -> str:
    form = (
        '<form class="filters" method="get" action="/decisions">'
        + _select("state", _REQUEST_STATES, query.get("state"), "state")
        + _select(
            "kind",
            ("permission", "question", "plan", "elicitation", "review"),
            query.get("kind"),
            "kind",
        )
        + _select("decided_by", ("human", "policy", "headless"), query.get("decided_by"), "by")
        + _select("role", roles, query.get("role"), "role")
        + _input("agent", query.get("agent"), "agent")
        + _input("since", query.get("since"), "from", "date")
        + _input("until", query.get("until"), "until", "date")
        + '<button type="submit">Filter</button> <a href="/decisions">clear</a></form>'
    )
    items = []
    for r in rows:
        items.append(
            f'<tr><td data-label="request"><code>{text(r["request_id"][:12])}</code> '
            f"{text(r['title'])}</td>"
            f'<td data-label="kind">{text(r["kind"])}</td>'
            f'<td data-label="decision">{text(r["decision"] or r["state"])}</td>'
            f'<td data-label="run"><a href="{href("/runs/", r["run_id"])}">'
            f"<code>{text(r['run_id'])}</code></a></td>"
            f'<td data-label="asked"><time>{text(r["created_at"])}</time></td></tr>'
        )
    table = (
        '<table class="history"><thead><tr><th>request</th><th>kind</th><th>decision</th>'
        f"<th>run</th><th>asked</th></tr></thead><tbody>{''.join(items)}"
        "</tbody></table>"
        if items
        else '<p class="empty">No decisions match.</p>'
    )
    body = f"<h2>Decisions</h2>{form}{table}{_next_link('/decisions', query, cursor)}"
    return page("baton: decisions", body, current="/decisions")


def render_run_page(run: RunRecord, detail: JsonObject) -> str:
    """A run: header with its honest outcome, requests, and the live view the script draws."""
    outcome = detail["outcome"]
    cancel = (
        '<button type="button" class="deny small" data-action="cancel-run">Cancel turn</button>'
        if run.status == "running" and run.kind == "run"
        else ""
    )
    requests = "".join(
        f'<li><a href="/#req-{text(r["request_id"])}">{text(r["title"])}</a> '
        f'<span class="hint">{text(r["kind"])} · {text(r["decision"] or r["state"])}</span></li>'
        for r in detail["requests"]
    )
    body = (
        f'<section class="run" id="run" data-run-id="{text(run.run_id)}" '
        f'data-kind="{text(run.kind)}" data-workspace="{text(run.cwd)}">'
        f"<h2>Run <code>{text(run.run_id)}</code></h2>"
        f'<p class="meta">{text(run.agent)} · {text(run.kind)} · '
        f'<span id="run-status" class="tone-{text(outcome["tone"])}">{text(outcome["label"])}'
        f'</span> · <span id="run-count">{detail["last_seq"]}</span> events · '
        f"<code>{text(run.cwd)}</code> {cancel}</p>"
        f'<details class="requests"{" open" if requests else ""}><summary>Requests of this run '
        f'(<span id="run-requests-count">{len(detail["requests"])}</span>)</summary>'
        f'<ul id="run-requests">{requests}</ul></details>'
        '<div class="run-tools"><label><input type="checkbox" id="show-thoughts"> show thoughts'
        '</label> <label><input type="checkbox" id="show-raw"> raw events</label></div>'
        '<div id="plan" class="plans" hidden></div>'
        '<div id="lanes" class="lanes"></div>'
        '<ol id="events" class="events" hidden></ol>'
        '<p id="stream-state" role="status">connecting…</p>'
        '<button type="button" id="jump-live" class="jump" hidden>↓ jump to live</button>'
        "</section>"
    )
    return page(f"baton run {run.run_id}", body, current="/runs")


def _query(request: Request, names: Iterable[str]) -> dict[str, str | None]:
    return {n: request.query_params.get(n) or None for n in names}


def dashboard_routes(ctx: WebContext) -> list[Route]:
    """The pages, the card fragment, and the two static assets."""
    from baton.web.api import (
        ApiError,
        decision_filter,
        decisions_page,
        run_filter,
        runs_with_outcomes,
        task_detail,
    )

    def roles() -> list[str]:
        return list(ctx.board.role_names) if ctx.board is not None else []

    async def home(request: Request) -> Response:
        as_of = time.time()  # before the read: a live message computed later is newer
        pending = await ctx.ledger.pending()
        cards = [await _card(ctx, r) for r in pending[:MAX_CARDS]]
        agents = ctx.launcher.agents() if ctx.launcher is not None else []
        return HTMLResponse(
            render_dashboard(cards, len(pending), agents=agents, roles=roles(), as_of=as_of)
        )

    async def card(request: Request) -> Response:
        request_id = await ctx.ledger.resolve_id(request.path_params["request_id"])
        record = await ctx.ledger.get(request_id)
        return HTMLResponse(await _card(ctx, record))

    async def team(request: Request) -> Response:
        return HTMLResponse(render_team_page(ctx.board is not None))

    async def task(request: Request) -> Response:
        try:
            detail = await task_detail(ctx, request.path_params["task_id"])
        except ApiError as exc:
            return HTMLResponse(
                page("baton: no such task", f"<h2>{text(exc)}</h2>"), status_code=exc.status
            )
        return HTMLResponse(render_task_page(detail))

    async def runs(request: Request) -> Response:
        try:
            rows, cursor = await runs_with_outcomes(ctx, run_filter(request), 50)
        except ApiError as exc:
            return HTMLResponse(page("baton: runs", f"<h2>{text(exc)}</h2>"), status_code=400)
        agents = ctx.launcher.agents() if ctx.launcher is not None else []
        query = _query(request, ("status", "agent", "role", "since", "until", "kind"))
        return HTMLResponse(render_runs_page(rows, query, cursor, agents, roles()))

    async def decisions(request: Request) -> Response:
        try:
            rows, cursor = await decisions_page(ctx, decision_filter(request), 50)
        except ApiError as exc:
            return HTMLResponse(page("baton: decisions", f"<h2>{text(exc)}</h2>"), status_code=400)
        names = ("state", "kind", "decided_by", "role", "agent", "since", "until")
        return HTMLResponse(render_decisions_page(rows, _query(request, names), cursor, roles()))

    async def run_page(request: Request) -> Response:
        from baton.web.api import run_detail

        run_id = request.path_params["run_id"]
        run = await asyncio.to_thread(ctx.store.get_run, run_id)
        if run is None:
            return HTMLResponse(page("baton: no such run", "<h2>No such run</h2>"), status_code=404)
        return HTMLResponse(render_run_page(run, await run_detail(ctx, run)))

    async def script(request: Request) -> Response:
        return Response(assets.DASHBOARD_JS, media_type="text/javascript")

    async def stylesheet(request: Request) -> Response:
        return Response(assets.DASHBOARD_CSS, media_type="text/css")

    async def icon(request: Request) -> Response:
        return Response(assets.ICON_SVG, media_type="image/svg+xml")

    return [
        Route("/", home, methods=["GET"]),
        Route("/fragments/requests/{request_id}", card, methods=["GET"]),
        Route("/team", team, methods=["GET"]),
        Route("/tasks/{task_id}", task, methods=["GET"]),
        Route("/runs", runs, methods=["GET"]),
        Route("/runs/{run_id}", run_page, methods=["GET"]),
        Route("/decisions", decisions, methods=["GET"]),
        Route(assets.JS_PATH, script, methods=["GET"]),
        Route(assets.CSS_PATH, stylesheet, methods=["GET"]),
        Route(assets.ICON_PATH, icon, methods=["GET"]),
        Route("/favicon.ico", icon, methods=["GET"]),
    ]
