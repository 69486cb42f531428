"""``baton diff``, ``baton worktrees`` and ``baton salvage restore``: task trees' branches.

Each task tree a human filed works on its own branch in its own worktree
(``docs/worktrees.md``). These commands read what the team records and what git says
(:mod:`baton.app.worktrees`); diff text is the agents' output, so every line goes
through :func:`~baton.security.display.terminal_safe` before it reaches a terminal.
"""

from __future__ import annotations

import asyncio
import contextlib
from pathlib import Path
from typing import Annotated, Any

import typer
from rich.table import Table

from baton.app.facade.requests import InvalidAnswer, RequestRecord, ReviewRequest
from baton.app.facade.store import Store
from baton.app.facade.worktrees import GitError, Preflight, TreeChange, WorktreeRecord
from baton.app.worktrees import (
    NoTree,
    all_trees,
    change_of,
    preflight_of,
    restore_tree,
    tree_of,
)
from baton.cli.coordination_cmds import find_task, line_safe, open_store
from baton.cli.project import ProjectOption, coordination
from baton.cli.shared import (
    CommandError,
    JsonOption,
    command_app,
    out,
    plural,
    print_json,
    print_ndjson,
)
from baton.security.display import terminal_safe

__all__ = ["app", "change_json", "rebase_reason"]

app = command_app(help="Task trees on their own branches.", no_args_is_help=True)
salvage_app = command_app(help="Work kept from dropped task trees.", no_args_is_help=True)
app.add_typer(salvage_app, name="salvage")


# Any: JSON out (``--json``, and the web serves it).
def change_json(change: TreeChange, preflight: Preflight | None) -> dict[str, Any]:
    """A change as ``--json`` prints it (and the web serves it)."""
    return {
        "branch": change.branch,
        "base": change.base,
        "merge_base": change.merge_base,
        "head": change.head,
        "added": change.added,
        "removed": change.removed,
        "files": [
            {
                "status": f.status,
                "path": f.path,
                "old_path": f.old_path,
                "added": f.added,
                "removed": f.removed,
            }
            for f in change.files
        ],
        "commits": [
            {"commit": c.commit, "author": c.author, "subject": c.subject} for c in change.commits
        ],
        "diff": change.diff,
        "note": change.note,
        "preflight": None
        if preflight is None
        else {
            "base_tip": preflight.base_tip,
            "clean": preflight.clean,
            "base_conflicts": list(preflight.base_conflicts),
            "branch_conflicts": {b: list(p) for b, p in preflight.branch_conflicts.items()},
        },
    }


def rebase_reason(
    project: Path | None, store: Store, record: RequestRecord, note: str | None
) -> str:
    """``baton answer REQ --rebase``: the reason a review is sent back to rebase with, the
    merge preflight's prompt against the base tip now (the conflicting files named), then
    ``note``. The role owning the branch reads it in its revision prompt."""
    doc = record.document
    if not isinstance(doc, ReviewRequest):
        raise InvalidAnswer(f"--rebase sends a review back; this is a {record.kind} request")
    project_dir = coordination(project).project_dir
    _, tree = tree_of(store, doc.task_id)
    if tree is None:
        raise InvalidAnswer(
            f"--rebase: {doc.task_id} has no branch of its own; send it back with --reject"
        )
    try:
        preflight = preflight_of(project_dir, store, tree)
    except (GitError, NoTree) as exc:
        raise InvalidAnswer(f"--rebase: the merge preflight could not run: {exc}") from exc
    if preflight is None or preflight.clean:
        raise InvalidAnswer(
            f"--rebase: {tree.branch} merges cleanly into {tree.base_branch} "
            "(nothing to rebase: --approve merges it, --reject --reason sends it back)"
        )
    prompt = preflight.rebase_prompt(tree.base_branch)
    return f"{prompt}\n\n{note}" if note and note.strip() else prompt


def _record(project: Path | None, task: str) -> tuple[Path, WorktreeRecord]:
    ctx = coordination(project)
    info = find_task(ctx, task)
    with open_store(ctx) as store:
        _, record = tree_of(store, info.task_id)
    if record is None:
        raise CommandError(
            f"{info.task_id} has no branch of its own",
            hint='its tree has not started, or [team] isolation is "none" (see docs/worktrees.md)',
        )
    return ctx.project_dir, record


def _stat_lines(change: TreeChange) -> list[str]:
    width = max((len(f.path) for f in change.files), default=0)
    lines = []
    for f in change.files:
        counts = "binary" if f.binary else f"+{f.added} -{f.removed}"
        moved = f" (from {line_safe(f.old_path)})" if f.old_path else ""
        lines.append(f"  {f.status} {line_safe(f.path.ljust(width))}  {counts}{moved}")
    return lines


def _diff_line(line: str) -> str:
    safe = terminal_safe(line, markup=True, mark=False)
    if line.startswith(("+++", "---")):
        return f"[bold]{safe}[/]"
    if line.startswith("+"):
        return f"[green]{safe}[/]"
    if line.startswith("-"):
        return f"[red]{safe}[/]"
    if line.startswith("@@"):
        return f"[cyan]{safe}[/]"
    return safe


@app.command("diff")
def diff(
    task: Annotated[str, typer.Argument(help="A task of the tree (id or unique prefix).")],
    stat: Annotated[
        bool, typer.Option("--stat", help="Only the files and their +/- lines.")
    ] = False,
    as_json: JsonOption = False,
    project: ProjectOption = None,
) -> None:
    """A task tree's change against its base: files, commits, the diff, the merge preflight."""
    project_dir, record = _record(project, task)
    try:
        change = change_of(project_dir, record, full=not stat)
    except NoTree as exc:
        raise CommandError(str(exc)) from exc
    with open_store(coordination(project)) as store:
        preflight = preflight_of(project_dir, store, record)
    if as_json:
        print_json(
            {"task_id": record.root_task, "state": record.state.value}
            | change_json(change, preflight)
        )
        return
    console = out()
    console.print(
        f"[bold]{line_safe(change.branch)}[/] → {line_safe(change.base)} · "
        f"{plural(len(change.files), 'file')} +{change.added} -{change.removed} · "
        f"{plural(len(change.commits), 'commit')} · {record.state.value}"
    )
    for line in _stat_lines(change):
        console.print(line)
    if preflight is not None:
        if preflight.base_conflicts:
            console.print(
                f"[red]conflicts with {line_safe(change.base)}[/] in: "
                + ", ".join(line_safe(p) for p in preflight.base_conflicts)
            )
        else:
            console.print(f"[green]merges cleanly into {line_safe(change.base)}[/]")
        for branch, paths in sorted(preflight.branch_conflicts.items()):
            console.print(
                f"overlaps {line_safe(branch)} in: " + ", ".join(line_safe(p) for p in paths)
            )
    if stat:
        return
    console.print()
    if change.diff is None:
        console.print(line_safe(change.note))
        return
    for line in change.diff.splitlines():
        console.print(_diff_line(line), highlight=False, soft_wrap=True)


@app.command("worktrees")
def worktrees(as_json: JsonOption = False, project: ProjectOption = None) -> None:
    """Every task tree's branch: live, merged, dropped (its work kept) or restored."""
    ctx = coordination(project)
    with open_store(ctx) as store:
        trees = all_trees(store)
    rows = [
        {
            "task_id": t.root_task,
            "state": t.state.value,
            "branch": t.branch,
            "worktree": t.path if t.worktree.exists() else None,
            "base": t.base_branch,
            "head": t.head_commit,
            "salvage_ref": t.salvage_ref,
            "reason": t.reason,
            "updated_at": t.updated_at,
        }
        for t in trees
    ]
    if as_json:
        print_ndjson(rows)
        return
    console = out()
    if not rows:
        console.print("no task tree has a branch yet (see docs/worktrees.md)")
        return
    table = Table(box=None, show_edge=False, pad_edge=False)
    for column in ("task", "state", "branch", "where"):
        table.add_column(column, overflow="fold")
    for row in rows:
        where = row["salvage_ref"] if row["state"] in ("salvaged", "restored") else row["worktree"]
        if where and row["worktree"]:
            with contextlib.suppress(ValueError):  # outside the project: shown whole
                where = str(Path(where).relative_to(ctx.project_dir))
        table.add_row(
            line_safe(row["task_id"]),
            row["state"],
            line_safe(row["branch"]),
            line_safe(where or "-"),
        )
    console.print(table)
    console.print(
        "see a change: baton diff TASK · bring dropped work back: baton salvage restore TASK"
    )


@salvage_app.command("restore")
def salvage_restore(
    task: Annotated[str, typer.Argument(help="A task of the dropped tree (id or prefix).")],
    branch: Annotated[
        str | None, typer.Option("--branch", help="The branch to create (default: its old name).")
    ] = None,
    project: ProjectOption = None,
) -> None:
    """Bring a dropped tree's work back as a branch (its exact head when it was dropped)."""
    ctx = coordination(project)
    info = find_task(ctx, task)
    try:
        record, name = asyncio.run(restore_tree(ctx.project_dir, info.task_id, branch))
    except NoTree as exc:
        raise CommandError(str(exc)) from exc
    out().print(
        f"{line_safe(record.root_task)}: its work is on branch {line_safe(name)} "
        f"(from {line_safe(record.salvage_ref or '')})"
    )
