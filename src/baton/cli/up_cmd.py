"""``baton up``: the team daemon; the doorbell wakes the right role as FCoP tasks arrive."""

from __future__ import annotations

import asyncio
import signal
from pathlib import Path
from typing import Annotated

import typer
from rich.console import Console

from baton.app import Baton
from baton.cli.shared import EXIT_FAILED, err, renderer

__all__ = ["app"]

app = typer.Typer(add_completion=False, pretty_exceptions_enable=False)


@app.command()
def up(
    until_idle: Annotated[
        bool,
        typer.Option(
            "--until-idle", help="Exit once every task is settled or waiting for a human."
        ),
    ] = False,
    json_output: Annotated[bool, typer.Option("--json", help="NDJSON canonical events.")] = False,
    serve: Annotated[
        bool, typer.Option("--serve", help="Also serve the dashboard (prints a login URL).")
    ] = False,
    port: Annotated[
        int, typer.Option("--port", help="Dashboard port (with --serve).", min=0, max=65535)
    ] = 8765,
) -> None:
    """Run the team: the doorbell wakes the right role as FCoP tasks arrive."""
    code = asyncio.run(
        _up(
            Path.cwd(),
            until_idle=until_idle,
            json_output=json_output,
            serve_port=port if serve else None,
        )
    )
    raise typer.Exit(code)


async def _up(
    cwd: Path, *, until_idle: bool, json_output: bool, serve_port: int | None = None
) -> int:
    from baton.coordination.context import open_context
    from baton.coordination.daemon import Daemon

    ctx = open_context(cwd)
    view = renderer(json_output)
    async with (
        Baton.open(cwd) as baton,
        baton.run(kind="up", agent="team", cwd=ctx.project_dir) as run,
    ):
        run.listen(view)
        sink = baton.human_sink(run)
        daemon = Daemon(
            port=ctx.port,
            team=ctx.team,
            factory=baton.role_sessions(run, workspace=ctx.project_dir, fcop_mcp=ctx.team.fcop_mcp),
            state_dir=ctx.state_dir,
            human_sink=sink,
        )
        sink.daemon = daemon
        loop = asyncio.get_running_loop()
        for sig in (signal.SIGINT, signal.SIGTERM):
            loop.add_signal_handler(sig, daemon.stop)
        dashboard = None
        try:
            if serve_port is not None:
                from baton.web.server import DashboardServer

                dashboard = DashboardServer(
                    baton.store, baton.ledger, port=serve_port, project_dir=ctx.project_dir
                )
                await dashboard.start()
                err.print(f"baton dashboard: {await dashboard.login_url()}", soft_wrap=True)
                err.print("[dim]  (a one-time login code, valid for ten minutes)[/]")
            await sink.resume()
            summary = await daemon.run(until_idle=until_idle)
            run.status = "completed"
        finally:
            for sig in (signal.SIGINT, signal.SIGTERM):
                loop.remove_signal_handler(sig)
            if dashboard is not None:
                await dashboard.stop()
            await sink.close()
    view.close()
    out = Console(highlight=False, stderr=json_output)
    out.print(
        f"[bold]baton up[/] · done {len(summary.done)} · waiting for a human "
        f"{len(summary.waiting_human)} · stalled {len(summary.stalled)} · blocked "
        f"{len(summary.blocked)} · refused {summary.refused}"
    )
    if summary.waiting_human:
        out.print("answer with `baton inbox` / `baton answer ID --accept|--reject`")
    err.print(f"[dim]run {run.run_id} · baton log {run.run_id}[/]")
    return 0 if not summary.stalled else EXIT_FAILED
