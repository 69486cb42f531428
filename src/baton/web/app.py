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

from pathlib import Path

from starlette.applications import Starlette
from starlette.exceptions import HTTPException
from starlette.middleware import Middleware
from starlette.requests import Request
from starlette.responses import JSONResponse, PlainTextResponse, Response

from baton.app.facade.fcop import CoordinationError
from baton.app.facade.requests import Ledger
from baton.app.facade.store import Store
from baton.errors import BatonError, ConfigError
from baton.web.actions import ActionRefused, RunLauncher
from baton.web.answers import status_for
from baton.web.api import ApiError, api_routes
from baton.web.auth import AuthConfig, Gate
from baton.web.board import BoardSource, open_board
from baton.web.context import WebContext
from baton.web.dashboard import dashboard_routes
from baton.web.grants import grant_routes
from baton.web.live import LiveHub
from baton.web.login import login_routes
from baton.web.sessions import SessionAuth

__all__ = ["create_app"]


def _error(request: Request, status: int, error: str, message: str) -> Response:
    if request.url.path.startswith("/api/"):
        return JSONResponse({"error": error, "message": message}, status_code=status)
    return PlainTextResponse(f"{error}: {message}", status_code=status)


async def _baton_error(request: Request, exc: Exception) -> Response:
    assert isinstance(exc, BatonError)
    if isinstance(exc, ActionRefused):
        status = 409
    elif isinstance(exc, ConfigError | CoordinationError):
        status = 422  # a bad role, agent, subject or prompt: the CLI's usage errors
    else:
        status = status_for(exc)
    return _error(request, status, type(exc).__name__, str(exc))


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
    project_dir: Path | None = None,
    login_host: str | None = None,
    extra_hosts: frozenset[str] = frozenset(),
    any_ip_host: bool = False,
    start_runs: bool = True,
    poll_interval: float = 1.0,
    keepalive: float = 15.0,
) -> Starlette:
    """The dashboard and JSON API over ``store`` and ``ledger``.

    ``token`` is the API bearer token; browsers log in with one-time codes
    (:mod:`baton.web.sessions`). ``token=None`` disables authentication but then
    only loopback ``Host`` names are served (see :mod:`baton.web.auth`);
    ``baton serve`` allows that only on a loopback bind. ``project_dir`` (a
    directory with a ``baton.toml``) enables the team board, task creation and,
    with ``start_runs``, one-off runs. ``login_host`` is the project's
    ``*.localhost`` name. ``poll_interval`` and ``keepalive`` tune the streams.
    Call ``await app.state.baton_close()`` after the server stopped.
    """
    if poll_interval <= 0 or keepalive <= 0:
        raise ValueError("poll_interval and keepalive must be positive")
    auth = AuthConfig(
        api_token=token,
        sessions=SessionAuth(store) if token is not None else None,
        login_host=login_host,
        extra_hosts=extra_hosts,
        any_ip_host=any_ip_host,
    )
    board: BoardSource | None = None
    if project_dir is not None:
        try:
            board = open_board(project_dir, store)
        except BatonError:
            board = None  # no [team] / no FCoP workspace: the rest still works
    launcher = RunLauncher(project_dir, store) if project_dir is not None and start_runs else None
    hub = LiveHub(store=store, ledger=ledger, board=board, poll_interval=poll_interval)
    ctx = WebContext(
        store=store,
        ledger=ledger,
        auth=auth,
        hub=hub,
        project_dir=project_dir,
        board=board,
        launcher=launcher,
        poll_interval=poll_interval,
        keepalive=keepalive,
    )
    app = Starlette(
        routes=[*api_routes(ctx), *grant_routes(ctx), *login_routes(ctx), *dashboard_routes(ctx)],
        middleware=[Middleware(Gate, config=auth)],
        exception_handlers={
            BatonError: _baton_error,
            ApiError: _api_error,
            HTTPException: _http_error,
        },
    )

    async def close() -> None:
        await hub.aclose()
        if launcher is not None:
            await launcher.aclose()

    app.state.baton = ctx
    app.state.baton_close = close
    return app
