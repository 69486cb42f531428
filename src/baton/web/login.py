"""``/login`` and ``/api/login``: a one-time code in, a session (cookie and proof) out.

The page holds no secret: the code arrives in the URL fragment (never sent to
a server) or is typed. Its script first removes the fragment from the address
bar and history entry, then posts the code. If the page was opened on another
host name than this server's login host (``127.0.0.1``), the script moves to
the login host first, fragment and all, so the cookie is set where no other
local server receives it. The answer sets the session's cookie half and carries
its proof half, which the script keeps in this origin's ``localStorage``. See
:mod:`baton.web.sessions` for the rules.
"""

from __future__ import annotations

import json

from starlette.requests import Request
from starlette.responses import HTMLResponse, JSONResponse, Response
from starlette.routing import Route

from baton.web.api import ApiError, read_json_body
from baton.web.auth import cookie_name, request_origin, server_port
from baton.web.context import WebContext
from baton.web.pages import page, text
from baton.web.sessions import SESSION_TTL_S

__all__ = ["login_routes"]


def render_login(login_origin: str | None) -> str:
    canonical = f' data-login-origin="{text(login_origin)}"' if login_origin else ""
    body = (
        f'<section class="login" id="login"{canonical}>'
        "<h1>baton</h1><p>Enter the one-time login code that <code>baton serve</code> "
        "(or <code>baton up --serve</code>) printed. Each code works once, for ten minutes; "
        "<code>baton serve --login-code</code> prints a new one.</p>"
        '<form id="login-form"><label>Login code '
        '<input id="login-code" name="code" autocomplete="one-time-code" '
        'autocapitalize="characters" spellcheck="false" placeholder="ABCD-EFGH-JKMN" required>'
        '</label> <button type="submit" class="allow">Log in</button></form>'
        '<p id="login-status" class="status" role="status" aria-live="polite"></p></section>'
    )
    return page("baton: log in", body, nav=False)


def login_routes(ctx: WebContext) -> list[Route]:
    async def login_page(request: Request) -> Response:
        origin = None
        if ctx.auth.login_host is not None:
            port = request.url.port
            origin = f"{request.url.scheme}://{ctx.auth.login_host}" + (f":{port}" if port else "")
        return HTMLResponse(render_login(origin))

    async def login(request: Request) -> Response:
        sessions = ctx.auth.sessions
        if sessions is None:
            return JSONResponse({"ok": True, "message": "this server needs no login"})
        host = request.headers.get("host", "")
        if not ctx.auth.login_allowed(host):
            raise ApiError(
                403,
                "WrongHost",
                f"log in on {ctx.auth.login_host} (a host name no other local server shares)",
            )
        data = await read_json_body(request, limit=4096)
        code = data.get("code") if isinstance(data, dict) else None
        if not isinstance(code, str):
            raise ApiError(422, "InvalidLogin", 'send {"code": "<the login code>"}')
        opened = await sessions.exchange(
            code,
            origin=request_origin(request.scope),
            user_agent=request.headers.get("user-agent", ""),
        )
        if opened is None:
            raise ApiError(
                401,
                "InvalidLogin",
                "that code is not valid: it was already used, has expired, or is mistyped",
            )
        # The proof half goes to the page's script only (never into a cookie).
        response = Response(
            json.dumps({"ok": True, "proof": opened.proof}), media_type="application/json"
        )
        response.set_cookie(
            cookie_name(server_port(request.scope)),
            opened.cookie,
            max_age=int(SESSION_TTL_S),
            httponly=True,
            samesite="strict",
            secure=request.url.scheme == "https",
            path="/",
        )
        return response

    return [
        Route("/login", login_page, methods=["GET"]),
        Route("/api/login", login, methods=["POST"]),
    ]
