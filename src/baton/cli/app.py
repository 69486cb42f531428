"""The ``baton`` command line: a thin typer layer over the runner and the store.

Exit codes (``baton run``):

====  ===========================================================
0     the turn completed with ``end_turn``
1     the turn failed (agent error, timeout, agent died)
2     bad usage or configuration
3     the agent could not be started or its session not created
4     refused by a security control (admission, pin, containment)
5     the turn completed with another stop reason (refusal, max_tokens…)
130   the turn was cancelled (Ctrl-C)
====  ===========================================================
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import signal
import sys
import time
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any, Literal

import typer
from rich.console import Console
from rich.table import Table

from baton.cli.render import HumanRenderer, NdjsonRenderer, safe
from baton.config import BatonConfig, load_config
from baton.errors import (
    AgentError,
    BatonError,
    ConfigError,
    SecurityError,
)
from baton.events.sequencer import Sequencer, format_ts
from baton.providers.profile import AgentProfile
from baton.requests.ledger import Ledger, RequestRecord
from baton.requests.model import (
    Answer,
    PermissionAnswer,
    PermissionRequest,
    PlanAnswer,
    PlanRequest,
)
from baton.requests.notify import NotifyConfig
from baton.requests.policy import Policy
from baton.requests.render import render as render_request
from baton.runner.context import open_store as _open_store
from baton.runner.context import owner_meta, recover_interrupted
from baton.runner.emitter import EventEmitter
from baton.runner.requests_broker import HumanChannel, RequestBroker
from baton.store.records import RunRecord
from baton.store.store import Store

if TYPE_CHECKING:
    from baton.runner.session import AgentSession, TurnOutcome

app = typer.Typer(
    name="baton",
    help="Run teams of ACP coding agents, durably and safely.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
)
err = Console(stderr=True, highlight=False)

EXIT_OK, EXIT_FAILED, EXIT_USAGE, EXIT_AGENT, EXIT_SECURITY, EXIT_STOP, EXIT_CANCELLED = (
    0,
    1,
    2,
    3,
    4,
    5,
    130,
)
ApprovePreset = Literal["reads", "all", "none"]


def _exit_for(exc: BaseException) -> int:
    if isinstance(exc, SecurityError):
        return EXIT_SECURITY
    if isinstance(exc, ConfigError):
        return EXIT_USAGE
    if isinstance(exc, AgentError):
        return EXIT_AGENT
    return EXIT_FAILED


def new_run_id() -> str:
    return f"run-{time.strftime('%Y%m%d-%H%M%S', time.gmtime())}-{uuid.uuid4().hex[:6]}"


def start_run(store: Store, run_id: str, *, kind: str, agent: str, cwd: Path) -> EventEmitter:
    """Record a new run (with its owner, for crash recovery) and its event emitter."""
    store.create_run(
        RunRecord(
            run_id=run_id,
            kind=kind,
            agent=agent,
            cwd=str(cwd),
            status="running",
            created_at=format_ts(time.time()),
            meta=owner_meta(),
        )
    )
    return EventEmitter(Sequencer(run_id), store)


def notify_config(config: BatonConfig) -> NotifyConfig:
    """``[notify]`` from baton.toml: who to tell when a human is needed."""
    table = config.raw.get("notify", {})
    if not isinstance(table, dict):
        raise ConfigError("[notify] must be a table")
    return NotifyConfig.from_table(table)


def open_store(config: BatonConfig) -> Store:
    return _open_store(config.db_path)


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


def _renderer(json_output: bool) -> HumanRenderer | NdjsonRenderer:
    return NdjsonRenderer() if json_output else HumanRenderer()


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
) -> int:
    from baton.runner.session import CANCEL_GRACE_SECONDS, AgentSession

    store = open_store(config)
    ledger = Ledger(store)
    await recover_interrupted(store, ledger)
    broker = RequestBroker(
        ledger,
        Policy.preset(preset),
        terminal=terminal,
        wait_timeout=wait_timeout,
        notify=notify_config(config),
    )
    run_id = new_run_id()
    renderer = _renderer(json_output)
    if isinstance(terminal, TerminalAsker) and isinstance(renderer, HumanRenderer):
        terminal.pause = renderer.paused
    emitter = start_run(store, run_id, kind="run", agent=profile.name, cwd=workspace)
    emitter.listeners.append(renderer)
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
    except BatonError as exc:
        code = _exit_for(exc)
        if not json_output:
            renderer.close()
            err.print(f"[red]{type(exc).__name__}:[/] {safe(str(exc))}")
    finally:
        loop.remove_signal_handler(signal.SIGINT)
        if grace_handle is not None:
            grace_handle.cancel()
        if session is not None:
            await session.close()
        await emitter.flush()
        store.finish_run(run_id, status, format_ts(time.time()))
        renderer.close()
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
) -> None:
    """Run one prompt turn against an agent."""
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
        )
    )
    raise typer.Exit(code)


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
    renderer = _renderer(json_output)
    emitter.listeners.append(renderer)

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
        renderer.close()
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


@app.command()
def runs(
    limit: Annotated[int, typer.Option(help="How many.")] = 20,
    json_output: Annotated[bool, typer.Option("--json")] = False,
) -> None:
    """List recent runs."""
    config = load_config(Path.cwd())
    if not config.db_path.exists():
        records = []
    else:
        store = open_store(config)
        try:
            records = store.list_runs(limit)
        finally:
            store.close()
    if json_output:
        for r in records:
            typer.echo(json.dumps(_run_dict(r), ensure_ascii=False))
        return
    table = Table("run", "kind", "agent", "status", "started", "ended", box=None)
    for r in records:
        table.add_row(r.run_id, r.kind, r.agent, r.status, r.created_at, r.ended_at or "")
    Console(highlight=False).print(table)


def _run_dict(r: RunRecord) -> dict[str, Any]:
    return {
        "run_id": r.run_id,
        "kind": r.kind,
        "agent": r.agent,
        "cwd": r.cwd,
        "status": r.status,
        "created_at": r.created_at,
        "ended_at": r.ended_at,
    }


@app.command()
def log(
    run_id: Annotated[str, typer.Argument(help="Run id (see `baton runs`).")],
    json_output: Annotated[bool, typer.Option("--json")] = False,
) -> None:
    """Replay a stored run."""
    config = load_config(Path.cwd())
    store = open_store(config)
    try:
        if store.get_run(run_id) is None:
            raise ConfigError(f"no run {run_id!r} in {config.db_path}")
        if json_output:
            for line in store.iter_event_json(run_id):
                sys.stdout.write(line + "\n")
            return
        renderer = HumanRenderer(live=False)
        for event in store.iter_events(run_id):
            renderer(event)
        renderer.close()
    finally:
        store.close()


@app.command()
def probe(
    agent: Annotated[str, typer.Argument(help="Agent profile to probe.")],
    cwd: Annotated[Path, typer.Option(help="Workspace for session/new.")] = Path(),
    json_output: Annotated[bool, typer.Option("--json")] = False,
) -> None:
    """Show what an agent advertises: protocol, capabilities, auth, modes, config options."""
    workspace = cwd.resolve()
    config = load_config(workspace)
    profile = config.profile(agent)
    result = asyncio.run(_probe(config, profile, workspace))
    if json_output:
        typer.echo(json.dumps(result, indent=2, ensure_ascii=False))
    else:
        console = Console(highlight=False)
        table = Table("field", "value", box=None, show_header=False)
        for key, value in result.items():
            table.add_row(key, safe(json.dumps(value, ensure_ascii=False)))
        console.print(table)
    raise typer.Exit(0 if result.get("session_error") is None else EXIT_AGENT)


async def _probe(config: BatonConfig, profile: AgentProfile, workspace: Path) -> dict[str, Any]:
    store = open_store(config)
    ledger = Ledger(store)
    run_id = new_run_id()
    emitter = start_run(store, run_id, kind="probe", agent=profile.name, cwd=workspace)
    out: dict[str, Any] = {"agent": profile.name}
    try:
        return await _probe_session(config, profile, workspace, emitter, ledger, out)
    finally:
        await emitter.flush()
        store.finish_run(
            run_id, "failed" if out.get("session_error") else "completed", format_ts(time.time())
        )
        await ledger.aclose()
        store.close()


async def _probe_session(
    config: BatonConfig,
    profile: AgentProfile,
    workspace: Path,
    emitter: EventEmitter,
    ledger: Ledger,
    out: dict[str, Any],
) -> dict[str, Any]:
    from baton.runner.session import AgentSession

    try:
        session = await AgentSession.open(
            profile,
            workspace=workspace,
            emitter=emitter,
            requests=RequestBroker(ledger, Policy.preset("none"), wait_timeout=0),
            state_dir=config.state_dir,
            secrets_file=config.secrets_file,
        )
    except AgentError as exc:
        out["session_error"] = f"{type(exc).__name__}: {exc}"
        auth = getattr(exc, "auth_methods", ())
        if auth:
            out["auth_methods"] = list(auth)
        return out
    try:
        init = session.initialize_result
        if init is not None:
            out.update(init.model_dump(by_alias=True, exclude_none=True, mode="json"))
        out["session"] = {
            k: v for k, v in session.session_result.items() if k in ("modes", "configOptions")
        }
        out["session_error"] = None
    finally:
        await session.close("probe finished")
    return out


@app.command()
def schema(
    write: Annotated[bool, typer.Option(help="Write schema/events.schema.json.")] = False,
    check: Annotated[bool, typer.Option(help="Exit 1 if the committed schema is stale.")] = False,
) -> None:
    """Print (or write/check) the JSON Schema of the canonical event stream."""
    from baton.events.schema import render_schema

    text = render_schema()
    target = Path(__file__).resolve().parents[3] / "schema" / "events.schema.json"
    if check:
        current = target.read_text(encoding="utf-8") if target.exists() else ""
        if current != text:
            err.print(f"{target} is stale; run `baton schema --write`")
            raise typer.Exit(1)
        return
    if write:
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(text, encoding="utf-8")
        err.print(f"wrote {target}")
        return
    typer.echo(text, nl=False)


def _mount(module: str) -> None:
    """Add the commands of a sub-app (owned by another module) at the top level."""
    import importlib

    try:
        sub = importlib.import_module(module).app
    except ImportError:
        return
    for command in sub.registered_commands:
        app.registered_commands.append(command)
    for group in sub.registered_groups:
        app.registered_groups.append(group)


for _module in (
    "baton.cli.security_cmds",
    "baton.cli.requests_cmds",
    "baton.cli.coordination_cmds",
    "baton.cli.capabilities_cmd",
    "baton.cli.web_cmd",
    "baton.cli.agents_cmds",
):
    _mount(_module)


def main(argv: list[str] | None = None) -> None:
    """Entry point: one place that turns baton errors into ``Type: message`` and a code."""
    handler: Callable[..., Any] = typer.main.get_command(app)
    try:
        code = handler(args=argv, standalone_mode=False)
    except BatonError as exc:
        err.print(f"[red]{type(exc).__name__}:[/] {safe(str(exc))}")
        sys.exit(_exit_for(exc))
    except typer.Exit as exc:
        sys.exit(exc.exit_code)
    except (typer.Abort, KeyboardInterrupt):
        sys.exit(EXIT_CANCELLED)
    except Exception as exc:
        import click

        if isinstance(exc, click.ClickException):
            exc.show()
            sys.exit(EXIT_USAGE)
        raise
    sys.exit(code if isinstance(code, int) else 0)
