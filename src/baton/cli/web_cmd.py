"""``baton serve``: the web dashboard and JSON API over the project's store.

Safe by default: it binds 127.0.0.1 and requires a random token, printed once
as a URL that logs the browser in (see :mod:`baton.web.auth`). ``--no-token`` is
refused unless the bind address is loopback, because without a token anyone who
can reach the port could approve an agent's shell commands. The port is bound
before anything is printed, so a port in use is one error line, not a URL that
does not work. The server process opens the store like any other baton process
(WAL, its own writer), so it can run beside ``baton run`` and the daemon; answers
given here wake them through the ledger's doorbell. While it runs, its URL (never
the token) is in the project's services (:mod:`baton.cli.services`), so a headless
``baton run`` can say where to answer. SIGINT, SIGTERM and SIGHUP stop it cleanly
(:mod:`baton.cli.signals`).
"""

from __future__ import annotations

import asyncio
import contextlib
import errno
import ipaddress
import socket
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer

from baton.cli.project import ProjectOption, project_config
from baton.cli.shared import EXIT_OK, EXIT_USAGE, CommandError, command_app, say_error
from baton.cli.signals import Interrupts

if TYPE_CHECKING:
    import uvicorn

__all__ = ["app", "bind", "is_loopback_bind", "running_dashboard", "serve"]

app = command_app(help="The web dashboard.", no_args_is_help=True)


def is_loopback_bind(host: str) -> bool:
    """Whether binding ``host`` keeps the server reachable from this machine only."""
    if host.strip().lower() == "localhost":
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False


def _url(host: str, port: int) -> str:
    shown = f"[{host.strip('[]')}]" if ":" in host else host
    return f"http://{shown}:{port}/"


def running_dashboard(state_dir: Path) -> str | None:
    """The URL of this project's running dashboard (without its token), if one runs."""
    from baton.cli.services import find

    record = find(state_dir, "serve")
    url = record.get("url") if record else None
    return url if isinstance(url, str) else None


def bind(host: str, port: int) -> socket.socket:
    """The listening socket, or one error line saying why it cannot be had."""
    address = host.strip("[]")
    family = socket.AF_INET6 if ":" in address else socket.AF_INET
    sock = socket.socket(family, socket.SOCK_STREAM)
    try:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind((address, port))
        sock.listen(128)
    except OSError as exc:
        sock.close()
        if exc.errno == errno.EADDRINUSE:
            raise CommandError(
                f"port {port} on {host} is already in use (another `baton serve`?)",
                hint="pass --port N, or --port 0 for any free port",
            ) from None
        raise CommandError(f"cannot listen on {host}:{port}: {exc.strerror}") from None
    sock.setblocking(False)
    return sock


def _server(config: uvicorn.Config) -> uvicorn.Server:
    """uvicorn's server with baton's signal handling (:mod:`baton.cli.signals`) instead of its own."""
    import uvicorn

    class Server(uvicorn.Server):
        @contextlib.contextmanager
        def capture_signals(self) -> Iterator[None]:
            yield

    return Server(config)


async def _serve(config_dir: Path | None, host: str, port: int, token: str | None) -> int:
    import uvicorn

    from baton.cli.services import announce
    from baton.cli.wiring import open_store
    from baton.requests.ledger import Ledger
    from baton.runner.context import recover_interrupted
    from baton.web.app import create_app

    config = project_config(config_dir)
    sock = bind(host, port)
    store = open_store(config)
    ledger = Ledger(store)
    try:
        # Requests of runs whose process died become expired first, so the
        # dashboard never offers to answer a request nobody can deliver.
        await recover_interrupted(store, ledger)
        bound_port = sock.getsockname()[1]
        uv_config = uvicorn.Config(
            create_app(store, ledger, token=token),
            host=host.strip("[]"),
            port=bound_port,
            log_level="warning",
            proxy_headers=False,
            server_header=False,
            lifespan="off",
            # An SSE stream never ends on its own; don't wait on it forever at Ctrl-C.
            timeout_graceful_shutdown=3,
        )
        server = _server(uv_config)
        url = _url(host, bound_port)

        def stop(_: int) -> None:
            server.should_exit = True

        def force(_: int) -> None:
            server.force_exit = True

        with announce(config.state_dir, "serve", url=url), Interrupts(stop, force) as signals:
            if token is None:
                typer.echo(f"baton dashboard: {url} (no token: loopback only)")
            else:
                typer.echo(f"baton dashboard: {url}?token={token}")
                typer.echo(f"API: Authorization: Bearer {token}")
            typer.echo("Ctrl-C stops it.", err=True)
            await server.serve(sockets=[sock])
        return signals.exit_code or EXIT_OK
    finally:
        sock.close()
        await ledger.aclose()
        store.close()


@app.command()
def serve(
    host: Annotated[
        str, typer.Option("--host", help="Address to bind (loopback by default).")
    ] = "127.0.0.1",
    port: Annotated[
        int, typer.Option("--port", help="TCP port (0: any free one).", min=0, max=65535)
    ] = 8765,
    no_token: Annotated[
        bool,
        typer.Option("--no-token", help="No authentication (only with a loopback --host)."),
    ] = False,
    project: ProjectOption = None,
) -> None:
    """Serve the dashboard: pending requests to answer, and live run events."""
    from baton.web.auth import generate_token

    loopback = is_loopback_bind(host)
    if no_token and not loopback:
        say_error(
            f"--no-token is only allowed on a loopback address, not {host!r}: "
            "anyone who reaches the port could approve agent actions",
            "drop --no-token, or bind 127.0.0.1",
        )
        raise typer.Exit(EXIT_USAGE)
    if not loopback:
        typer.echo(
            f"baton: warning: serving on {host} over plain HTTP; the token travels unencrypted",
            err=True,
        )
    code = asyncio.run(_serve(project, host, port, None if no_token else generate_token()))
    raise typer.Exit(code)
