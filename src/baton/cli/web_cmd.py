"""``baton serve``: the web dashboard and JSON API over the project's store.

Safe by default: it binds 127.0.0.1; browsers log in with a one-time code
printed here (``/login#code=…`` on the project's own ``*.localhost`` host name,
valid once, for ten minutes) and get a stored session that is not the API
token (see :mod:`baton.web.sessions`); scripts use ``Authorization: Bearer``
with the API token printed beside it. ``--no-token`` is refused unless the bind
address is loopback. ``--login-code`` prints a fresh code for a running server;
``--logout-all`` ends every browser session. The server opens the store like
any other baton process, so it runs beside ``baton run`` and ``baton up``. While it
runs, its address (never a code or token) is in the project's services
(:mod:`baton.cli.services`), so a headless ``baton run`` can say where to answer;
SIGINT, SIGTERM and SIGHUP stop it cleanly, with ``128 + N`` (:mod:`baton.cli.signals`).
"""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Annotated

import typer

from baton.cli.project import ProjectOption, project_config
from baton.cli.services import running_dashboard
from baton.cli.shared import EXIT_OK, EXIT_USAGE, command_app, say_error
from baton.cli.signals import Interrupts
from baton.web.server import DashboardServer, is_loopback_bind

__all__ = ["app", "is_loopback_bind", "running_dashboard", "serve"]

app = command_app(help="The web dashboard.", no_args_is_help=True)


async def _serve(project: Path | None, host: str, port: int, no_token: bool) -> int:
    from baton.app import Baton
    from baton.cli.services import announce

    config = project_config(project)
    # Opening the root expires the requests of runs whose process died first, so the
    # dashboard never offers to answer a request nobody can deliver.
    async with Baton.open(config=config) as baton:
        server = DashboardServer(
            baton.store,
            baton.ledger,
            host=host,
            port=port,
            project_dir=config.project_dir,
            no_token=no_token,
        )
        try:
            await server.start()
            stopped = asyncio.Event()
            with (
                announce(config.state_dir, "serve", url=f"{server.base_url}/"),
                Interrupts(lambda _: stopped.set()) as signals,
            ):
                await _announce_urls(server, no_token)
                await _until_stopped(server, stopped)
            return signals.exit_code or EXIT_OK
        finally:
            await server.stop()


async def _until_stopped(server: DashboardServer, stopped: asyncio.Event) -> None:
    waiter = asyncio.create_task(server.wait())
    stopper = asyncio.create_task(stopped.wait())
    await asyncio.wait({waiter, stopper}, return_when=asyncio.FIRST_COMPLETED)
    stopper.cancel()


async def _announce_urls(server: DashboardServer, no_token: bool) -> None:
    if no_token:
        typer.echo(f"baton dashboard: {server.base_url}/ (no login: loopback only)")
        return
    typer.echo(f"baton dashboard: {await server.login_url()}")
    typer.echo(
        "  (a one-time login code, valid for ten minutes; "
        "`baton serve --login-code` prints another)"
    )
    typer.echo(f"API: Authorization: Bearer {server.token}")


async def _admin(project: Path | None, *, logout_all: bool, login_code: bool) -> None:
    from baton.app import Baton
    from baton.app.facade.store import revoke_all
    from baton.web.sessions import SessionAuth

    async with Baton.open(config=project_config(project), recover=False) as baton:
        if logout_all:
            ended = await revoke_all(baton.store)
            typer.echo(f"ended {ended} browser session(s); open pages must log in again")
        if login_code:
            code = await SessionAuth(baton.store).issue_code()
            typer.echo(f"login code: {code} (valid once, for ten minutes: open /login)")


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
    logout_all: Annotated[
        bool, typer.Option("--logout-all", help="End every browser session, then exit.")
    ] = False,
    login_code: Annotated[
        bool,
        typer.Option("--login-code", help="Print a fresh one-time login code, then exit."),
    ] = False,
    project: ProjectOption = None,
) -> None:
    """Serve the dashboard: the team board, live runs, and the inbox to answer."""
    if logout_all or login_code:
        asyncio.run(_admin(project, logout_all=logout_all, login_code=login_code))
        return
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
            f"baton: warning: serving on {host} over plain HTTP; codes and cookies travel unencrypted",
            err=True,
        )
    raise typer.Exit(asyncio.run(_serve(project, host, port, no_token)))
