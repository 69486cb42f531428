"""``baton budget``: spend against the limits of ``[budget]``, and raising a limit.

``show`` lists every scope that spent (task trees, roles, credentials' windows, the
latest runs) against its effective limits; ``raise`` lifts a limit (stored, with a
``budget.raised`` event), which a running ``baton up`` notices at once: the TASKs the
old limit parked go on. The usage ledger behind both: ``docs/budgets.md``.
"""

from __future__ import annotations

import asyncio
from typing import Annotated, Any

import typer

from baton.app.facade.budgets import (
    SCOPE_TABLES,
    SCOPES,
    Limits,
    ScopeKey,
    ScopeStanding,
    format_amount,
)
from baton.cli.project import ProjectOption, project_config, start_dir
from baton.cli.shared import (
    EXIT_USAGE,
    CommandError,
    JsonOption,
    command_app,
    out,
    plural,
    print_json,
)
from baton.security.display import terminal_safe

__all__ = ["app", "standing_line"]

app = command_app()
budget_app = command_app(
    help="Spend against the limits of [budget] (show), and raising a limit (raise).",
    no_args_is_help=True,
)
app.add_typer(budget_app, name="budget")


def standing_line(standing: ScopeStanding, soft: float) -> str:
    """``per_task T-1  cost_usd $1.20 of $1.00 OVER · turns 4 of 40`` (terminal-safe)."""
    spend, limits = standing.spend, standing.limits
    levels = {b.dimension: b.level for b in standing.breaches(soft)}
    parts = []
    for dimension, limit in limits.items():
        mark = {"hard": " OVER", "soft": " near"}.get(levels.get(dimension, ""), "")
        spent = format_amount(dimension, spend.get(dimension))
        parts.append(f"{dimension} {spent} of {format_amount(dimension, limit)}{mark}")
    if not parts:
        parts.append(spend.describe())  # says itself what went unmetered
    else:
        if spend.estimated:
            parts.append("dollars partly estimated")
        if spend.unmetered:
            parts.append(f"{plural(spend.unmetered, 'turn')} without usage")
    scope = standing.scope
    return f"{SCOPE_TABLES[scope.kind]} {terminal_safe(scope.key)}  " + " · ".join(parts)


@budget_app.command("show")
def show(
    runs: Annotated[int, typer.Option(help="How many of the latest runs to list.")] = 5,
    as_json: JsonOption = False,
    project: ProjectOption = None,
) -> None:
    """Spend of every task tree, role, window and recent run against its limits."""
    from baton.app import Baton
    from baton.app.budgets import budget_report

    config = project_config(project)
    with Baton.reading(config=config) as store:
        report = budget_report(store, config.budget, runs=runs)
    if as_json:
        print_json(report.to_json())
        return
    console = out()
    budget = config.budget
    window = f", window {budget.window.label}" if budget.window else ""
    head = (
        f"budgets (soft at {budget.soft:.0%}{window})" if budget.enabled else "no [budget] limits"
    )
    console.print(head + "; spend from the usage ledger:", markup=False)
    if not report.standings:
        console.print("  nothing spent yet", markup=False)
    for standing in report.standings:
        console.print("  " + standing_line(standing, budget.soft), markup=False)


@budget_app.command("raise")
def raise_(
    scope: Annotated[str, typer.Argument(help="run, task (a task tree), role or window.")],
    key: Annotated[
        str, typer.Argument(help="The run id, the tree's root TASK, the role, the credential.")
    ],
    tokens: Annotated[int | None, typer.Option(help="The new tokens limit.")] = None,
    cost_usd: Annotated[float | None, typer.Option(help="The new dollars limit.")] = None,
    turns: Annotated[int | None, typer.Option(help="The new turns limit.")] = None,
    tool_calls: Annotated[int | None, typer.Option(help="The new tool calls limit.")] = None,
    minutes: Annotated[float | None, typer.Option(help="The new minutes limit.")] = None,
    as_json: JsonOption = False,
    project: ProjectOption = None,
) -> None:
    """Raise a limit for one scope (`baton up` lets what it parked go on)."""
    if scope not in SCOPES:
        raise CommandError(
            f"{scope!r} is not a budget scope",
            hint=f"use one of {', '.join(SCOPES)}",
            code=EXIT_USAGE,
        )
    values: dict[str, Any] = {
        "tokens": tokens,
        "cost_usd": cost_usd,
        "turns": turns,
        "tool_calls": tool_calls,
        "minutes": minutes,
    }
    table = {k: v for k, v in values.items() if v is not None}
    limits = Limits.from_table(table, f"baton budget raise {scope}")
    config = project_config(project)
    raised = asyncio.run(_raise(config, ScopeKey(scope, key), limits, project))
    if as_json:
        print_json({"raised": [r.model_dump() for r in raised]})
        return
    for r in raised:
        out().print(
            f"raised {SCOPE_TABLES[r.scope]} {terminal_safe(r.key)} {r.dimension} to "
            f"{format_amount(r.dimension, r.limit)} (was {format_amount(r.dimension, r.previous)};"
            f" spent {format_amount(r.dimension, r.spend)}); a running `baton up` goes on",
            markup=False,
        )


async def _raise(config: Any, scope: ScopeKey, limits: Limits, project: Any) -> list[Any]:
    from baton.app import Baton
    from baton.app.budgets import raise_limits

    cwd = config.project_dir or start_dir(project)
    async with (
        Baton.open(config=config) as baton,
        baton.run(kind="budget", agent="human", cwd=cwd) as run,
    ):
        raised = await raise_limits(
            baton.store,
            config.budget,
            scope,
            limits,
            by="cli",
            commit=lambda payloads, fn: run.emitter.commit(payloads, fn),
        )
        run.status = "completed"
        return raised
