"""``baton init``, ``baton task new``, ``baton status``, ``baton sessions``: FCoP from the shell.

A thin typer layer over :mod:`baton.coordination`: every write goes through
the ``fcop`` library (``task new`` is T1 as the human), every read is a
directory listing plus Core reads of the non-terminal stages, and the daemon's
own records come from ``state.json`` (written atomically by ``baton up``), so
these commands work while the daemon runs. ``baton up`` itself is wired by
the lead on top of the runner (see :class:`baton.coordination.daemon.Daemon`).
Errors print ``Type: message`` and exit 1; a legacy workspace also prints how
to migrate.
"""

from __future__ import annotations

import json
import sys
import time
from dataclasses import asdict
from pathlib import Path
from typing import Annotated, Any

import typer

from baton.coordination.context import CoordinationContext, init_project, open_context
from baton.coordination.errors import LegacyWorkspaceError
from baton.coordination.fcop_port import TaskInfo
from baton.coordination.state import CoordinationState
from baton.errors import BatonError

__all__ = ["app", "status_data"]

app = typer.Typer(help="FCoP coordination: the team, its tasks and sessions.", no_args_is_help=True)
task_app = typer.Typer(help="FCoP tasks.", no_args_is_help=True)
app.add_typer(task_app, name="task")

JsonOption = Annotated[bool, typer.Option("--json", help="Print JSON.")]
RootOption = Annotated[
    Path | None, typer.Option("--root", help="Project directory (default: the current one).")
]


def _fail(exc: BatonError) -> typer.Exit:
    typer.echo(f"{type(exc).__name__}: {exc}", err=True)
    if isinstance(exc, LegacyWorkspaceError):
        typer.echo("", err=True)
        typer.echo(exc.guidance, err=True)
    return typer.Exit(1)


def _context(root: Path | None) -> CoordinationContext:
    return open_context(root or Path.cwd())


def _ignore_state_dir(project_dir: Path) -> bool:
    """Keep ``.baton/`` (authority key, store, bindings) out of the repository's commits."""
    ignore = project_dir / ".gitignore"
    try:
        lines = ignore.read_text(encoding="utf-8").splitlines() if ignore.exists() else []
    except (OSError, UnicodeDecodeError):
        return False
    if any(line.strip() in (".baton", ".baton/", "/.baton", "/.baton/") for line in lines):
        return False
    prefix = "" if not lines or lines[-1] == "" else "\n"
    with ignore.open("a", encoding="utf-8") as handle:
        handle.write(f"{prefix}# baton's state: authority key, event store, bindings\n.baton/\n")
    return True


@app.command()
def init(root: RootOption = None) -> None:
    """Create an FCoP 4.0 workspace (fcop/) and a team section in baton.toml (all on the built-in agent)."""
    try:
        result = init_project(root or Path.cwd())
    except BatonError as exc:
        raise _fail(exc) from exc
    ws = result.workspace
    if result.workspace_created:
        typer.echo(f"created FCoP 4.0 workspace {result.project_dir / 'fcop'} ({ws.workspace_id})")
    else:
        typer.echo(f"kept existing FCoP 4.0 workspace ({ws.workspace_id})")
    if not ws.authority_adopted:
        typer.echo(
            "warning: this workspace did not adopt baton's evaluator Profile when it was created; "
            "tasks can be created, claimed, reported and submitted, but not approved (T4-T7). "
            "Move fcop/ aside and run `baton init` again to enable approvals.",
            err=True,
        )
    config = {"written": "wrote", "appended": "added [team] to", "kept": "kept"}[result.config]
    typer.echo(f"{config} {result.project_dir / 'baton.toml'}")
    if _ignore_state_dir(result.project_dir):
        typer.echo(f"added .baton/ to {result.project_dir / '.gitignore'} (keys and the store)")
    team = result.team
    roles = ", ".join(
        f"{r.name}{' (leader)' if r.is_leader else ''}={r.agent}" for r in team.roles.values()
    )
    typer.echo(f"team {team.name!r}: {roles}; human: {team.human}")
    typer.echo('next: baton task new --to PM --subject "..." --body-file TASK.md; baton up')


@task_app.command("new")
def task_new(
    to: Annotated[str, typer.Option("--to", help="The role to do it (e.g. PM).")],
    subject: Annotated[str, typer.Option("--subject", help="One line naming the work.")],
    body_file: Annotated[
        Path | None, typer.Option("--body-file", help="The task body (Markdown); '-' reads stdin.")
    ] = None,
    operation_id: Annotated[
        str | None,
        typer.Option(
            "--operation-id",
            help="Idempotency key (default: derived from the request, so a re-run finds the "
            "same task).",
        ),
    ] = None,
    root: RootOption = None,
    as_json: JsonOption = False,
) -> None:
    """Create a task as the human (FCoP T1 through the fcop library)."""
    try:
        ctx = _context(root)
        if ctx.team.role_for(to) is None:
            known = ", ".join(ctx.team.role_names)
            raise BatonError(f"{to!r} is not a role of this team (roles: {known})")
        if body_file is None:
            body = subject
        elif str(body_file) == "-":
            body = sys.stdin.read()
        else:
            body = body_file.read_text(encoding="utf-8")
        created = ctx.port.create_task(
            sender=ctx.team.human,
            recipient=to,
            subject=subject,
            body=body,
            operation_id=operation_id,
        )
    except OSError as exc:
        raise _fail(BatonError(f"cannot read the body: {exc}")) from exc
    except BatonError as exc:
        raise _fail(exc) from exc
    if as_json:
        typer.echo(
            json.dumps(
                {
                    "task_id": created.task_id,
                    "existing": created.existing,
                    "operation_id": created.operation_id,
                    "recipient": to,
                }
            )
        )
        return
    note = " (already existed: same request)" if created.existing else ""
    typer.echo(f"{created.task_id} -> {to}{note}")


def _task_row(task: TaskInfo, state: CoordinationState) -> dict[str, Any]:
    record = state.tasks.get(task.task_id)
    return {
        "task_id": task.task_id,
        "stage": task.stage,
        "recipient": task.recipient,
        "sender": task.sender,
        "subject": task.subject,
        "parent": task.parent,
        "attempt_id": task.attempt_id,
        "baton_status": record.status if record else None,
        "turns": record.turns if record else 0,
        "report_ref": record.report_ref if record else None,
        "note": record.note if record else "",
    }


def status_data(ctx: CoordinationContext) -> dict[str, Any]:
    """Everything ``baton status --json`` prints (also for the web UI)."""
    state = CoordinationState.load(ctx.paths.state_file)
    now = time.time()
    board = []
    for stage in ("inbox", "active", "review"):
        board += [_task_row(t, state) for t in ctx.port.list_stage(stage)]
    return {
        "project": str(ctx.project_dir),
        "workspace": {
            "workspace_id": ctx.port.workspace_id,
            "approvals": ctx.port.can_authorize,
        },
        "daemon": state.daemon,
        "updated_at": state.updated_at,
        "team": {"name": ctx.team.name, "leader": ctx.team.leader, "human": ctx.team.human},
        "roles": [
            {
                "role": r.name,
                "agent": r.agent,
                "leader": r.is_leader,
                "concurrency": r.concurrency,
                "tools": list(r.tools),
                "permissions": r.permissions,
                "paused_for_s": max(0.0, state.breakers.get(r.name, 0.0) - now),
            }
            for r in ctx.team.roles.values()
        ],
        "sessions": [asdict(s) for s in state.sessions.values()],
        "board": {"counts": ctx.port.stage_counts(), "open": board},
        "pending_reviews": [
            {k: v for k, v in asdict(r).items() if k != "body"}
            for r in state.pending_reviews.values()
            if r.status == "pending"
        ],
        "questions": [asdict(q) for q in state.questions.values() if q.status == "pending"],
        "human_tasks": state.human_tasks,
        "stalls": [asdict(s) for s in state.stalls[-20:]],
        "refusals": [asdict(r) for r in state.refusals[-20:]],
    }


def _security_flags(sessions: list[dict[str, Any]], role: str) -> str:
    """`` UNAPPROVED 2`` / `` AGENT APPROVES`` for a role's sessions (audit and approval mode)."""
    mine = [s for s in sessions if s.get("role") == role]
    count = sum(int(s.get("unapproved_mutations") or 0) for s in mine)
    flags = f"  UNAPPROVED MUTATIONS {count}" if count else ""
    if any(s.get("approval") == "self_approves" for s in mine):
        flags += "  AGENT APPROVES ITSELF (agent_approves)"
    return flags


@app.command()
def status(root: RootOption = None, as_json: JsonOption = False) -> None:
    """Roles, sessions, the task board, and what waits for you."""
    try:
        data = status_data(_context(root))
    except BatonError as exc:
        raise _fail(exc) from exc
    if as_json:
        typer.echo(json.dumps(data, indent=2, sort_keys=True))
        return
    counts = data["board"]["counts"]
    typer.echo(f"project {data['project']}  daemon: {data['daemon']}")
    typer.echo("tasks: " + "  ".join(f"{k} {v}" for k, v in counts.items()))
    typer.echo("roles:")
    for r in data["roles"]:
        paused = f"  PAUSED {r['paused_for_s']:.0f}s" if r["paused_for_s"] else ""
        lead = " (leader)" if r["leader"] else ""
        flags = _security_flags(data["sessions"], r["role"])
        typer.echo(
            f"  {r['role']}{lead}: {r['agent']} x{r['concurrency']} {r['permissions']}{paused}"
            f"{flags}"
        )
    if data["board"]["open"]:
        typer.echo("open tasks:")
        for t in data["board"]["open"]:
            extra = f" [{t['baton_status']}]" if t["baton_status"] else ""
            typer.echo(
                f"  {t['stage']:<7} {t['task_id']} {t['sender']}->{t['recipient']}: "
                f"{t['subject']}{extra}"
            )
    for r in data["pending_reviews"]:
        typer.echo(
            f"review waiting for {data['team']['human']}: {r['task_id']} "
            f"({r['subject']}) report {r['report_id']} result {r['result']}"
        )
    for q in data["questions"]:
        typer.echo(f"question from {q['role']} ({q['request_id']}): {q['question']}")
    for s in data["stalls"]:
        typer.echo(f"stalled: {s['task_id']} ({s['role']}): {s['reason']} [{s['issue_id']}]")
    for r in data["refusals"]:
        typer.echo(f"refused inbox entry {r['name']}: {r['reason']} [{r['issue_id']}]")


@app.command()
def sessions(root: RootOption = None, as_json: JsonOption = False) -> None:
    """Per-session records: turns, tool calls, usage, files changed, last report."""
    try:
        ctx = _context(root)
    except BatonError as exc:
        raise _fail(exc) from exc
    state = CoordinationState.load(ctx.paths.state_file)
    rows = [asdict(s) for s in state.sessions.values()]
    if as_json:
        typer.echo(json.dumps(rows, indent=2, sort_keys=True))
        return
    if not rows:
        typer.echo("no sessions yet (baton up starts them when work arrives)")
        return
    for s in rows:
        usage = s["usage"]
        tokens = (
            f"{usage['input_tokens']}in/{usage['output_tokens']}out"
            if usage["availability"] == "reported"
            else "usage unavailable"
        )
        typer.echo(
            f"{s['name']:<8} {s['agent']:<10} {s['status']:<8} turns {s['turns']:<3} "
            f"tool calls {s['tool_calls_count']:<4} {tokens}; files {len(s['files_changed'])}; "
            f"last report {s['last_report_ref'] or '-'}"
            f"{_security_flags([s], s['role'])}"
        )
