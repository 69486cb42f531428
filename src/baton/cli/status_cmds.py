"""``baton status`` and ``baton sessions``: the team, its turns and its tasks at a glance.

Read-only views over the store (WAL: they read while ``baton up`` writes) and FCoP's
non-terminal stages, from :mod:`baton.team.views` and :mod:`baton.store.live_turns`;
every value an agent or a human wrote goes through
:func:`~baton.security.display.terminal_safe` (:func:`~baton.cli.coordination_cmds.line_safe`).
"""

from __future__ import annotations

from dataclasses import asdict
from datetime import UTC, datetime
from typing import Annotated, Any

import typer

from baton.app.budgets import budget_report
from baton.app.facade.budgets import SCOPE_TABLES, format_amount
from baton.app.facade.config import load_config
from baton.app.facade.fcop import CoordinationContext
from baton.app.facade.requests import RequestRecord, record_from_row
from baton.app.facade.runs import span, stall_text
from baton.app.facade.store import Store, live_turns, requests_sql
from baton.app.facade.team import ControlRefused, request_cancel, slot_views, task_views, team_view
from baton.app.facade.worktrees import WorktreeState
from baton.app.worktrees import all_trees
from baton.cli.coordination_cmds import line_safe, open_store
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

__all__ = ["app", "status_data"]

app = command_app(help="The team, its turns and its tasks at a glance.")


# Any: JSON out (``baton status --json``).
def status_data(ctx: CoordinationContext) -> dict[str, Any]:
    """Everything ``baton status --json`` prints (the web uses :func:`baton.team.views.team_view`)."""
    budget = load_config(ctx.project_dir).budget
    with open_store(ctx) as store:
        view = team_view(store, ctx.team, ctx.port)
        turns = live_turns(store)
        waiting = store.read_tx(
            lambda tx: requests_sql.list_rows(tx, states=("pending",), run_id=None, limit=200)
        )
        budgets = budget_report(store, budget, runs=3)
        kept = [t for t in all_trees(store) if t.state is WorktreeState.KEPT]
    data = view.to_json()
    roles = {s["session_id"]: s["role"] for s in data["slots"] if s.get("session_id")}
    now = datetime.now(UTC)
    return {
        "project": str(ctx.project_dir),
        "workspace": {
            "workspace_id": ctx.port.workspace_id,
            "approvals": ctx.port.can_authorize,
        },
        "daemon": data["team_loop"],  # the key scripts have read since the first release
        "daemon_pid": data["team_loop_pid"],
        "updated_at": data["updated_at"],
        "team": data["team"],
        "roles": data["roles"],
        "sessions": data["slots"],
        "turns": [{**t.to_json(now), "role": roles.get(t.session_id or "")} for t in turns],
        "board": {"counts": data["counts"], "open": data["tasks"]},
        "pending_reviews": data["pending_reviews"],
        "questions": data["questions"],
        "human_tasks": data["human_tasks"],
        "attention": data["attention"],
        "interrupted": data["interrupted"],
        "refusals": data["refusals"],
        "unsafe_files": data["unsafe_files"],
        "waiting": [_waiting(record_from_row(row), now) for row in waiting],
        "kept_trees": [
            {"task_id": t.root_task, "branch": t.branch, "reason": t.reason} for t in kept
        ],
        "budgets": budgets.to_json(),
    }


def _parse_dt(value: str) -> datetime:
    return datetime.fromisoformat(value.replace("Z", "+00:00"))


def _waiting(record: RequestRecord, now: datetime) -> dict[str, Any]:
    """A request waiting for the human: what, since when, until when (None: no deadline)."""
    left = None
    if record.expires_at:
        left = max(0.0, (_parse_dt(record.expires_at) - now).total_seconds())
    return {
        "request_id": record.request_id,
        "kind": record.kind,
        "title": record.title,
        "since": record.created_at,
        "until": record.expires_at,
        "left_s": left,
    }


def _waiting_line(w: dict[str, Any], now: datetime) -> str:
    since = span((now - _parse_dt(w["since"])).total_seconds() * 1000)
    until = (
        f" · its deadline in {span(w['left_s'] * 1000)} (until {w['until']})"
        if w["until"]
        else " · no deadline"
    )
    return (
        f"  {line_safe(w['kind'])} {line_safe(w['request_id'])}: {line_safe(w['title'])}"
        f" · waiting {since} (since {w['since']}){until}"
    )


def _security_flags(sessions: list[dict[str, Any]], role: str) -> str:
    """`` UNAPPROVED 2`` / `` AGENT APPROVES`` for a role's sessions (audit and approval mode)."""
    mine = [s for s in sessions if s.get("role") == role]
    count = sum(int(s.get("unapproved_mutations") or 0) for s in mine)
    flags = f"  UNAPPROVED MUTATIONS {count}" if count else ""
    if any(s.get("approval") == "self_approves" for s in mine):
        flags += "  AGENT APPROVES ITSELF (agent_approves)"
    return flags


def _budget_lines(budgets: dict[str, Any]) -> None:
    """Spend against the limits of every scope that has one (over ones say so)."""
    limited = [s for s in budgets["scopes"] if s["limits"]]
    if not limited:
        return
    console = out()
    console.print("budgets:", markup=False)
    for scope in limited:
        parts = []
        for dimension, limit in scope["limits"].items():
            level = next(
                (b["level"] for b in scope["breaches"] if b["dimension"] == dimension), None
            )
            mark = {"hard": " OVER", "soft": " near"}.get(level or "", "")
            spent = format_amount(dimension, scope["spend"][dimension])
            parts.append(f"{dimension} {spent} of {format_amount(dimension, limit)}{mark}")
        name = f"{SCOPE_TABLES[scope['scope']]} {terminal_safe(scope['key'], inline=True)}"
        console.print(f"  {name}  " + " · ".join(parts), markup=False)


def _turn_state(turn: dict[str, Any]) -> str:
    """``⏳ the agent has said nothing for 1m 0s (…)`` for a stalled turn, else ``working``."""
    if turn["stalled"]:
        return f"[yellow]⏳ stalled: {stall_text(turn['silent_ms'], turn['timeout_in_ms'])}[/]"
    return f"working (since {line_safe(turn['started_at'])})"


def _attention_line(t: dict[str, Any]) -> str:
    answer = t["attention"]["request_id"] if t["attention"] else "-"
    return (
        f"needs attention: {line_safe(t['task_id'])} ({line_safe(t['role'])}): {line_safe(t['note'])}"
        f" \\[{line_safe(t['issue_id'])}] · answer {line_safe(answer)}"
    )


@app.command()
def status(as_json: JsonOption = False, project: ProjectOption = None) -> None:
    """Roles, sessions, the task board, and what waits for you."""
    data = status_data(coordination(project))
    if as_json:
        print_json(data)
        return
    console = out()
    counts = data["board"]["counts"]
    console.print(f"project {line_safe(data['project'])} · baton up {line_safe(data['daemon'])}")
    console.print("tasks: " + " · ".join(f"{line_safe(k)} {v}" for k, v in counts.items()))
    console.print("roles:")
    for r in data["roles"]:
        paused = f"  paused {r['paused_for_s']:.0f}s" if r["paused_for_s"] else ""
        lead = " (leader)" if r["leader"] else ""
        flags = _security_flags(data["sessions"], r["role"])
        console.print(
            f"  {line_safe(r['role'])}{lead}: {line_safe(r['agent'])} ×{r['concurrency']}"
            f" {line_safe(r['permissions'])}{paused}{flags}"
        )
    if data["turns"]:
        console.print("turns running:")
        for t in data["turns"]:
            console.print(
                f"  {line_safe(t['role'] or 'run ' + t['run_id'])} {line_safe(t['turn_id'])}: {_turn_state(t)}"
            )
    if data["board"]["open"]:
        console.print("open tasks:")
        for t in data["board"]["open"]:
            extra = f" [{t['baton_status']}]" if t["baton_status"] else ""
            console.print(
                f"  {line_safe(t['stage']):<7} {line_safe(t['task_id'])} {line_safe(t['sender'])} → "
                f"{line_safe(t['recipient'])}: {line_safe(t['subject'])}{line_safe(extra)}"
            )
    for r in data["pending_reviews"]:
        state = (
            "answered, applied by the next `baton up`" if r["status"] == "answered" else r["status"]
        )
        console.print(
            f"review for {line_safe(data['team']['human'])}: {line_safe(r['task_id'])} "
            f"({line_safe(r['subject'])}) report {line_safe(r['report_id'])} result {line_safe(r['result'])}"
            f" \\[{line_safe(state)}] {line_safe(r['request_id'])}"
        )
    for q in data["questions"]:
        console.print(
            f"question from {line_safe(q['role'])} ({line_safe(q['request_id'])}): {line_safe(q['question'])}"
        )
    for t in data["attention"]:
        console.print(_attention_line(t))
    for t in data["kept_trees"]:
        console.print(
            f"tree {line_safe(t['task_id'])} ({line_safe(t['branch'])}): {line_safe(t['reason'] or '')}"
            " · `baton worktrees`",
            markup=False,
        )
    _budget_lines(data["budgets"])
    for r in data["refusals"]:
        console.print(
            f"refused inbox entry {line_safe(r['name'])}: {line_safe(r['reason'])} \\[{line_safe(r['issue_id'])}]"
        )
    for u in data["unsafe_files"]:
        console.print(
            f"unsafe file {line_safe(u['path'])}: {line_safe(u['reason'])} ({line_safe(u['detail'])}); not read, "
            "`baton up` quarantines it"
        )
    if data["waiting"]:
        now = datetime.now(UTC)
        console.print("waiting for you:")
        for w in data["waiting"]:
            console.print(_waiting_line(w, now), markup=False)
    if data["pending_reviews"] or data["questions"] or data["attention"] or data["waiting"]:
        console.print("answer with `baton inbox`, then `baton answer ID …`", markup=False)


@app.command()
def sessions(
    as_json: Annotated[bool, typer.Option("--json", help="NDJSON, one session per line.")] = False,
    project: ProjectOption = None,
) -> None:
    """Per-session records: turns, tool calls, usage, files changed, last report."""
    ctx = coordination(project)
    with open_store(ctx) as store:
        rows = [asdict(s) for s in slot_views(store)]
        now = datetime.now(UTC)
        stalled = {t.session_id: t.silence_ms(now) for t in live_turns(store) if t.stalled}
        reports = _last_reports(store)
    for row in rows:
        row["stalled_ms"] = stalled.get(row["session_id"]) if row["session_id"] else None
        # The slot row's own field is not kept up to date by the team loop; the tasks are.
        row["last_report_ref"] = row["last_report_ref"] or reports.get(row["role"])
    if as_json:
        print_ndjson(rows)
        return
    console = out()
    if not rows:
        console.print("no sessions yet (baton up starts them when work arrives)")
        return
    for s in rows:
        usage = s["usage"]
        tokens = (
            f"{usage['input_tokens']} in / {usage['output_tokens']} out"
            if usage["availability"] == "reported"
            else "usage unavailable"
        )
        console.print(
            f"{line_safe(s['name']):<8} {line_safe(s['agent']):<10} {line_safe(s['status']):<8} "
            f"session {line_safe(s['session_id'] or '-')} · "
            f"{plural(s['turns'], 'turn')} · {plural(s['tool_calls_count'], 'tool call')} · "
            f"{tokens} · {plural(len(s['files_changed']), 'file')} changed · "
            f"last report {line_safe(s['last_report_ref'] or '-')}"
            f"{_security_flags([s], s['role'])}"
            + (f"  STALLED {span(s['stalled_ms'])}" if s["stalled_ms"] is not None else "")
        )


def _last_reports(store: Store) -> dict[str, str]:
    """Per role, the report its newest reported task was given (from the task records)."""
    newest: dict[str, tuple[str, str]] = {}
    for task in task_views(store, limit=100_000):
        if task.role and task.report_ref:
            when = task.updated_at or ""
            if task.role not in newest or when >= newest[task.role][0]:
                newest[task.role] = (when, task.report_ref)
    return {role: ref for role, (_, ref) in newest.items()}


@app.command()
def cancel(
    slot: Annotated[str, typer.Argument(help="The role slot whose turn to cancel (DEV, DEV-2 …).")],
    task: Annotated[
        str | None, typer.Option("--task", help="Only if the slot is still on this task.")
    ] = None,
    reason: Annotated[
        str, typer.Option("--reason", help="Why: recorded with the cancel and in the task's note.")
    ] = "",
    as_json: JsonOption = False,
    project: ProjectOption = None,
) -> None:
    """Cancel a role's running turn in `baton up`; its task then needs your attention."""
    ctx = coordination(project)
    with open_store(ctx) as store:
        try:
            posted = request_cancel(store, slot, task_id=task, reason=reason, via="command line")
        except ControlRefused as exc:
            raise CommandError(
                str(exc), hint="`baton sessions` shows what each slot does"
            ) from None
    if as_json:
        print_json(posted)
        return
    out().print(
        f"asked baton up to cancel {line_safe(slot)}'s turn on {line_safe(posted['task_id'] or '-')}"
        "; the task will need your attention (`baton inbox` offers a retry)",
        markup=False,
    )
