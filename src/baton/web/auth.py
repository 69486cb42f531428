"""Who may use the web surface: host names, origins, a bearer token and browser sessions.

The dashboard can answer an agent's permission requests, so reaching it is
reaching the agents' tools. The rules, in one ASGI middleware (:class:`Gate`);
what each rule stops, and what nothing here stops, is the threat model in
``docs/security.md``:

* **Host, always.** The ``Host`` header must name this server: a loopback name
  or address, one of the project's ``baton-<project>-<label>.localhost`` login
  hosts, or the address it was explicitly bound to. Otherwise a page could
  rebind its own DNS name to 127.0.0.1 and drive the API from the user's
  browser. This holds in every mode, ``--no-token`` included.
* **Origin on every write, always.** A state-changing request whose ``Origin``
  (or, without one, ``Sec-Fetch-Site``) says it comes from another origin is a
  403, whatever credential it carries; JSON endpoints also take only
  ``application/json``, which a cross-site form cannot send without a CORS
  preflight that is never granted. Both only stop a *browser*: a local client
  forges any header, which is why the credential below has a half it cannot get.
* **A credential**, unless the server runs with ``--no-token`` (loopback only):
  ``Authorization: Bearer <api token>`` for scripts, or a browser session
  (:mod:`baton.web.sessions`): the cookie half the browser sends by itself and
  the proof half the page's script sends (``X-Baton-Proof``; for the two event
  streams, which ``EventSource`` opens without headers, ``?proof=``).
  ``/login``, ``/api/login``, ``/favicon.ico`` and the static assets need none.
  A page navigation carries no proof, so it is answered with the *page shell*
  (:func:`baton.web.pages.shell`): no data, only the script that fetches the same
  URL again with the proof (or goes to ``/login``). An API client without a
  credential gets a 401.
* **Revocation reaches open streams.** A stream opened with a session asks every
  :data:`~baton.web.sessions.WATCH_S` whether the session still holds, and ends
  when it does not (``baton serve --logout-all``).

Every response also carries headers that keep agent text inert in a browser
(a strict Content-Security-Policy, ``nosniff``, no framing, no referrer, no caching).
"""

from __future__ import annotations

import base64
import hmac
import ipaddress
import re
import secrets
from collections.abc import Mapping
from dataclasses import dataclass, field
from http.cookies import CookieError, SimpleCookie
from pathlib import Path
from typing import Final
from urllib.parse import parse_qs

from starlette.datastructures import Headers, MutableHeaders
from starlette.responses import HTMLResponse, JSONResponse, RedirectResponse, Response
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from baton.security.display import escape_html
from baton.security.loopback import is_loopback_name
from baton.web.pages import shell
from baton.web.revocation import Check, watched
from baton.web.sessions import SessionAuth

__all__ = [
    "COOKIE_PREFIX",
    "PROOF_HEADER",
    "SECURITY_HEADERS",
    "AuthConfig",
    "Gate",
    "cookie_name",
    "generate_token",
    "is_loopback_host",
    "login_host_name",
    "project_label",
    "request_origin",
    "server_port",
    "session_cookie",
    "tokens_match",
]

COOKIE_PREFIX: Final = "baton_session"
"""Prefix of the session cookie's name; the server's port is appended."""
PROOF_HEADER: Final = "x-baton-proof"
"""The header carrying a session's proof half (the page's script sets it)."""
PUBLIC_PREFIX: Final = "/assets/"
PUBLIC_PATHS: Final = frozenset({"/login", "/api/login", "/favicon.ico"})
LABEL_LEN: Final = 13
"""Random characters in a login host name: 64 bits in base32 (``[a-z2-7]``)."""
_LABEL = re.compile(rf"[a-z2-7]{{{LABEL_LEN}}}")

SECURITY_HEADERS: Final[Mapping[str, str]] = {
    # Only our own script and stylesheet may run or style; nothing inline, no
    # plugins, no forms posting elsewhere, no framing. Even if escaping ever
    # failed, injected markup could not execute.
    "content-security-policy": (
        "default-src 'none'; script-src 'self'; style-src 'self'; connect-src 'self'; "
        "img-src 'self'; base-uri 'none'; form-action 'self'; frame-ancestors 'none'"
    ),
    "x-content-type-options": "nosniff",
    "x-frame-options": "DENY",
    "referrer-policy": "no-referrer",
    "cache-control": "no-store",
    "cross-origin-opener-policy": "same-origin",
    "cross-origin-resource-policy": "same-origin",
}
_SAFE_METHODS: Final = frozenset({"GET", "HEAD", "OPTIONS"})
_SLUG = re.compile(r"[^a-z0-9]+")


def generate_token() -> str:
    """A fresh 256-bit URL-safe token (the API token; ``baton serve`` makes one per start)."""
    return secrets.token_urlsafe(32)


def tokens_match(given: str | None, token: str) -> bool:
    """Constant-time comparison, so response timing does not leak the token."""
    if given is None:
        return False
    return hmac.compare_digest(given.encode("utf-8"), token.encode("utf-8"))


def project_label(project_dir: Path) -> str:
    """``baton-<name>``: the readable, *public* part of the project's login host names."""
    name = _SLUG.sub("-", project_dir.resolve().name.lower()).strip("-")[:30].strip("-")
    return f"baton-{name or 'project'}"


def login_host_name(project_dir: Path) -> str:
    """``baton-<name>-<random>.localhost``: a fresh login host name (one per server start).

    Browsers resolve every ``*.localhost`` name to loopback without DNS, and keep
    host-only cookies per host name, so a session cookie set here is never sent
    to another server on ``127.0.0.1``/``localhost``, nor to a server on another
    port of this name unless the browser is sent there. The random part (64 bits)
    is what keeps a local server from sending it there: it is derived from
    nothing another process knows (not the project path), only printed in the
    login URL and kept in the project's private state directory.
    """
    label = base64.b32encode(secrets.token_bytes(8)).decode("ascii").lower().rstrip("=")
    return f"{project_label(project_dir)}-{label[:LABEL_LEN]}.localhost"


def _split_host(host: str) -> tuple[str, str | None]:
    """``name:port`` → (lower-case name without a trailing dot, port or None)."""
    host = host.strip()
    if host.startswith("["):
        end = host.find("]")
        if end < 0:
            return "", None
        rest = host[end + 1 :]
        return host[1:end].lower(), rest[1:] if rest.startswith(":") else None
    if host.count(":") == 1:
        name, port = host.split(":", 1)
        return name.lower().rstrip("."), port
    return host.lower().rstrip("."), None


def is_loopback_host(host: str) -> bool:
    """``localhost`` or a loopback IP (``127.0.0.0/8``, ``::1``), with or without a port."""
    name, _ = _split_host(host)
    return is_loopback_name(name)


def cookie_name(port: int | None) -> str:
    """``baton_session_<port>``: two servers on one host name keep their own login."""
    return f"{COOKIE_PREFIX}_{port}" if port else COOKIE_PREFIX


def server_port(scope: Scope) -> int | None:
    """The port this server listens on (names the cookie; not the Host header's claim)."""
    server = scope.get("server")
    return int(server[1]) if server and server[1] else None


def request_origin(scope: Scope) -> str:
    """``scheme://host[:port]`` as the browser addressed this server."""
    return f"{scope['scheme']}://{Headers(scope=scope).get('host', '')}"


def session_cookie(headers: Headers, name: str) -> str | None:
    """The named cookie's value, or None (a malformed Cookie header is no credential)."""
    jar: SimpleCookie = SimpleCookie()
    try:
        jar.load(headers.get("cookie", ""))
    except CookieError:
        return None
    morsel = jar.get(name)
    return morsel.value if morsel is not None else None


def _bearer(headers: Headers) -> str | None:
    scheme, _, value = headers.get("authorization", "").partition(" ")
    return value.strip() if scheme.lower() == "bearer" and value.strip() else None


def is_stream(path: str) -> bool:
    """The two event streams: opened by ``EventSource`` (no headers), kept open for long."""
    return path == "/api/live" or (path.startswith("/api/runs/") and path.endswith("/stream"))


def _proof(scope: Scope, headers: Headers) -> str | None:
    """The session's proof half: the header, or ``?proof=`` on an event stream."""
    given = headers.get(PROOF_HEADER)
    if given:
        return given
    if scope["method"] == "GET" and is_stream(scope["path"]):
        values = parse_qs(scope.get("query_string", b"").decode("latin-1")).get("proof")
        return values[0] if values else None
    return None


def _is_page(path: str, method: str) -> bool:
    """A navigation a browser makes by itself (no proof): answered with the page shell."""
    return method == "GET" and not path.startswith(("/api/", "/fragments/", PUBLIC_PREFIX))


def same_origin(headers: Headers, scheme: str) -> bool:
    """False when the browser says the request comes from another origin."""
    origin = headers.get("origin")
    if origin is not None:
        return origin == f"{scheme}://{headers.get('host', '')}"
    site = headers.get("sec-fetch-site")
    return site in (None, "same-origin", "none")


@dataclass(frozen=True, slots=True)
class AuthConfig:
    """How this server authenticates (built by ``create_app`` from its arguments)."""

    api_token: str | None
    """``Authorization: Bearer`` for scripts; None only with ``--no-token``."""
    sessions: SessionAuth | None
    """Browser sessions; None only with ``--no-token`` (then nothing is required)."""
    login_host: str | None = None
    """This server's ``baton-<project>-<random>.localhost`` name: the only host a browser
    logs in on. Earlier servers' names of the project (same prefix, another random
    part) are still served, so a page opened before a restart keeps working; its
    session stays bound to the origin it was opened on."""
    extra_hosts: frozenset[str] = field(default_factory=frozenset)
    """Host names besides loopback ones and ``login_host`` (an explicit ``--host``)."""
    any_ip_host: bool = False
    """Bound to a wildcard address: any IP literal is this server (never a DNS name)."""

    def _project_host(self, name: str) -> bool:
        """A login host name of this project from an earlier start (same prefix)."""
        if self.login_host is None or len(self.login_host) <= LABEL_LEN + len(".localhost"):
            return False
        prefix = self.login_host[: -len(".localhost") - LABEL_LEN]
        if not name.startswith(prefix) or not name.endswith(".localhost"):
            return False
        return _LABEL.fullmatch(name[len(prefix) : -len(".localhost")]) is not None

    def host_allowed(self, host: str) -> bool:
        name, _ = _split_host(host)
        if not name:
            return False
        if is_loopback_host(host) or name == self.login_host or name in self.extra_hosts:
            return True
        if self._project_host(name):
            return True
        if self.any_ip_host:
            try:
                ipaddress.ip_address(name)
            except ValueError:
                return False
            return True
        return False

    def login_allowed(self, host: str) -> bool:
        """A session cookie is only set on a host name no other local server shares."""
        if self.login_host is None:
            return True
        name, _ = _split_host(host)
        return (
            name == self.login_host
            or name in self.extra_hosts
            or (self.any_ip_host and not is_loopback_host(host))
        )


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


class Gate:
    """The ASGI middleware enforcing the rules in the module docstring."""

    def __init__(self, app: ASGIApp, *, config: AuthConfig) -> None:
        if config.api_token is not None and not config.api_token:
            raise ValueError("an empty token would let everyone in; pass None for no token")
        if (config.api_token is None) != (config.sessions is None):
            raise ValueError("a token and sessions go together (both None only with --no-token)")
        self._app = app
        self._config = config

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

        verdict = await self._check(scope)
        if isinstance(verdict, Response):
            await verdict(scope, receive, send_with_headers)
        elif verdict is not None and is_stream(scope["path"]):
            await watched(self._app, verdict, scope, receive, send_with_headers)
        else:
            await self._app(scope, receive, send_with_headers)

    async def _check(self, scope: Scope) -> Response | Check | None:
        """``None`` (or, for a session, how to re-check it) to let the request through;
        else the refusal, or the page shell for a navigation without the proof."""
        config = self._config
        path: str = scope["path"]
        method: str = scope["method"]
        headers = Headers(scope=scope)
        if not config.host_allowed(headers.get("host", "")):
            return _deny(path, 403, "This host name is not this baton server.")
        if method not in _SAFE_METHODS and not same_origin(headers, scope["scheme"]):
            return _deny(path, 403, "Cross-origin requests are refused.")
        sessions = config.sessions
        if sessions is None:
            return None  # --no-token: loopback host names only (checked above)
        if (path.startswith(PUBLIC_PREFIX) and method in _SAFE_METHODS) or path in PUBLIC_PATHS:
            return None
        assert config.api_token is not None
        if tokens_match(_bearer(headers), config.api_token):
            return None
        cookie = session_cookie(headers, cookie_name(server_port(scope)))
        proof = _proof(scope, headers)
        origin = request_origin(scope)
        if proof is None and _is_page(path, method):
            if cookie is None:
                return RedirectResponse("/login", status_code=303)
            # No data without both halves: the shell's script asks again with the proof.
            return HTMLResponse(shell())
        if await sessions.check(cookie, proof, origin=origin):
            return lambda: sessions.check(cookie, proof, origin=origin)
        return _deny(
            path,
            401,
            "Log in first: open the login URL that `baton serve` printed "
            "(or send Authorization: Bearer <api token>).",
        )
