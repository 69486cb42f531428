"""``baton run``: one prompt turn against an agent, answered at the terminal or headless."""

from __future__ import annotations

import asyncio
import dataclasses
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer
from rich.console import Console

from baton.aiotasks import cancel_and_wait
from baton.app import Baton
from baton.app.facade.agents import AgentProfile
from baton.app.facade.budgets import Limits, parse_budget_option, raise_hint
from baton.app.facade.config import BatonConfig
from baton.app.facade.requests import AuditMode, Policy
from baton.app.facade.runs import HumanChannel
from baton.app.facade.store import RunStatus
from baton.cli.project import ProjectOption, project_config, start_dir
from baton.cli.render import HumanRenderer
from baton.cli.run_asking import HeadlessHint, TerminalAsker, say_headless
from baton.cli.shared import (
    EXIT_BUDGET,
    EXIT_CANCELLED,
    EXIT_FAILED,
    EXIT_OK,
    EXIT_SECURITY,
    EXIT_STEPS,
    EXIT_STOP,
    EXIT_USAGE,
    ApprovePreset,
    CommandError,
    command_app,
    describe,
    err,
    exit_for,
    progress,
    renderer,
    say_error,
)
from baton.cli.signals import Interrupts, describe_signal
from baton.errors import BatonError

if TYPE_CHECKING:
    from baton.app.facade.runs import AgentSession, TurnOutcome

__all__ = ["app"]

app = command_app()


async def _run_turn(
    config: BatonConfig,
    profile: AgentProfile,
    *,
    workspace: Path,
    prompt: str,
    preset: ApprovePreset,
    interactive: bool,
    wait_timeout: float,
    json_output: bool,
    timeout: float | None,
    remind_every: float,
    audit: AuditMode = "record",
    budget: Limits | None = None,
) -> int:
    from baton.app.facade.runs import CANCEL_GRACE_SECONDS
    from baton.cli.services import running_dashboard

    headless: HeadlessHint | None = None
    terminal: HumanChannel | None = None
    if interactive:
        terminal = TerminalAsker(Console(highlight=False))
    elif wait_timeout > 0:
        headless = HeadlessHint(wait_timeout, lambda: running_dashboard(config.state_dir))
        terminal = headless
    view = renderer(json_output)
    if isinstance(terminal, TerminalAsker) and isinstance(view, HumanRenderer):
        terminal.pause = view.paused
    status: RunStatus = "failed"
    code = EXIT_FAILED
    session: AgentSession | None = None
    loop = asyncio.get_running_loop()
    grace_handle: asyncio.TimerHandle | None = None
    background: set[asyncio.Task[None]] = set()

    def spawn(coro: Any) -> None:
        task = loop.create_task(coro)
        background.add(task)
        task.add_done_callback(background.discard)

    def on_first(signum: int) -> None:
        """First signal: session/cancel, kill after a grace period."""
        nonlocal grace_handle
        name = describe_signal(signum)
        err.print(f"baton: {name}: cancelling the turn (again to kill the agent)", style="yellow")
        if session is None:
            return  # still starting: the prompt is not sent (checked after open)
        live = session
        spawn(live.cancel(f"cancelled by {name}"))
        grace_handle = loop.call_later(
            CANCEL_GRACE_SECONDS,
            lambda: spawn(live.kill("no answer to session/cancel in time")),
        )

    def on_again(signum: int) -> None:
        if session is not None:
            spawn(session.kill(f"{describe_signal(signum)} received twice"))

    async def remind() -> None:
        while headless is not None:
            await asyncio.sleep(remind_every)
            headless.remind(view.tally.waiting)

    try:
        async with Baton.open(workspace, config=config) as baton:
            policy = dataclasses.replace(Policy.preset(preset), audit=audit)
            broker = baton.broker(policy, terminal=terminal, wait_timeout=wait_timeout)
            async with baton.run(kind="run", agent=profile.name, cwd=workspace) as run:
                run_id = run.run_id
                run.listen(view, batch_end=view.batch_end)
                reminder = loop.create_task(remind()) if headless is not None else None
                with Interrupts(on_first, on_again) as interrupts:
                    try:
                        with progress(f"starting {profile.name}…", spinner=False):
                            session = await baton.open_session(
                                profile,
                                run=run,
                                requests=broker,
                                workspace=workspace,
                                budget=baton.budget_plan(budget),
                            )
                        if interrupts.first is not None:
                            status = "cancelled"
                        else:
                            outcome: TurnOutcome = await session.prompt(prompt, timeout=timeout)
                            status = outcome.status
                            if outcome.status == "completed":
                                code = EXIT_OK if outcome.stop_reason == "end_turn" else EXIT_STOP
                                if code == EXIT_OK and not view.tally.clean:
                                    code = EXIT_STEPS
                            elif outcome.budget is not None:
                                code = EXIT_BUDGET
                                breach = session.budget.breach if session.budget else None
                                say_error(
                                    f"budget exceeded: {outcome.budget}; the turn was cancelled",
                                    f"raise it: {raise_hint(breach)}" if breach else None,
                                )
                            elif outcome.status == "cancelled":
                                code = EXIT_CANCELLED
                            else:
                                code = EXIT_FAILED
                            if outcome.unapproved_mutations:
                                # A mutation no recorded decision allowed: a failed security check.
                                code = EXIT_SECURITY
                                err.print(
                                    f"baton: {outcome.unapproved_mutations} mutation(s) without a "
                                    "recorded decision (security.unapproved_mutation); exit 4",
                                    style="red",
                                    markup=False,
                                )
                    except BatonError as exc:
                        code = exit_for(exc)
                        if not json_output:
                            view.close()
                            # stderr carries the error even when the view showed it
                            say_error(*describe(exc))
                    finally:
                        run.status = status
                        await cancel_and_wait([reminder])
                        if grace_handle is not None:
                            grace_handle.cancel()
                        if session is not None:
                            await session.close()
    finally:
        # the last batch reaches stdout whatever happened (an event shown is one stored)
        view.close()
    if interrupts.exit_code is not None and status != "completed":
        code = interrupts.exit_code
    if not json_output:
        if code == EXIT_STEPS:
            err.print(
                f"baton: the turn completed, but not every step ran ({view.tally.describe()});"
                f" exit {EXIT_STEPS}",
                style="yellow",
                markup=False,
            )
        err.print(f"run {run_id} · replay: baton log {run_id}", style="dim")
    return code


def _check_endpoint(profile: AgentProfile) -> None:
    """Refuse to start an agent whose model server is down (it would retry for a minute
    and then print its own error dump): one line, before anything is launched."""
    from baton.cli.endpoint_check import unreachable
    from baton.cli.shared import EXIT_AGENT

    if profile.endpoint is None:
        return
    why = unreachable(profile.endpoint)
    if why is not None:
        raise CommandError(
            f"the model endpoint {profile.endpoint} (profile {profile.name}) is not "
            f"reachable: {why}",
            hint="start the model server, or fix the profile's endpoint in baton.toml",
            code=EXIT_AGENT,
        )


APPROVE_HELP = (
    "What is allowed without asking. "
    "reads (default): read, search and think tools run; edits, deletes, moves, commands and "
    "fetches ask you. "
    "all: everything runs, each call allowed once (never 'always'). "
    "none: nothing is asked, every request is denied. "
    "Paths outside the workspace always ask."
)


@app.command()
def run(
    prompt: Annotated[str, typer.Argument(help="The prompt; '-' reads it from stdin.")],
    agent: Annotated[str, typer.Option("--agent", "-a", help="Agent profile.")] = "builtin",
    approve: Annotated[str, typer.Option(help=APPROVE_HELP, metavar="reads|all|none")] = "reads",
    wait_timeout: Annotated[
        float,
        typer.Option(
            help="Without a TTY, how long a request that needs you waits for `baton answer` or "
            "the dashboard (seconds; 0 = nobody to ask: deny at once).",
        ),
    ] = 600.0,
    json_output: Annotated[bool, typer.Option("--json", help="NDJSON canonical events.")] = False,
    timeout: Annotated[
        float | None, typer.Option(help="Turn timeout in seconds (profile default).")
    ] = None,
    stall_timeout: Annotated[
        float | None,
        typer.Option(
            help="Seconds the agent may say nothing before the turn is shown as stalled "
            "(profile default, 60).",
        ),
    ] = None,
    remind_every: Annotated[
        float, typer.Option(hidden=True, help="Seconds between 'still waiting' reminders.")
    ] = 60.0,
    audit: Annotated[
        str,
        typer.Option(
            help="A mutation no decision allowed (the permission audit): record it and exit 4 "
            "(default), or strict: also cancel the turn at once.",
            metavar="record|strict",
        ),
    ] = "record",
    budget: Annotated[
        str | None,
        typer.Option(
            help="Limits for this run over [budget] per_run, e.g. cost_usd=0.50,tokens=200000 "
            "(tokens, cost_usd, turns, tool_calls, minutes); reaching one cancels the turn.",
            metavar="NAME=VALUE,...",
        ),
    ] = None,
    project: ProjectOption = None,
) -> None:
    """Run one prompt turn against an agent in the project.

    Exit codes: 0 completed and every step ran; 1 failed; 2 bad usage; 3 the agent did
    not start; 4 refused by a security control; 5 completed with another stop reason;
    6 completed but a step was denied or failed; 7 a budget limit cancelled or refused
    the turn; 130/143/129 interrupted by SIGINT/SIGTERM/SIGHUP. A mutation without a
    recorded decision exits 4 too.
    """
    if audit not in ("record", "strict"):
        raise CommandError(
            f"--audit {audit!r} is not a mode", hint="use record or strict", code=EXIT_USAGE
        )
    if approve not in ("reads", "all", "none"):
        raise CommandError(
            f"--approve {approve!r} is not a preset",
            hint="use reads, all or none (see `baton run -h`)",
            code=EXIT_USAGE,
        )
    preset: ApprovePreset = approve  # type: ignore[assignment]
    if wait_timeout < 0:
        raise CommandError("--wait-timeout must be 0 or more seconds", code=EXIT_USAGE)
    if stall_timeout is not None and stall_timeout <= 0:
        raise CommandError("--stall-timeout must be a positive number of seconds", code=EXIT_USAGE)
    limits = parse_budget_option(budget) if budget is not None else None
    if prompt == "-":
        prompt = sys.stdin.read()
    config = project_config(project)
    workspace = config.project_dir or start_dir(project)
    profile = config.profile(agent)
    _check_endpoint(profile)
    if stall_timeout is not None:
        profile = dataclasses.replace(profile, stall_timeout=stall_timeout)
    interactive = sys.stdin.isatty() and sys.stdout.isatty() and not json_output
    if not interactive and not json_output and (sys.stdin.isatty() or sys.stdout.isatty()):
        say_headless(wait_timeout)
    code = asyncio.run(
        _run_turn(
            config,
            profile,
            workspace=workspace,
            prompt=prompt,
            preset=preset,
            interactive=interactive,
            wait_timeout=wait_timeout,
            json_output=json_output,
            timeout=timeout,
            remind_every=remind_every,
            audit=audit,  # type: ignore[arg-type]
            budget=limits,
        )
    )
    raise typer.Exit(code)
