"""The app factory: ``create_app(store, ledger, token=...)`` returns a Starlette app.

Nothing here is global: the store, the ledger and the token are arguments, so a
test builds an app over a temporary store and drives it through
``httpx.ASGITransport`` (see ``tests/web``), and ``baton serve`` builds one over
the project's store. The app does not own the store or the ledger (it never
closes them): whoever opened them closes them after the server stops.

Errors are mapped once, here: a ledger refusal becomes its status from
:func:`baton.web.answers.status_for` (404 unknown, 409 not pending or
conflicting, 422 invalid/forged/stale, 503 store failure), always as
``{"error": "<Type>", "message": "..."}``. Messages may quote agent or client
text; JSON carries it safely and the dashboard shows it with ``textContent``.
"""

from __future__ import annotations

from starlette.applications import Starlette
from starlette.exceptions import HTTPException
from starlette.middleware import Middleware
from starlette.requests import Request
from starlette.responses import JSONResponse, PlainTextResponse, Response

from baton.errors import BatonError
from baton.requests.ledger import Ledger
from baton.store.store import Store
from baton.web.answers import status_for
from baton.web.api import ApiError, api_routes
from baton.web.auth import TokenGate
from baton.web.context import WebContext
from baton.web.dashboard import dashboard_routes

__all__ = ["create_app"]


def _error(request: Request, status: int, error: str, message: str) -> Response:
    if request.url.path.startswith("/api/"):
        return JSONResponse({"error": error, "message": message}, status_code=status)
    return PlainTextResponse(f"{error}: {message}", status_code=status)


async def _baton_error(request: Request, exc: Exception) -> Response:
    assert isinstance(exc, BatonError)
    return _error(request, status_for(exc), type(exc).__name__, str(exc))


async def _api_error(request: Request, exc: Exception) -> Response:
    assert isinstance(exc, ApiError)
    return _error(request, exc.status, exc.error, str(exc))


async def _http_error(request: Request, exc: Exception) -> Response:
    assert isinstance(exc, HTTPException)
    return _error(request, exc.status_code, "HTTPError", exc.detail)


def create_app(
    store: Store,
    ledger: Ledger,
    *,
    token: str | None,
    poll_interval: float = 1.0,
    keepalive: float = 15.0,
) -> Starlette:
    """The dashboard and JSON API over ``store`` and ``ledger``.

    ``token=None`` disables authentication but then only loopback ``Host``
    names are served (see :mod:`baton.web.auth`); ``baton serve`` allows that
    only on a loopback bind. ``poll_interval`` and ``keepalive`` tune the SSE
    stream (see :class:`~baton.web.context.WebContext`).
    """
    if poll_interval <= 0 or keepalive <= 0:
        raise ValueError("poll_interval and keepalive must be positive")
    ctx = WebContext(store=store, ledger=ledger, poll_interval=poll_interval, keepalive=keepalive)
    return Starlette(
        routes=[*api_routes(ctx), *dashboard_routes(ctx)],
        middleware=[Middleware(TokenGate, token=token)],
        exception_handlers={
            BatonError: _baton_error,
            ApiError: _api_error,
            HTTPException: _http_error,
        },
    )
