"""``baton run``: one prompt turn against an agent, answered at the terminal or headless."""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import signal
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer
from rich.console import Console

from baton.cli.render import HumanRenderer, safe
from baton.cli.shared import (
    EXIT_CANCELLED,
    EXIT_FAILED,
    EXIT_OK,
    EXIT_SECURITY,
    EXIT_STOP,
    ApprovePreset,
    err,
    exit_for,
    renderer,
)
from baton.cli.wiring import new_run_id, notify_config, open_store, start_run
from baton.config import BatonConfig, load_config
from baton.errors import BatonError, ConfigError
from baton.events.sequencer import format_ts
from baton.providers.profile import AgentProfile
from baton.requests.ledger import Ledger, RequestRecord
from baton.requests.model import (
    Answer,
    PermissionAnswer,
    PermissionRequest,
    PlanAnswer,
    PlanRequest,
)
from baton.requests.policy import AuditMode, Policy
from baton.requests.render import render as render_request
from baton.runner.context import recover_interrupted
from baton.runner.requests_broker import HumanChannel, RequestBroker

if TYPE_CHECKING:
    from baton.runner.session import AgentSession, TurnOutcome

__all__ = ["TerminalAsker", "app"]

app = typer.Typer(add_completion=False, pretty_exceptions_enable=False)


class TerminalAsker:
    """The person at the terminal answers permissions and plans as they arrive.

    Questions and forms are left to ``baton answer`` (the request waits in the
    ledger); any other surface may answer first, and then its answer stands.
    """

    def __init__(self, console: Console) -> None:
        self.console = console
        self.pause: Callable[[], contextlib.AbstractContextManager[None]] = contextlib.nullcontext

    async def ask(self, record: RequestRecord) -> Answer | None:
        with self.pause():
            return await self._ask(record)

    async def _ask(self, record: RequestRecord) -> Answer | None:
        document = record.document
        if not isinstance(document, PermissionRequest | PlanRequest):
            self.console.print(
                f"baton: request {record.request_id} waits for `baton answer {record.request_id}`"
            )
            return None
        self.console.print(render_request(record))
        if isinstance(document, PermissionRequest):
            reply = await asyncio.to_thread(self.console.input, "baton: allow once? [y/N] ")
            return PermissionAnswer(
                decision="allow" if reply.strip().lower() in ("y", "yes") else "deny"
            )
        reply = await asyncio.to_thread(self.console.input, "baton: accept this plan? [y/N] ")
        accept = reply.strip().lower() in ("y", "yes")
        return PlanAnswer(
            decision="accept" if accept else "reject",
            revision=document.revision,
            reason=None if accept else "rejected at the terminal",
        )


async def _run_turn(
    config: BatonConfig,
    profile: AgentProfile,
    *,
    workspace: Path,
    prompt: str,
    preset: ApprovePreset,
    terminal: HumanChannel | None,
    wait_timeout: float | None,
    json_output: bool,
    timeout: float | None,
    audit: AuditMode = "record",
) -> int:
    from baton.runner.session import CANCEL_GRACE_SECONDS, AgentSession

    store = open_store(config)
    ledger = Ledger(store)
    await recover_interrupted(store, ledger)
    broker = RequestBroker(
        ledger,
        dataclasses.replace(Policy.preset(preset), audit=audit),
        terminal=terminal,
        wait_timeout=wait_timeout,
        notify=notify_config(config),
    )
    run_id = new_run_id()
    view = renderer(json_output)
    if isinstance(terminal, TerminalAsker) and isinstance(view, HumanRenderer):
        terminal.pause = view.paused
    emitter = start_run(store, run_id, kind="run", agent=profile.name, cwd=workspace)
    emitter.listeners.append(view)
    status = "failed"
    code = EXIT_FAILED
    session: AgentSession | None = None
    loop = asyncio.get_running_loop()
    interrupts = 0
    grace_handle: asyncio.TimerHandle | None = None

    background: set[asyncio.Task[None]] = set()

    def spawn(coro: Any) -> None:
        task = loop.create_task(coro)
        background.add(task)
        task.add_done_callback(background.discard)

    def on_interrupt() -> None:
        """First Ctrl-C: session/cancel, kill after a grace period; second: kill now."""
        nonlocal interrupts, grace_handle
        interrupts += 1
        if session is None:
            return
        live = session
        if interrupts == 1:
            err.print("[yellow]baton: cancelling the turn (Ctrl-C again to kill the agent)[/]")
            spawn(live.cancel("cancelled by the user (Ctrl-C)"))
            grace_handle = loop.call_later(
                CANCEL_GRACE_SECONDS,
                lambda: spawn(live.kill("no answer to session/cancel in time")),
            )
        else:
            spawn(live.kill("Ctrl-C pressed twice"))

    loop.add_signal_handler(signal.SIGINT, on_interrupt)
    try:
        session = await AgentSession.open(
            profile,
            workspace=workspace,
            emitter=emitter,
            requests=broker,
            state_dir=config.state_dir,
            secrets_file=config.secrets_file,
        )
        outcome: TurnOutcome = await session.prompt(prompt, timeout=timeout)
        status = outcome.status
        if outcome.status == "completed":
            code = EXIT_OK if outcome.stop_reason == "end_turn" else EXIT_STOP
        elif outcome.status == "cancelled":
            code = EXIT_CANCELLED
        else:
            code = EXIT_FAILED
        if outcome.unapproved_mutations:
            # A mutation no recorded decision allowed: the run failed its security check.
            code = EXIT_SECURITY
            err.print(
                f"[red]baton: {outcome.unapproved_mutations} mutation(s) without a recorded "
                "decision (security.unapproved_mutation)[/]"
            )
    except BatonError as exc:
        code = exit_for(exc)
        if not json_output:
            view.close()
            err.print(f"[red]{type(exc).__name__}:[/] {safe(str(exc))}")
    finally:
        loop.remove_signal_handler(signal.SIGINT)
        if grace_handle is not None:
            grace_handle.cancel()
        if session is not None:
            await session.close()
        await emitter.flush()
        store.finish_run(run_id, status, format_ts(time.time()))
        view.close()
        await ledger.aclose()
        store.close()
    if not json_output:
        err.print(f"[dim]run {run_id} · baton log {run_id}[/]")
    return code


@app.command()
def run(
    prompt: Annotated[str, typer.Argument(help="The prompt; '-' reads it from stdin.")],
    agent: Annotated[str, typer.Option("--agent", "-a", help="Agent profile.")] = "builtin",
    cwd: Annotated[Path, typer.Option(help="Workspace directory.")] = Path(),
    approve: Annotated[
        str,
        typer.Option(
            help="Policy preset: reads (allow read-only tools, ask for the rest), all, none."
        ),
    ] = "reads",
    wait_timeout: Annotated[
        float,
        typer.Option(
            help="Without a TTY, how long an escalated request waits in the ledger for "
            "`baton answer` (seconds; 0 = nobody to ask: decide headlessly)."
        ),
    ] = 600.0,
    json_output: Annotated[bool, typer.Option("--json", help="NDJSON canonical events.")] = False,
    timeout: Annotated[
        float | None, typer.Option(help="Turn timeout in seconds (profile default).")
    ] = None,
    audit: Annotated[
        str,
        typer.Option(
            help="A mutation no decision allowed: record (exit 4 at the end) or strict "
            "(also cancel the turn at once)."
        ),
    ] = "record",
) -> None:
    """Run one prompt turn against an agent."""
    if audit not in ("record", "strict"):
        raise ConfigError("--audit must be one of: record, strict")
    if approve not in ("reads", "all", "none"):
        raise ConfigError("--approve must be one of: reads, all, none")
    preset: ApprovePreset = approve  # type: ignore[assignment]
    if prompt == "-":
        prompt = sys.stdin.read()
    workspace = cwd.resolve()
    if not workspace.is_dir():
        raise ConfigError(f"--cwd {cwd} is not a directory")
    config = load_config(workspace)
    profile = config.profile(agent)
    if wait_timeout < 0:
        raise ConfigError("--wait-timeout must be >= 0")
    interactive = sys.stdin.isatty() and sys.stdout.isatty() and not json_output
    code = asyncio.run(
        _run_turn(
            config,
            profile,
            workspace=workspace,
            prompt=prompt,
            preset=preset,
            terminal=TerminalAsker(Console(highlight=False)) if interactive else None,
            wait_timeout=wait_timeout,
            json_output=json_output,
            timeout=timeout,
            audit=audit,  # type: ignore[arg-type]
        )
    )
    raise typer.Exit(code)
