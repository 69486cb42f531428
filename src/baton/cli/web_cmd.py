"""``baton serve``: the web dashboard and JSON API over the project's store.

Safe by default: it binds 127.0.0.1 and requires a random token, printed once
as a URL that logs the browser in (see :mod:`baton.web.auth`). ``--no-token`` is
refused unless the bind address is loopback, because without a token anyone who
can reach the port could approve an agent's shell commands. The server process
opens the store like any other baton process (WAL, its own writer), so it can run
beside ``baton run`` and the daemon; answers given here wake them through the
ledger's doorbell.
"""

from __future__ import annotations

import asyncio
import ipaddress
from pathlib import Path
from typing import Annotated

import typer

__all__ = ["app", "is_loopback_bind", "serve"]

app = typer.Typer(help="The web dashboard.", no_args_is_help=True)


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


async def _serve(host: str, port: int, token: str | None) -> None:
    import uvicorn

    from baton.app import Baton
    from baton.web.app import create_app

    # Opening the root expires the requests of runs whose process died first, so the
    # dashboard never offers to answer a request nobody can deliver.
    async with Baton.open(Path.cwd()) as baton:
        config = uvicorn.Config(
            create_app(baton.store, baton.ledger, token=token),
            host=host.strip("[]"),
            port=port,
            log_level="warning",
            proxy_headers=False,
            server_header=False,
            lifespan="off",
            # An SSE stream never ends on its own; don't wait on it forever at Ctrl-C.
            timeout_graceful_shutdown=3,
        )
        url = _url(host, port)
        if token is None:
            typer.echo(f"baton dashboard: {url} (no token: loopback only)")
        else:
            typer.echo(f"baton dashboard: {url}?token={token}")
            typer.echo(f"API: Authorization: Bearer {token}")
        await uvicorn.Server(config).serve()


@app.command()
def serve(
    host: Annotated[
        str, typer.Option("--host", help="Address to bind (loopback by default).")
    ] = "127.0.0.1",
    port: Annotated[int, typer.Option("--port", help="TCP port.", min=0, max=65535)] = 8765,
    no_token: Annotated[
        bool,
        typer.Option("--no-token", help="No authentication (only with a loopback --host)."),
    ] = False,
) -> None:
    """Serve the dashboard: pending requests to answer, and live run events."""
    from baton.web.auth import generate_token

    loopback = is_loopback_bind(host)
    if no_token and not loopback:
        typer.echo(
            f"--no-token is only allowed on a loopback address, not {host!r}: "
            "anyone who reaches the port could approve agent actions",
            err=True,
        )
        raise typer.Exit(2)
    if not loopback:
        typer.echo(
            f"warning: serving on {host} over plain HTTP; the token travels unencrypted",
            err=True,
        )
    asyncio.run(_serve(host, port, None if no_token else generate_token()))
