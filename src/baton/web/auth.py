"""Who may use the web surface: a bearer token, its cookie, and loopback-only without one.

The dashboard can answer an agent's permission requests, so reaching it is
reaching the agents' tools. The rules, in one ASGI middleware (:class:`TokenGate`):

* **With a token** (the default of ``baton serve``): every request except the
  static assets needs ``Authorization: Bearer <token>`` or the ``baton_token_<port>``
  cookie. Browsers get the cookie by opening the printed URL once, with
  ``?token=``; the gate answers that with a redirect to the same path without
  the token (so it leaves the address bar and history) and sets the cookie
  ``HttpOnly`` (page scripts, including injected ones, cannot read it) and
  ``SameSite=Strict`` (other sites cannot make the browser send it). Because the
  cookie is HttpOnly the dashboard's own ``fetch``/``EventSource`` calls ride on
  it rather than on the header, so ``/api/*`` accepts either. Comparisons are
  constant-time (:func:`hmac.compare_digest`). The cookie is named after the
  server's port (``baton_token_8765``), as browsers do not keep cookies apart by port.
* **Cross-site writes are refused** even with the cookie: a state-changing
  request whose ``Origin`` is not this host is a 403, and the answer endpoint
  only takes ``application/json`` (which a cross-site form cannot send without a
  CORS preflight we never grant).
* **Without a token** (``--no-token``, loopback binds only) the ``Host`` header
  must name a loopback address: otherwise a web page could rebind its own DNS
  name to 127.0.0.1 and drive the API from the user's browser.

Every response also carries headers that keep agent text inert in a browser
(a strict Content-Security-Policy, ``nosniff``, no framing, no referrer, no caching).
"""

from __future__ import annotations

import hmac
import ipaddress
import secrets
from collections.abc import Mapping
from http.cookies import CookieError, SimpleCookie
from typing import Final
from urllib.parse import parse_qsl, urlencode

from starlette.datastructures import Headers, MutableHeaders
from starlette.responses import HTMLResponse, JSONResponse, RedirectResponse, Response
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from baton.security.display import escape_html

__all__ = [
    "COOKIE_NAME",
    "SECURITY_HEADERS",
    "TokenGate",
    "cookie_name",
    "generate_token",
    "is_loopback_host",
    "tokens_match",
]

COOKIE_NAME: Final = "baton_token"
"""Prefix of the cookie's name; the server's port is appended (see :func:`cookie_name`)."""
PUBLIC_PREFIX: Final = "/assets/"
"""Static script and stylesheet: no data, and a page must load them before it can auth."""

SECURITY_HEADERS: Final[Mapping[str, str]] = {
    # Only our own script and stylesheet may run or style; nothing inline, no
    # plugins, no forms posting elsewhere, no framing. Even if escaping ever
    # failed, injected markup could not execute.
    "content-security-policy": (
        "default-src 'none'; script-src 'self'; style-src 'self'; connect-src 'self'; "
        "img-src 'self'; base-uri 'none'; form-action 'none'; frame-ancestors 'none'"
    ),
    "x-content-type-options": "nosniff",
    "x-frame-options": "DENY",
    "referrer-policy": "no-referrer",
    "cache-control": "no-store",
    "cross-origin-opener-policy": "same-origin",
    "cross-origin-resource-policy": "same-origin",
}
_SAFE_METHODS: Final = frozenset({"GET", "HEAD", "OPTIONS"})


def generate_token() -> str:
    """A fresh 256-bit URL-safe token (``baton serve`` makes one per start)."""
    return secrets.token_urlsafe(32)


def tokens_match(given: str | None, token: str) -> bool:
    """Constant-time comparison, so response timing does not leak the token."""
    if given is None:
        return False
    return hmac.compare_digest(given.encode("utf-8"), token.encode("utf-8"))


def _strip_port(host: str) -> str:
    if host.startswith("["):
        end = host.find("]")
        return host[1:end] if end > 0 else ""
    if host.count(":") == 1:
        return host.split(":", 1)[0]
    return host


def is_loopback_host(host: str) -> bool:
    """``localhost`` or a loopback IP (``127.0.0.0/8``, ``::1``), with or without a port."""
    name = _strip_port(host.strip()).lower().rstrip(".")
    if name == "localhost":
        return True
    try:
        return ipaddress.ip_address(name).is_loopback
    except ValueError:
        return False


def _bearer(headers: Headers) -> str | None:
    scheme, _, value = headers.get("authorization", "").partition(" ")
    return value.strip() if scheme.lower() == "bearer" and value.strip() else None


def cookie_name(scope: Scope) -> str:
    """``baton_token_<port>``: browsers scope cookies by host, not port, so two
    servers on one machine would otherwise overwrite each other's login."""
    server = scope.get("server")
    port = server[1] if server else None
    return f"{COOKIE_NAME}_{port}" if port else COOKIE_NAME


def _cookie(headers: Headers, name: str) -> str | None:
    jar: SimpleCookie = SimpleCookie()
    try:
        jar.load(headers.get("cookie", ""))
    except CookieError:  # a malformed Cookie header is no credential
        return None
    morsel = jar.get(name)
    return morsel.value if morsel is not None else None


def _same_origin(headers: Headers, scheme: str) -> bool:
    """False only when the browser says the request comes from another origin."""
    origin = headers.get("origin")
    if origin is not None and origin != "null":
        return origin == f"{scheme}://{headers.get('host', '')}"
    site = headers.get("sec-fetch-site")
    return site in (None, "same-origin", "none")


def _deny(path: str, status: int, message: str) -> Response:
    headers = {"www-authenticate": 'Bearer realm="baton"'} if status == 401 else None
    if path.startswith("/api/") or path == "/api":
        return JSONResponse(
            {"error": "Unauthorized" if status == 401 else "Forbidden", "message": message},
            status_code=status,
            headers=headers,
        )
    # Fixed text only: nothing from the request is echoed into this page.
    body = (
        '<!doctype html><html lang="en"><head><meta charset="utf-8">'
        f"<title>baton: {status}</title></head>"
        f"<body><h1>baton</h1><p>{escape_html(message)}</p></body></html>"
    )
    return HTMLResponse(body, status_code=status, headers=headers)


class TokenGate:
    """The ASGI middleware enforcing the rules in the module docstring."""

    def __init__(self, app: ASGIApp, *, token: str | None) -> None:
        if token is not None and not token:
            raise ValueError("an empty token would let everyone in; pass None for no token")
        self._app = app
        self._token = token

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self._app(scope, receive, send)
            return

        async def send_with_headers(message: Message) -> None:
            if message["type"] == "http.response.start":
                headers = MutableHeaders(scope=message)
                for name, value in SECURITY_HEADERS.items():
                    if name not in headers:
                        headers[name] = value
            await send(message)

        response = self._check(scope)
        if response is not None:
            await response(scope, receive, send_with_headers)
            return
        await self._app(scope, receive, send_with_headers)

    def _check(self, scope: Scope) -> Response | None:
        """``None`` to let the request through, else the refusal (or the cookie redirect)."""
        path: str = scope["path"]
        headers = Headers(scope=scope)
        method: str = scope["method"]
        if path.startswith(PUBLIC_PREFIX) and method in _SAFE_METHODS:
            return None
        token = self._token
        if token is None:
            if not is_loopback_host(headers.get("host", "")):
                return _deny(
                    path, 403, "Without a token, baton only answers to a loopback host name."
                )
            return None
        if tokens_match(_bearer(headers), token):
            return None
        if tokens_match(_cookie(headers, cookie_name(scope)), token):
            if method not in _SAFE_METHODS and not _same_origin(headers, scope["scheme"]):
                return _deny(path, 403, "Cross-origin requests are refused.")
            return None
        query = parse_qsl(scope.get("query_string", b"").decode("latin-1"), keep_blank_values=True)
        given = next((value for name, value in query if name == "token"), None)
        if given is not None and method == "GET" and not path.startswith("/api/"):
            if not tokens_match(given, token):
                return _deny(path, 401, "That token is not valid for this baton server.")
            rest = urlencode([(name, value) for name, value in query if name != "token"])
            # One leading slash: "//host" would be a redirect to another site.
            target = "/" + path.lstrip("/") + (f"?{rest}" if rest else "")
            redirect = RedirectResponse(target, status_code=303)
            redirect.set_cookie(
                cookie_name(scope), token, httponly=True, samesite="strict", secure=False, path="/"
            )
            return redirect
        return _deny(
            path,
            401,
            "A token is needed: open the URL that `baton serve` printed, "
            "or send Authorization: Bearer <token>.",
        )
