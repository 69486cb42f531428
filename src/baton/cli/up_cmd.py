"""``baton up`` and ``baton down``: the team loop, started here and stopped from anywhere.

``up`` says what it watches, labels every line with the role it comes from, prints a
one-line heartbeat while idle, and announces itself in the project's services
(:mod:`baton.cli.services`). ``down`` (from another shell) asks it to stop: the
team loop finishes cleanly (sessions closed, the run finished in the store) and ``up``
exits 0. SIGINT, SIGTERM and SIGHUP stop it the same way, with ``128 + N``.

Exit codes of ``up``: 0 stopped or idle; 1 a task stalled; 2 bad usage (not in a
project); 130/143/129 interrupted by SIGINT/SIGTERM/SIGHUP.
"""

from __future__ import annotations

import asyncio
import os
import select
import signal
import time
from pathlib import Path
from typing import Annotated, Any, Final

import typer

from baton.aiotasks import cancel_and_wait
from baton.app import Baton, new_run_id
from baton.cli.project import ProjectOption, coordination, project_config
from baton.cli.render import HumanRenderer, NdjsonRenderer
from baton.cli.runs_cmds import RoleLabels
from baton.cli.services import announce, find, request_stop, stop_requested
from baton.cli.shared import (
    EXIT_FAILED,
    EXIT_OK,
    CommandError,
    command_app,
    err,
    out,
    plural,
    progress,
)
from baton.cli.signals import Interrupts, describe_signal
from baton.procgroup import process_alive

__all__ = ["app"]

app = command_app()

SERVICE: Final = "up"


@app.command()
def up(
    until_idle: Annotated[
        bool,
        typer.Option(
            "--until-idle", help="Exit once every task is settled or waiting for a human."
        ),
    ] = False,
    json_output: Annotated[bool, typer.Option("--json", help="NDJSON canonical events.")] = False,
    heartbeat: Annotated[
        float, typer.Option(hidden=True, help="Seconds of silence before an idle line.")
    ] = 60.0,
    serve: Annotated[
        bool, typer.Option("--serve", help="Also serve the dashboard (prints a login URL).")
    ] = False,
    port: Annotated[
        int, typer.Option("--port", help="Dashboard port (with --serve).", min=0, max=65535)
    ] = 8765,
    project: ProjectOption = None,
) -> None:
    """Run the team: the doorbell wakes the right role as FCoP tasks arrive.

    Stop it with Ctrl-C here or `baton down` from another shell. Exit codes: 0 stopped
    or idle; 1 a task stalled; 2 bad usage; 130/143/129 interrupted by a signal.
    """
    ctx = coordination(project)
    running = find(ctx.state_dir, SERVICE)
    if running is not None:
        raise CommandError(
            f"baton up is already running for this project (pid {running['pid']})",
            hint="stop it with `baton down`",
        )
    code = asyncio.run(
        _up(
            project,
            until_idle=until_idle,
            json_output=json_output,
            heartbeat=heartbeat,
            serve_port=port if serve else None,
        )
    )
    raise typer.Exit(code)


def _warn_unreachable_endpoints(ctx: Any) -> None:
    """A role whose model server is down would fail every turn after a long retry: say it
    once, at the start, in one line per endpoint (the team still starts: it may come up)."""
    from baton.app.facade.config import load_config
    from baton.cli.endpoint_check import unreachable

    config = load_config(ctx.project_dir)
    checked: dict[str, str | None] = {}
    for spec in ctx.team.roles.values():
        endpoint = config.profile(spec.agent).endpoint
        if endpoint is None:
            continue
        if endpoint not in checked:
            checked[endpoint] = unreachable(endpoint)
        if checked[endpoint] is not None:
            err.print(
                f"baton: warning: {spec.name}'s model endpoint {endpoint} ({spec.agent}) is not "
                f"reachable ({checked[endpoint]}) — start the model server, or its turns fail",
                style="yellow",
                markup=False,
            )


async def _up(
    project: Path | None,
    *,
    until_idle: bool,
    json_output: bool,
    heartbeat: float,
    serve_port: int | None = None,
) -> int:
    from baton.app.facade.team import RoleSession, RoleSessionFactory, TeamLoop, TeamLoopBusy

    ctx = coordination(project)
    run_id = new_run_id()
    roles = list(ctx.team.roles)
    _warn_unreachable_endpoints(ctx)
    say = err if json_output else out()
    team_loop: TeamLoop | None = None
    stop_asked: list[str] = []
    asked_down = False

    def bind(created: TeamLoop) -> None:
        nonlocal team_loop
        team_loop = created
        if stop_asked:
            created.stop(stop_asked[0])

    def stop(signum: int) -> None:
        nonlocal asked_down
        asked_down = signum == signal.SIGTERM and stop_requested(ctx.state_dir, SERVICE)
        why = "baton down" if asked_down else describe_signal(signum)
        err.print(f"baton: {why}: stopping the team (sessions close cleanly)", style="yellow")
        stop_asked.append(f"stopped by {why}")
        if team_loop is not None:
            team_loop.stop(f"stopped by {why}")

    def with_progress(open_role: RoleSessionFactory) -> RoleSessionFactory:
        async def factory(spec: Any, binding: Any, cwd: Path | None) -> RoleSession:
            """A role session, with a progress line when starting it takes a while."""
            with progress(f"starting {spec.name} ({spec.agent})…", spinner=False):
                return await open_role(spec, binding, cwd)

        return factory

    summary = None
    view: HumanRenderer | NdjsonRenderer | None = None
    try:
        async with (
            Baton.open(ctx.project_dir) as baton,
            baton.run(kind="up", agent="team", cwd=ctx.project_dir, run_id=run_id) as run,
        ):
            view = (
                NdjsonRenderer()
                if json_output
                else HumanRenderer(
                    labeler=RoleLabels(baton.store), label_width=max(map(len, roles))
                )
            )
            run.listen(view, batch_end=view.batch_end)
            tally = view.tally
            say.print(
                f"baton up · watching {plural(len(roles), 'role')} ({', '.join(roles)}) in "
                f"{ctx.project_dir} · "
                + ("until every task is settled or waits for you" if until_idle else "")
                + ("" if until_idle else "stop with Ctrl-C or `baton down`"),
                markup=False,
                style="bold",
            )

            async def beat() -> None:
                while True:
                    await asyncio.sleep(heartbeat / 4)
                    idle = time.monotonic() - tally.last_event
                    if idle >= heartbeat:
                        waiting = len(tally.waiting)
                        line = f"· idle {int(idle // 60)}m · watching {plural(len(roles), 'role')}"
                        if waiting:
                            line += (
                                f" · {plural(waiting, 'request')} waiting for you (`baton inbox`)"
                            )
                        say.print(line, style="dim", markup=False)
                        tally.last_event = time.monotonic()

            beater = asyncio.get_running_loop().create_task(beat())
            dashboard = None
            with announce(ctx.state_dir, SERVICE, run_id=run_id), Interrupts(stop) as signals:
                try:
                    if serve_port is not None:
                        from baton.web.server import DashboardServer

                        dashboard = DashboardServer(
                            baton.store, baton.ledger, port=serve_port, project_dir=ctx.project_dir
                        )
                        await dashboard.start()
                        err.print(f"baton dashboard: {await dashboard.login_url()}", soft_wrap=True)
                        err.print("[dim]  (a one-time login code, valid for ten minutes)[/]")
                    try:
                        summary = await baton.run_team(
                            run, ctx, until_idle=until_idle, on_loop=bind, decorate=with_progress
                        )
                    except TeamLoopBusy as exc:
                        raise CommandError(str(exc), hint="stop it with `baton down`") from exc
                    run.status = (
                        "interrupted" if summary.stopped and not asked_down else "completed"
                    )
                finally:
                    await cancel_and_wait([beater])
                    if dashboard is not None:
                        await dashboard.stop()
    finally:
        if view is not None:
            view.close()
    assert summary is not None
    say.print(
        f"baton up · done {len(summary.done)} · waiting for you {len(summary.waiting_human)}"
        f" · needs attention {len(summary.stalled)} · blocked {len(summary.blocked)}"
        f" · refused {summary.refused}"
        + (f" · interrupted {len(summary.interrupted)}" if summary.interrupted else ""),
        markup=False,
    )
    if summary.waiting_human or summary.stalled:
        say.print("answer with `baton inbox`, then `baton answer ID …`", markup=False)
    err.print(f"run {run_id} · replay: baton log {run_id}", style="dim")
    if signals.exit_code is not None and not asked_down:
        return signals.exit_code
    return EXIT_OK if not summary.stalled else EXIT_FAILED


@app.command()
def down(
    timeout: Annotated[
        float, typer.Option(help="Seconds to wait for the team loop to finish.", min=0)
    ] = 60.0,
    project: ProjectOption = None,
) -> None:
    """Stop the `baton up` running for this project (from any shell); waits until it exited."""
    config = project_config(project)
    record = find(config.state_dir, SERVICE)
    if record is None:
        out().print("no `baton up` is running for this project", markup=False)
        return
    pid = int(record["pid"])
    request_stop(config.state_dir, SERVICE, pid)
    try:
        os.kill(pid, signal.SIGTERM)
    except ProcessLookupError:
        out().print("no `baton up` is running for this project", markup=False)
        return
    err.print(f"baton: stopping baton up (pid {pid})…", style="dim")
    started = time.monotonic()
    if not _wait_exit(pid, timeout):
        raise CommandError(
            f"baton up (pid {pid}) is still stopping after {timeout:g}s",
            hint="run `baton down` again to wait longer",
        )
    out().print(f"stopped baton up (pid {pid}) in {time.monotonic() - started:.1f}s", markup=False)


def _wait_exit(pid: int, timeout: float) -> bool:
    """Wait for a process that is not our child to exit (a pidfd when the kernel has one)."""
    try:
        fd = os.pidfd_open(pid)
    except (AttributeError, OSError):
        fd = -1
    if fd >= 0:
        try:
            poller = select.poll()
            poller.register(fd, select.POLLIN)
            poller.poll(timeout * 1000)
        finally:
            os.close(fd)
        return not process_alive(pid)
    deadline = time.monotonic() + timeout
    while process_alive(pid) and time.monotonic() < deadline:
        time.sleep(0.05)
    return not process_alive(pid)
