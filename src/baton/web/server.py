"""Serving the dashboard: for ``baton serve`` on its own, and beside ``baton up``.

:class:`DashboardServer` builds the app over an open store and ledger, mints
the first one-time login code, and runs uvicorn as a task of the caller's event
loop (so ``baton up --serve`` serves from the same process as the team: events
reach open pages as they commit). Its :attr:`login_url` puts the code in the
fragment of this server's login host URL (``baton-<project>-<random>.localhost``,
a new random part per start; see :mod:`baton.web.sessions`).
"""

from __future__ import annotations

import asyncio
import contextlib
import ipaddress
import socket
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from starlette.applications import Starlette

from baton.app.facade.requests import Ledger
from baton.app.facade.store import Store
from baton.errors import ConfigError
from baton.web.app import create_app
from baton.web.auth import generate_token, login_host_name
from baton.web.sessions import SessionAuth

__all__ = ["DashboardServer", "is_loopback_bind"]


def is_loopback_bind(host: str) -> bool:
    """Whether binding ``host`` keeps the server reachable from this machine only."""
    if host.strip().lower() == "localhost":
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False


def _quiet_server(uvicorn: Any) -> Any:
    """``uvicorn.Server`` that leaves signals to its caller (``baton serve``, ``baton up``).

    uvicorn swaps SIGINT/SIGTERM for its own handlers while it serves (``capture_signals``
    since 0.29, ``install_signal_handlers`` before): Ctrl-C would stop the dashboard first
    and reach baton only once uvicorn re-raised it after its graceful shutdown.
    """

    class QuietServer(uvicorn.Server):  # type: ignore[misc]
        @contextlib.contextmanager
        def capture_signals(self) -> Iterator[None]:
            yield

        def install_signal_handlers(self) -> None:
            return None

    return QuietServer


def _is_wildcard(host: str) -> bool:
    try:
        return ipaddress.ip_address(host.strip("[]")).is_unspecified
    except ValueError:
        return False


@dataclass
class DashboardServer:
    """One dashboard server over ``store``/``ledger``; ``await start()``, then ``stop()``."""

    store: Store
    ledger: Ledger
    host: str = "127.0.0.1"
    port: int = 8765
    project_dir: Path | None = None
    no_token: bool = False
    poll_interval: float = 1.0
    token: str | None = None
    app: Starlette | None = None
    _server: Any = None
    _task: asyncio.Task[None] | None = None
    _socket: socket.socket | None = field(default=None, repr=False)

    def __post_init__(self) -> None:
        if not self.no_token and self.token is None:
            self.token = generate_token()
        bind = self.host.strip("[]")
        loopback = is_loopback_bind(bind)
        extra = frozenset() if loopback or _is_wildcard(bind) else frozenset({bind.lower()})
        self.login_host = login_host_name(self.project_dir or Path.cwd())
        self.app = create_app(
            self.store,
            self.ledger,
            token=None if self.no_token else self.token,
            project_dir=self.project_dir,
            login_host=self.login_host,
            extra_hosts=extra,
            any_ip_host=_is_wildcard(bind),
            poll_interval=self.poll_interval,
        )

    @property
    def base_url(self) -> str:
        """Where a browser on this machine should go (the project's own host name)."""
        if self.no_token or not is_loopback_bind(self.host.strip("[]")):
            shown = f"[{self.host.strip('[]')}]" if ":" in self.host else self.host
            return f"http://{shown}:{self.port}"
        return f"http://{self.login_host}:{self.port}"

    async def login_code(self) -> str:
        """A fresh one-time login code (valid once, for ten minutes)."""
        return await SessionAuth(self.store).issue_code()

    async def login_url(self) -> str:
        code = await self.login_code()
        return f"{self.base_url}/login#code={code}"

    async def start(self) -> None:
        """Bind (errors surface here, before anything is printed) and serve in a task."""
        import uvicorn

        family = socket.AF_INET6 if ":" in self.host.strip("[]") else socket.AF_INET
        sock = socket.socket(family, socket.SOCK_STREAM)
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            sock.bind((self.host.strip("[]"), self.port))
        except OSError as exc:
            sock.close()
            raise ConfigError(
                f"cannot serve the dashboard on {self.host}:{self.port}: {exc.strerror or exc} "
                "(another server there? pick another --port)"
            ) from exc
        sock.listen(128)
        sock.setblocking(False)
        self._socket = sock
        self.port = sock.getsockname()[1]
        assert self.app is not None
        config = uvicorn.Config(
            self.app,
            log_level="warning",
            proxy_headers=False,
            server_header=False,
            lifespan="off",
            # An SSE stream never ends on its own; don't wait on it forever at Ctrl-C.
            timeout_graceful_shutdown=3,
        )
        self._server = _quiet_server(uvicorn)(config)
        self._task = asyncio.create_task(self._server.serve(sockets=[sock]), name="baton-web")

    async def wait(self) -> None:
        """Until the server stops (``stop()`` or a failure)."""
        if self._task is not None:
            await asyncio.shield(self._task)

    async def stop(self) -> None:
        if self._server is not None:
            self._server.should_exit = True
        if self._task is not None:
            await asyncio.wait({self._task}, timeout=10)  # its failure is not stop()'s
        assert self.app is not None
        await self.app.state.baton_close()
        if self._socket is not None:
            self._socket.close()
