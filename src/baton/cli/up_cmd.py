"""``baton up``: the team daemon; the doorbell wakes the right role as FCoP tasks arrive."""

from __future__ import annotations

import asyncio
import signal
import time
from pathlib import Path
from typing import Annotated, Any

import typer
from rich.console import Console

from baton.cli.shared import EXIT_FAILED, err, renderer
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
) -> None:
    """Run the team: the doorbell wakes the right role as FCoP tasks arrive."""
    code = asyncio.run(_up(Path.cwd(), until_idle=until_idle, json_output=json_output))
    raise typer.Exit(code)


async def _up(cwd: Path, *, until_idle: bool, json_output: bool) -> int:
    from baton.coordination.context import open_context
    from baton.coordination.daemon import Daemon
    from baton.runner.daemon_human import LedgerHumanSink
    from baton.runner.role_sessions import role_session_factory

    ctx = open_context(cwd)
    config = load_config(cwd)
    store = open_store(config)
    ledger = Ledger(store)
    await recover_interrupted(store, ledger)
    run_id = new_run_id()
    emitter = start_run(store, run_id, kind="up", agent="team", cwd=ctx.project_dir)
    view = renderer(json_output)
    emitter.listeners.append(view)

    async def emit(payload: Any) -> None:
        await emitter.emit(payload)

    sink = LedgerHumanSink(ledger, run_id, emit)
    daemon = Daemon(
        port=ctx.port,
        team=ctx.team,
        factory=role_session_factory(
            config,
            workspace=ctx.project_dir,
            store=store,
            ledger=ledger,
            emitter=emitter,
            fcop_mcp=ctx.team.fcop_mcp,
        ),
        state_dir=ctx.state_dir,
        human_sink=sink,
    )
    sink.daemon = daemon
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(sig, daemon.stop)
    status = "failed"
    try:
        await sink.resume()
        summary = await daemon.run(until_idle=until_idle)
        status = "completed"
    finally:
        for sig in (signal.SIGINT, signal.SIGTERM):
            loop.remove_signal_handler(sig)
        await sink.close()
        await emitter.flush()
        store.finish_run(run_id, status, format_ts(time.time()))
        view.close()
        await ledger.aclose()
        store.close()
    out = Console(highlight=False, stderr=json_output)
    out.print(
        f"[bold]baton up[/] · done {len(summary.done)} · waiting for a human "
        f"{len(summary.waiting_human)} · stalled {len(summary.stalled)} · blocked "
        f"{len(summary.blocked)} · refused {summary.refused}"
    )
    if summary.waiting_human:
        out.print("answer with `baton inbox` / `baton answer ID --accept|--reject`")
    err.print(f"[dim]run {run_id} · baton log {run_id}[/]")
    return 0 if not summary.stalled else EXIT_FAILED
