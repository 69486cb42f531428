"""The human's grants on the web: the page that lists them, revoking, and the API.

``GET /grants`` (the page), ``GET /api/grants`` and ``POST /api/grants/{grant_id}/revoke``
(JSON). A grant is made with an answer (the permission card's "Allow and grant" control,
:func:`grant_controls`, sends ``{"decision": "allow", "grant": {...}}``); it lives in the
store (:mod:`baton.requests.grant_book`), so the CLI's ``baton grants`` and this page show
the same rows.
"""

from __future__ import annotations

from typing import Any, Final

from starlette.requests import Request
from starlette.responses import HTMLResponse, JSONResponse, Response
from starlette.routing import Route

from baton.app.facade.requests import (
    GRANT_SCOPES,
    Grant,
    GrantBook,
    PermissionRequest,
    default_subject,
    grant_data,
    tool_call_paths,
)
from baton.web.context import WebContext
from baton.web.pages import page, text

__all__ = ["grant_controls", "grant_routes", "grantable_request", "render_grants_page"]

_SCOPE_LABEL: Final = {
    "turn": "this turn",
    "task": "this task tree",
    "role": "this role",
    "run": "this run",
    "project": "the project",
}
_FOR: Final = (("", "no expiry"), ("900", "15 min"), ("3600", "1 hour"), ("28800", "8 hours"))


def grantable_request(doc: PermissionRequest) -> bool:
    """Whether a grant can be offered for this request (:func:`default_subject`)."""
    return default_subject(doc, tool_call_paths(doc)) is not None


_SUBJECT_LABEL: Final = {"execute": "command prefix", "fetch": "host"}


def grant_controls(doc: PermissionRequest) -> str:
    """The card's "Allow and grant" control: scope, expiry, use limit (only real scopes)."""
    ctx = doc.context
    scopes = [
        s for s in GRANT_SCOPES if s not in ("task", "role") or (ctx and getattr(ctx, s, None))
    ]
    default = "task" if "task" in scopes else "run"
    options = "".join(
        f'<option value="{s}"{" selected" if s == default else ""}>{_SCOPE_LABEL[s]}</option>'
        for s in scopes
    )
    expiry = "".join(f'<option value="{v}">{label}</option>' for v, label in _FOR)
    what = _SUBJECT_LABEL.get(doc.tool_call.kind, "path glob")
    subject = default_subject(doc, tool_call_paths(doc)) or ""
    return (
        '<fieldset class="grant"><legend>Allow it again without asking</legend>'
        f'<label>{what} <input data-grant="subject" type="text" value="{text(subject)}" '
        'spellcheck="false" autocomplete="off"></label> '
        f'<label>for <select data-grant="scope">{options}</select></label> '
        f'<label>expires <select data-grant="for">{expiry}</select></label> '
        '<label>uses <input data-grant="uses" type="number" min="1" max="1000" '
        'placeholder="no limit" inputmode="numeric"></label>'
        '<p class="hint">baton answers matching requests itself, once each, and names the '
        'grant; the agent\'s own "always" is never used. Revoke it on the Grants page.</p>'
        "</fieldset>"
    )


def _row(grant: Grant, now: str) -> str:
    state = grant.state(now)
    where = _SCOPE_LABEL[grant.scope] + (
        f" <code>{text(grant.scope_key)}</code>" if grant.scope_key else ""
    )
    left = "no limit" if grant.uses_left is None else f"{grant.uses_left} left"
    revoke = (
        f'<button type="button" class="deny small" data-action="revoke-grant" '
        f'data-grant-id="{text(grant.grant_id)}">Revoke</button>'
        if state == "active"
        else ""
    )
    return (
        f'<tr data-grant="{text(grant.grant_id)}" class="grant-{state}">'
        f'<td data-label="grant"><code>{text(grant.grant_id)}</code></td>'
        f'<td data-label="state" class="state">{text(state)}</td>'
        f'<td data-label="allows">{text(grant.tool_kind)} <code>{text(grant.subject)}</code></td>'
        f'<td data-label="for">{where}</td>'
        f'<td data-label="expires"><time>{text(grant.expires_at or "never")}</time></td>'
        f'<td data-label="uses">{grant.uses} used, {left}</td>'
        f'<td data-label="">{revoke}<span class="status" role="status"></span></td></tr>'
    )


def render_grants_page(grants: list[Grant], now: str) -> str:
    items = "".join(_row(g, now) for g in grants)
    table = (
        '<table class="history grants"><thead><tr><th>grant</th><th>state</th><th>allows</th>'
        "<th>for</th><th>expires</th><th>uses</th><th></th></tr></thead>"
        f"<tbody>{items}</tbody></table>"
        if items
        else '<p class="empty">No grants yet. Answer a permission with "Allow and grant" '
        "(or <code>baton answer ID --allow --scope …</code>).</p>"
    )
    intro = (
        '<p class="hint">What baton allows again without asking you: the same kind of tool '
        "call on the same command prefix, path glob or host, within its scope, until it "
        "expires or its uses run out. A revoked grant answers nothing from then on.</p>"
    )
    return page("baton: grants", f"<h2>Grants</h2>{intro}{table}", current="/grants")


def grant_routes(ctx: WebContext) -> list[Route]:
    book = GrantBook(ctx.store, clock=ctx.ledger.clock)

    async def grants_page(request: Request) -> Response:
        return HTMLResponse(render_grants_page(await book.list(), book.now()))

    async def list_grants(request: Request) -> Response:
        now = book.now()
        rows: list[dict[str, Any]] = [grant_data(g, now) for g in await book.list()]
        return JSONResponse({"grants": rows})

    async def revoke_grant(request: Request) -> Response:
        grant, changed = await book.revoke(request.path_params["grant_id"])
        ctx.hub.poke()
        return JSONResponse(grant_data(grant, book.now()) | {"revoked_now": changed})

    return [
        Route("/grants", grants_page, methods=["GET"]),
        Route("/api/grants", list_grants, methods=["GET"]),
        Route("/api/grants/{grant_id}/revoke", revoke_grant, methods=["POST"]),
    ]
