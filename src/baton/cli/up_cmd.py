"""``baton up``: the team daemon; the doorbell wakes the right role as FCoP tasks arrive."""

from __future__ import annotations

import asyncio
import signal
import time
from pathlib import Path
from typing import Annotated

import typer
from rich.console import Console

from baton.cli.shared import EXIT_CANCELLED, EXIT_FAILED, err, renderer
from baton.cli.wiring import new_run_id, open_store, start_run
from baton.config import load_config
from baton.events.sequencer import format_ts
from baton.requests.ledger import Ledger
from baton.runner.context import recover_interrupted

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
    """Run the team loop (:func:`baton.team.service.run_team`); SIGINT, SIGTERM and SIGHUP
    stop it gracefully: running turns are interrupted and recorded so (exit 130)."""
    from baton.coordination.context import open_context
    from baton.team.loop import DaemonBusy, TeamLoop
    from baton.team.service import run_team

    ctx = open_context(cwd)
    config = load_config(cwd)
    store = open_store(config)
    ledger = Ledger(store)
    await recover_interrupted(store, ledger)
    run_id = new_run_id()
    emitter = start_run(store, run_id, kind="up", agent="team", cwd=ctx.project_dir)
    view = renderer(json_output)
    emitter.listeners.append(view)
    loop = asyncio.get_running_loop()
    team_loop: TeamLoop | None = None
    signalled: list[str] = []

    def on_signal(name: str) -> None:
        signalled.append(name)
        if team_loop is not None:
            team_loop.stop(f"stopped by {name}")

    def bind(created: TeamLoop) -> None:
        nonlocal team_loop
        team_loop = created
        if signalled:
            created.stop(f"stopped by {signalled[0]}")

    signals = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)
    for sig in signals:
        loop.add_signal_handler(sig, on_signal, sig.name)
    status = "failed"
    dashboard = None
    try:
        if serve_port is not None:
            from baton.web.server import DashboardServer

            dashboard = DashboardServer(store, ledger, port=serve_port, project_dir=ctx.project_dir)
            await dashboard.start()
            err.print(f"baton dashboard: {await dashboard.login_url()}", soft_wrap=True)
            err.print("[dim]  (a one-time login code, valid for ten minutes)[/]")
        try:
            summary = await run_team(
                ctx,
                config,
                store=store,
                ledger=ledger,
                emitter=emitter,
                until_idle=until_idle,
                on_loop=bind,
            )
        except DaemonBusy as exc:
            err.print(f"[red]DaemonBusy:[/] {exc}")
            return EXIT_FAILED
        status = "interrupted" if summary.stopped else "completed"
    finally:
        for sig in signals:
            loop.remove_signal_handler(sig)
        if dashboard is not None:
            await dashboard.stop()
        await emitter.flush()
        store.finish_run(run_id, status, format_ts(time.time()))
        view.close()
        await ledger.aclose()
        store.close()
    out = Console(highlight=False, stderr=json_output)
    out.print(
        f"[bold]baton up[/] · done {len(summary.done)} · waiting for a human "
        f"{len(summary.waiting_human)} · needs attention {len(summary.stalled)} · blocked "
        f"{len(summary.blocked)} · refused {summary.refused}"
        + (f" · interrupted {len(summary.interrupted)}" if summary.interrupted else "")
    )
    if summary.waiting_human or summary.stalled:
        out.print("answer with `baton inbox` / `baton answer ID --accept|--reject`")
    err.print(f"[dim]run {run_id} · baton log {run_id}[/]")
    if summary.stopped:
        return EXIT_CANCELLED
    return 0 if not summary.stalled else EXIT_FAILED
