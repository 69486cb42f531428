"""``baton init``, ``baton task new``, ``baton status``, ``baton sessions``: FCoP from the shell.

A thin typer layer over :mod:`baton.coordination` and :mod:`baton.team.views`:
every write goes through the ``fcop`` library (``task new`` is T1 as the human),
every read is a directory listing plus Core reads of the non-terminal stages,
and the team loop's own records come from the store (WAL: these commands read
while ``baton up`` writes). Task-controlled text is made display-safe before it
reaches the terminal. Errors print ``Type: message`` and exit 1; a legacy
workspace also prints how to migrate.
"""

from __future__ import annotations

import json
import sys
from dataclasses import asdict
from pathlib import Path
from typing import Annotated, Any

import typer

from baton.config import load_config
from baton.coordination.context import CoordinationContext, init_project, open_context
from baton.coordination.errors import LegacyWorkspaceError
from baton.errors import BatonError
from baton.security.display import safe_agent_text
from baton.store.store import Store
from baton.team.views import slot_views, team_view

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


def _open_store(ctx: CoordinationContext) -> Store:
    return Store.open(load_config(ctx.project_dir).db_path)


def status_data(ctx: CoordinationContext) -> dict[str, Any]:
    """Everything ``baton status --json`` prints (the web uses :func:`baton.team.views.team_view`)."""
    with _open_store(ctx) as store:
        view = team_view(store, ctx.team, ctx.port)
    data = view.to_json()
    board = [{**t, "review": t["review"], "attention": t["attention"]} for t in data["tasks"]]
    return {
        "project": str(ctx.project_dir),
        "workspace": {
            "workspace_id": ctx.port.workspace_id,
            "approvals": ctx.port.can_authorize,
        },
        "daemon": data["daemon"],
        "daemon_pid": data["daemon_pid"],
        "updated_at": data["updated_at"],
        "team": data["team"],
        "roles": data["roles"],
        "sessions": data["slots"],
        "board": {"counts": data["counts"], "open": board},
        "pending_reviews": data["pending_reviews"],
        "questions": data["questions"],
        "human_tasks": data["human_tasks"],
        "attention": data["attention"],
        "interrupted": data["interrupted"],
        "refusals": data["refusals"],
    }


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
    echo = _safe_echo
    echo(f"project {data['project']}  daemon: {data['daemon']}")
    echo("tasks: " + "  ".join(f"{k} {v}" for k, v in counts.items()))
    echo("roles:")
    for r in data["roles"]:
        paused = f"  PAUSED {r['paused_for_s']:.0f}s" if r["paused_for_s"] else ""
        lead = " (leader)" if r["leader"] else ""
        echo(f"  {r['role']}{lead}: {r['agent']} x{r['concurrency']} {r['permissions']}{paused}")
    if data["board"]["open"]:
        echo("open tasks:")
        for t in data["board"]["open"]:
            extra = f" [{t['baton_status']}]" if t["baton_status"] else ""
            echo(
                f"  {t['stage']:<7} {t['task_id']} {t['sender']}->{t['recipient']}: "
                f"{t['subject']}{extra}"
            )
    for r in data["pending_reviews"]:
        state = (
            "answered, applied on the next `baton up`" if r["status"] == "answered" else r["status"]
        )
        echo(
            f"review for {data['team']['human']}: {r['task_id']} ({r['subject']}) report "
            f"{r['report_id']} result {r['result']} [{state}] {r['request_id']}"
        )
    for q in data["questions"]:
        echo(f"question from {q['role']} ({q['request_id']}): {q['question']}")
    for t in data["attention"]:
        echo(
            f"needs attention: {t['task_id']} ({t['role']}): {t['note']} "
            f"[{t['issue_id']}] answer {t['attention']['request_id'] if t['attention'] else '-'}"
        )
    for r in data["refusals"]:
        echo(f"refused inbox entry {r['name']}: {r['reason']} [{r['issue_id']}]")


def _safe_echo(text: str) -> None:
    """One terminal line; task-controlled text never reaches it raw (ANSI, OSC, bidi)."""
    typer.echo(safe_agent_text(text))


@app.command()
def sessions(root: RootOption = None, as_json: JsonOption = False) -> None:
    """Per-session records: turns, tool calls, usage, files changed, last report."""
    try:
        ctx = _context(root)
    except BatonError as exc:
        raise _fail(exc) from exc
    with _open_store(ctx) as store:
        rows = [asdict(s) for s in slot_views(store)]
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
        _safe_echo(
            f"{s['name']:<8} {s['agent']:<10} {s['status']:<8} session {s['session_id'] or '-'} "
            f"turns {s['turns']:<3} tool calls {s['tool_calls_count']:<4} {tokens}; "
            f"files {len(s['files_changed'])}; last report {s['last_report_ref'] or '-'}"
        )
