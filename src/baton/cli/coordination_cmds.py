"""``baton init`` and ``task new|list|show``: FCoP from the shell (``status`` and
``sessions`` are :mod:`baton.cli.status_cmds`).

A thin typer layer over :mod:`baton.fcop_port` and :mod:`baton.team.views`:
every write goes through the ``fcop`` library (``task new`` is T1 as the human),
every read is a directory listing plus Core reads of the non-terminal stages,
and the team loop's own records come from the store (WAL: these commands read
while ``baton up`` writes). The project is found like every
command finds it (:mod:`baton.cli.project`); errors are the shared one line
(:mod:`baton.cli.shared`); task subjects, notes and bodies are agent or human
text and go through :func:`~baton.security.display.terminal_safe`.

Length: one command group (``init`` and ``task new|list|show|drop``) and the body reading
and task lookup its commands share.
"""

from __future__ import annotations

import sys
from contextlib import AbstractContextManager
from pathlib import Path
from typing import Annotated, Any

import typer
from rich.table import Table

from baton.app import Baton
from baton.app.budgets import task_spend
from baton.app.facade.budgets import Spend, format_amount
from baton.app.facade.config import load_config
from baton.app.facade.fcop import (
    STAGES,
    CoordinationContext,
    TaskInfo,
    init_project,
    open_tasks,
    subject_problem,
)
from baton.app.facade.store import Store
from baton.app.facade.team import TaskRecord, task_views
from baton.cli.project import ProjectOption, coordination, start_dir
from baton.cli.shared import (
    EXIT_USAGE,
    CommandError,
    JsonOption,
    command_app,
    out,
    plural,
    print_json,
    print_ndjson,
)
from baton.security.display import terminal_safe

__all__ = ["app", "find_task", "line_safe", "open_store"]

app = command_app(help="FCoP coordination: the team, its tasks and sessions.", no_args_is_help=True)
task_app = command_app(help="FCoP tasks.", no_args_is_help=True)
app.add_typer(task_app, name="task")


def line_safe(text: object) -> str:
    """A value inside one of baton's lines, made safe (markup string)."""
    return terminal_safe(str(text), inline=True, mark=False)


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
def init(project: ProjectOption = None) -> None:
    """Make this repository a baton project: an FCoP 4.0 workspace (fcop/) and a team in
    baton.toml (every role on the built-in agent)."""
    result = init_project(start_dir(project))
    console = out()
    ws = result.workspace
    if result.workspace_created:
        console.print(
            f"created FCoP 4.0 workspace {line_safe(result.project_dir / 'fcop')} ({line_safe(ws.workspace_id)})"
        )
    else:
        console.print(f"kept existing FCoP 4.0 workspace ({line_safe(ws.workspace_id)})")
    if not ws.authority_adopted:
        typer.echo(
            "baton: warning: this workspace did not adopt baton's evaluator Profile when it was "
            "created; tasks can be created, claimed, reported and submitted, but not approved "
            "(T4-T7). Move fcop/ aside and run `baton init` again to enable approvals.",
            err=True,
        )
    config = {"written": "wrote", "appended": "added [team] to", "kept": "kept"}[result.config]
    console.print(f"{config} {line_safe(result.project_dir / 'baton.toml')}")
    if _ignore_state_dir(result.project_dir):
        console.print(
            f"added .baton/ to {line_safe(result.project_dir / '.gitignore')} (keys and the store)"
        )
    team = result.team
    roles = ", ".join(
        f"{r.name}{' (leader)' if r.is_leader else ''}={r.agent}" for r in team.roles.values()
    )
    console.print(
        f"team {line_safe(team.name)}: {line_safe(roles)}; human: {line_safe(team.human)}"
    )
    commit = _to_commit(result.project_dir)
    if commit:
        console.print(
            f"commit these so the team's setup travels with the repository: "
            f"git add {' '.join(commit)} && git commit -m 'baton init' "
            "(.baton/ stays out: it holds keys and the store)",
            markup=False,
        )
    console.print(
        'next: baton task new --to PM --subject "…" --body-file TASK.md, then baton up '
        "(`baton task new -h` shows how to write TASK.md)",
        markup=False,
    )


def _to_commit(project_dir: Path) -> list[str]:
    """What ``baton init`` made that git does not have yet (nothing outside a git work tree)."""
    import subprocess

    names = ["baton.toml", "fcop", ".gitignore"]
    try:
        status = subprocess.run(
            ["git", "status", "--porcelain", "--untracked-files=normal", "--", *names],
            cwd=project_dir,
            capture_output=True,
            text=True,
            timeout=20,
            check=False,
        )
    except (OSError, subprocess.TimeoutExpired):
        return []
    if status.returncode != 0:
        return []  # not a git work tree (or no git): nothing to say
    changed = {line[3:].strip().rstrip("/").split("/", 1)[0] for line in status.stdout.splitlines()}
    return [n for n in names if n in changed]


TASK_BODY_HELP = """Create a task as the human (FCoP T1 through the fcop library).

The body (Markdown, --body-file FILE or - for stdin) is what the role is asked to do. A
model agent reads it as prose. The built-in agent runs what it can recognise:

- [ ] @ROLE subject: delegate a child task to ROLE; the indented lines under it are its
body. after: TASK-… (or the subject of an earlier item) makes it wait for that one.

A fenced ```sh block is one step (a command the role runs, asked for permission like
any other); ```file PATH writes a file; ```mcp server.tool calls a tool.

An empty body is refused: a task needs something to do (without --body-file, the
subject itself is the body). Example:

Release check.
- [ ] @QA Run the smoke tests
  ```sh
  pytest -q
  ```
"""


@task_app.command("new", help=TASK_BODY_HELP)
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
    as_json: JsonOption = False,
    project: ProjectOption = None,
) -> None:
    ctx = coordination(project)
    if ctx.team.role_for(to) is None:
        known = ", ".join(ctx.team.role_names)
        raise CommandError(f"{to!r} is not a role of this team", hint=f"the roles are {known}")
    problem = subject_problem(subject)
    if problem is not None:
        raise CommandError(
            problem,
            hint='give --subject one line naming the work, e.g. "Release check"',
            code=EXIT_USAGE,
        )
    subject = subject.strip()
    body = subject if body_file is None else _read_body(body_file)
    if not body.strip():
        where = "stdin" if str(body_file) == "-" else str(body_file)
        raise CommandError(
            f"the task body ({where}) is empty: the role would have nothing to do",
            hint="write what to do in it (`baton task new -h` shows the format)",
            code=EXIT_USAGE,
        )
    created = ctx.port.create_task(
        sender=ctx.team.human,
        recipient=to,
        subject=subject,
        body=body,
        operation_id=operation_id,
    )
    if as_json:
        print_json(
            {
                "task_id": created.task_id,
                "existing": created.existing,
                "operation_id": created.operation_id,
                "recipient": to,
            }
        )
        return
    note = " (already existed: same request)" if created.existing else ""
    out().print(f"{line_safe(created.task_id)} → {line_safe(to)}{note}")


@task_app.command("list")
def task_list(
    all_stages: Annotated[
        bool, typer.Option("--all", help="Also done and archived tasks.")
    ] = False,
    as_json: Annotated[bool, typer.Option("--json", help="NDJSON, one task per line.")] = False,
    project: ProjectOption = None,
) -> None:
    """The tasks on the board (inbox, active, review; --all for every stage)."""
    ctx = coordination(project)
    state = _records(ctx)
    stages = STAGES if all_stages else ("inbox", "active", "review")
    rows = [_task_row(t, state) for t in open_tasks(ctx.port, stages).tasks]  # screened first
    if as_json:
        print_ndjson(rows)
        return
    console = out()
    if not rows:
        console.print("no open tasks" + ("" if all_stages else " (--all shows done ones)"))
        return
    table = Table(box=None, pad_edge=False, header_style="bold")
    table.add_column("task", no_wrap=True, min_width=len(rows[0]["task_id"]))
    table.add_column("stage", no_wrap=True)
    table.add_column("from → to", no_wrap=True)
    table.add_column("subject", overflow="fold", ratio=1)
    for row in rows:
        state_note = f" [{row['baton_status']}]" if row["baton_status"] else ""
        table.add_row(
            line_safe(row["task_id"]),
            line_safe(row["stage"]),
            f"{line_safe(row['sender'])} → {line_safe(row['recipient'])}",
            line_safe(row["subject"]) + line_safe(state_note),
        )
    console.print(table)
    console.print(f"{plural(len(rows), 'task')} · `baton task show ID` for one", style="dim")


def _read_body(body_file: Path) -> str:
    """The body from a file or stdin (``-``), or one line saying why it cannot be read."""
    if str(body_file) == "-":
        data = sys.stdin.buffer.read()
        where = "stdin"
    else:
        where = str(body_file)
        try:
            data = body_file.read_bytes()
        except FileNotFoundError:
            raise CommandError(
                f"no body file {where}", hint="check the path (or --body-file - reads stdin)"
            ) from None
        except IsADirectoryError:
            raise CommandError(
                f"the body file {where} is a directory", hint="name a file"
            ) from None
        except OSError as exc:
            reason = (exc.strerror or str(exc)).lower()
            raise CommandError(
                f"cannot read the body file {where}: {reason}", hint="check its permissions"
            ) from None
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise CommandError(
            f"the body {where} is not UTF-8 text (byte {exc.start + 1} is not)",
            hint="save it as UTF-8 (a task body is Markdown text)",
        ) from None


def find_task(ctx: CoordinationContext, prefix: str) -> TaskInfo:
    """A task by its whole id or a unique prefix (``TASK-`` may be left out)."""
    wanted = prefix.strip()
    if not wanted.upper().startswith("TASK-"):
        wanted = "TASK-" + wanted
    wanted = wanted.lower()
    names = {
        path.stem
        for stage in STAGES
        for path in ctx.port.stage_dir(stage).glob("TASK-*.md")
        if path.stem.lower().startswith(wanted)
    }
    if not names:
        raise CommandError(f"no task {prefix!r} in this project", hint="`baton task list --all`")
    if len(names) > 1:
        shown = ", ".join(sorted(names)[:3])
        raise CommandError(f"task id prefix {prefix!r} is ambiguous ({shown}, …)", hint="type more")
    return ctx.port.read_task(names.pop())


@task_app.command("show")
def task_show(
    task_id: Annotated[str, typer.Argument(help="Task id or a unique prefix.")],
    as_json: JsonOption = False,
    project: ProjectOption = None,
) -> None:
    """One task: where it is, who has it, its children, reports and body."""
    ctx = coordination(project)
    task = find_task(ctx, task_id)
    state = _records(ctx)
    config = load_config(ctx.project_dir)
    with open_store(ctx) as store:
        spend = task_spend(store, config.budget, task.task_id)
    children = ctx.port.children(task.task_id)
    reports = ctx.port.reports_for(task.task_id)
    data = _task_row(task, state) | {
        "body": task.body,
        "priority": task.priority,
        "created_at": task.created_at,
        "children": [
            {"task_id": c.task_id, "recipient": c.recipient, "stage": c.stage, "subject": c.subject}
            for c in children
        ],
        "reports": [
            {
                "report_id": r.report_id,
                "sender": r.sender,
                "result": r.result,
                "report_kind": r.report_kind,
                "created_at": r.created_at,
            }
            for r in reports
        ],
        "branch": _branch_of(ctx, task.task_id),
        "budget": spend,
    }
    if as_json:
        print_json(data)
        return
    console = out()
    console.print(f"[bold]{line_safe(task.task_id)}[/]  {line_safe(task.subject)}")
    branch = data["branch"]
    if branch is not None:
        stat = branch.get("stat")
        shown = f" · {stat['files']} file(s) +{stat['added']} -{stat['removed']}" if stat else ""
        console.print(
            f"branch {line_safe(branch['branch'])} → {line_safe(branch['base'])} "
            f"[{line_safe(branch['state'])}]{shown}"
            + (f" · tree of {line_safe(branch['root'])}" if branch["root"] != task.task_id else "")
        )
    note = f" [{data['baton_status']}]" if data["baton_status"] else ""
    console.print(
        f"stage {line_safe(task.stage)}{line_safe(note)} · {line_safe(task.sender)} → {line_safe(task.recipient)}"
        f" · priority {line_safe(task.priority)}"
        + (f" · parent {line_safe(task.parent)}" if task.parent else "")
    )
    console.print(_spend_line(spend, config.budget.soft), markup=False)
    for child in data["children"]:
        console.print(
            f"  child {line_safe(child['task_id'])} → {line_safe(child['recipient'])} \\[{line_safe(child['stage'])}]"
            f" {line_safe(child['subject'])}"
        )
    for report in data["reports"]:
        console.print(
            f"  report {line_safe(report['report_id'])} from {line_safe(report['sender'])}:"
            f" {line_safe(report['result'])} ({line_safe(report['report_kind'])})"
        )
    console.print()
    console.print(terminal_safe(task.body.rstrip() or "(no body)"))


def _branch_of(ctx: CoordinationContext, task_id: str) -> dict[str, Any] | None:
    """The task's tree's branch and its diffstat (None: the tree has no branch)."""
    from baton.app.facade.worktrees import GitError
    from baton.app.worktrees import NoTree, change_of, tree_of

    with open_store(ctx) as store:
        root, record = tree_of(store, task_id)
    if record is None:
        return None
    data: dict[str, Any] = {
        "root": root,
        "branch": record.branch,
        "base": record.base_branch,
        "state": record.state.value,
        "head": record.head_commit,
        "worktree": record.path if record.worktree.exists() else None,
        "salvage_ref": record.salvage_ref,
        "stat": None,
    }
    if record.state.value == "live":
        try:
            change = change_of(ctx.project_dir, record)
        except (NoTree, GitError):
            return data  # git could not tell: the branch is still named
        data["stat"] = {
            "files": len(change.files),
            "added": change.added,
            "removed": change.removed,
            "commits": len(change.commits),
        }
    return data


@task_app.command("drop")
def task_drop(
    task_id: Annotated[str, typer.Argument(help="A task of the tree to drop (id or prefix).")],
    reason: Annotated[str, typer.Option("--reason", help="Why (kept with the tree).")] = "",
    project: ProjectOption = None,
) -> None:
    """Abandon a task tree: its turns stop, nothing runs on it again, its work is kept.

    Its branch's exact head (uncommitted work included) is saved under
    refs/baton/salvage/TASK before its worktree goes: `baton salvage restore` brings it
    back as a branch.
    """
    import asyncio

    from baton.app.worktrees import DropPosted, drop_tree

    ctx = coordination(project)
    task = find_task(ctx, task_id)
    result = asyncio.run(drop_tree(ctx.project_dir, task.task_id, reason))
    console = out()
    if isinstance(result, DropPosted):
        console.print(
            f"{line_safe(task.task_id)}: baton up is running: it drops the tree now "
            "(see `baton worktrees`)"
        )
        return
    console.print(
        f"dropped the tree of {line_safe(result.root)}: "
        f"{plural(len(result.dropped), 'task')} will not run again"
    )
    if result.worktree is not None and result.worktree.salvage_ref:
        console.print(
            f"its work is kept under {line_safe(result.worktree.salvage_ref)} "
            f"(baton salvage restore {line_safe(result.root)})"
        )


def _spend_line(budget: dict[str, Any], soft: float) -> str:
    """``spent $0.42 · 12,345 tokens (its tree: per_task T-1  cost_usd $1.20 of $5.00)``."""
    own = budget.get("spend")
    mine = "spent nothing yet" if own is None else f"spent {Spend.from_json(own).describe()}"
    tree = budget["tree"]
    limits = tree["limits"]
    if not limits:
        return mine
    parts = []
    for dimension, limit in limits.items():
        spent = format_amount(dimension, tree["spend"][dimension])
        over = any(b["dimension"] == dimension and b["level"] == "hard" for b in tree["breaches"])
        parts.append(
            f"{dimension} {spent} of {format_amount(dimension, limit)}{' OVER' if over else ''}"
        )
    return f"{mine} · its tree {terminal_safe(tree['key'])}: " + ", ".join(parts)


def open_store(ctx: CoordinationContext) -> AbstractContextManager[Store]:
    """The project's store for reading (the composition root's reading view)."""
    return Baton.reading(config=load_config(ctx.project_dir))


def _records(ctx: CoordinationContext) -> dict[str, TaskRecord]:
    with open_store(ctx) as store:
        return {r.task_id: r for r in task_views(store, limit=100_000)}


def _task_row(task: TaskInfo, records: dict[str, TaskRecord]) -> dict[str, Any]:
    record = records.get(task.task_id)
    return {
        "task_id": task.task_id,
        "stage": task.stage,
        "recipient": task.recipient,
        "sender": task.sender,
        "subject": task.subject,
        "parent": task.parent,
        "attempt_id": task.attempt_id,
        "baton_status": record.state.value if record else None,
        "turns": record.turns if record else 0,
        "report_ref": record.report_ref if record else None,
        "note": (record.reason or "") if record else "",
    }
