"""The team loop and its budgets: a TASK parked at a limit and let go on by a raise, claims
deferred by a window until it reopens, and a turn cut off mid-way still parked after.

The fake sessions do not meter themselves (the runner's meter is ``tests/runner``): the
spend is charged to the store's ledger as the meter would, and the loop reads it from
there, as after a restart.
"""

from __future__ import annotations

import asyncio
import itertools
import time
from typing import Any

from baton.app.budgets import raise_limits
from baton.budgets.limits import BudgetConfig, Limits, parse_window
from baton.budgets.rules import ScopeKey
from baton.events.model import UsageCounted
from baton.fcop_port.port import FcopPort
from baton.store import budget_sql
from baton.store.tx import Tx
from baton.team.budgets import TeamBudgets
from baton.team.loop import TeamLoop
from baton.team.states import TaskState
from baton.team.views import task_views
from tests.coordination.fakes import Agent, FakeFactory, runbook_agent
from tests.team.conftest import WAIT, Team
from tests.team.test_loop import review_request

_seq = itertools.count(1)


async def charge(
    team: Team,
    *,
    cost: float,
    tree: str | None = None,
    role: str | None = None,
    credential: str = "profile:builtin",
    at: float | None = None,
) -> None:
    """One ledger row, as the meter commits it (with its event; the loop reads the row)."""
    entry = UsageCounted(
        entry="usage",
        profile="builtin",
        credential=credential,
        tree=tree,
        task_id=tree,
        role=role,
        cost_usd=cost,
        cost_provenance="derived",
    )
    row = budget_sql.LedgerRow("run-meter", next(_seq), at or time.time(), None, None)

    def write(tx: Tx) -> None:
        budget_sql.charge(tx, row, entry)

    await team.store.write(write)


def budgeted(team: Team, factory: FakeFactory, budget: BudgetConfig, **keys: str) -> TeamLoop:
    """A team loop as ``baton up`` builds it, with ``budget`` and roles' credential keys."""
    base = team.loop(factory)
    return TeamLoop(
        port=base.port,
        team=base.team,
        factory=factory,
        store=team.store,
        journal=base.journal,
        run_id=base.run_id,
        state_dir=team.state_dir,
        budgets=TeamBudgets(budget, base.run_id, keys),
    )


def record(team: Team, task_id: str) -> Any:
    return {r.task_id: r for r in task_views(team.store)}[task_id]


def events(team: Team, event_type: str) -> list[dict[str, Any]]:
    import json

    rows = team.store.read_tx(
        lambda tx: tx.all("SELECT json FROM events WHERE type = ? ORDER BY rowid", (event_type,))
    )
    return [json.loads(r[0])["payload"] for r in rows]


async def test_a_task_over_per_task_is_parked_and_goes_on_after_a_raise(
    team: Team, port: FcopPort
) -> None:
    root = port.create_task(sender="ADMIN", recipient="DEV", subject="Fix it", body="Fix it.")
    budget = BudgetConfig(per_task=Limits(cost_usd=1.0))
    spent: list[str] = []

    def expensive(agent: Agent, prompt: str) -> None:
        spent.append(prompt)  # a turn that spends past the limit and files nothing
        asyncio.run(charge(team, cost=1.5, tree=root.task_id, role="DEV"))

    factory = team.factory({"DEV": expensive})
    await asyncio.wait_for(budgeted(team, factory, budget).run(until_idle=True), WAIT)
    parked = record(team, root.task_id)
    assert parked.state is TaskState.NEEDS_BUDGET
    assert "budget: per_task" in parked.reason and "$1.50 of $1.00" in parked.reason
    assert "baton budget raise task" in parked.reason
    assert len(spent) == 1, "no turn after the limit"
    [exceeded] = events(team, "budget.exceeded")
    assert exceeded["action"] == "parked" and exceeded["task_id"] == root.task_id

    await raise_limits(
        team.store,
        budget,
        ScopeKey("task", root.task_id),
        Limits(cost_usd=5.0),
        by="test",
        commit=lambda payloads, fn: budgeted(team, factory, budget).journal.commit(payloads, fn),
    )
    [raised] = events(team, "budget.raised")
    assert (raised["previous"], raised["limit"], raised["spend"]) == (1.0, 5.0, 1.5)
    factory.scripts["DEV"] = runbook_agent
    await asyncio.wait_for(budgeted(team, factory, budget).run(until_idle=True), WAIT)
    assert port.read_task(root.task_id).stage == "review", "it went on and reported"
    assert record(team, root.task_id).state is TaskState.IN_REVIEW
    request = await review_request(team, root.task_id)
    summary = request.document.summary  # type: ignore[union-attr]
    assert "\nCost: $1.50, 0 tokens" in summary, "the review shows what the task cost"
    assert "(per_task limit: cost_usd $5.00)" in summary


async def test_a_window_over_its_soft_limit_defers_claims_until_it_reopens(
    team: Team, port: FcopPort
) -> None:
    window = parse_window("1m")
    budget = BudgetConfig(per_window=Limits(cost_usd=1.0), window=window)
    spent_at = time.time() - 52.0  # leaves the window in 8 s
    await charge(team, cost=1.0, credential="key:shared", at=spent_at)
    reopens = spent_at + window.seconds
    root = port.create_task(sender="ADMIN", recipient="DEV", subject="Later", body="Later.")
    claimed: list[float] = []

    def work(agent: Agent, prompt: str) -> None:
        claimed.append(time.time())
        runbook_agent(agent, prompt)

    factory = team.factory({"DEV": work})
    loop = budgeted(team, factory, budget, DEV="key:shared")
    running = asyncio.create_task(loop.run())
    try:
        async with asyncio.timeout(WAIT):
            while not claimed:
                await asyncio.sleep(0.05)
    finally:
        loop.stop()
        await asyncio.wait_for(running, WAIT)
    assert claimed[0] >= reopens, "claimed only once the window reopened"
    [reset] = events(team, "budget.window_reset")
    assert reset["key"] == "key:shared" and reset["window"] == "1m" and reset["spend"] < 1.0
    assert port.read_task(root.task_id).claims == 1


async def test_a_window_still_spent_does_not_claim(team: Team, port: FcopPort) -> None:
    budget = BudgetConfig(per_window=Limits(cost_usd=1.0), window=parse_window("5h"))
    await charge(team, cost=0.9, credential="key:shared")  # past the soft 80 %
    root = port.create_task(sender="ADMIN", recipient="DEV", subject="Not now", body="Later.")
    factory = team.factory()
    await asyncio.wait_for(
        budgeted(team, factory, budget, DEV="key:shared").run(until_idle=True), WAIT
    )
    assert factory.prompts_for("DEV") == []
    assert port.read_task(root.task_id).stage == "inbox", "never claimed"


async def test_a_turn_cut_off_after_it_crossed_the_limit_is_parked_not_resumed(
    team: Team, port: FcopPort
) -> None:
    """The crossing was committed, then the loop went away before it could act: the next
    start finds the turn interrupted and parks the TASK instead of re-prompting it."""
    root = port.create_task(sender="ADMIN", recipient="DEV", subject="Big", body="Big job.")
    budget = BudgetConfig(per_task=Limits(cost_usd=1.0))
    started = asyncio.Event()

    async def crossing(agent: Agent, prompt: str) -> None:
        await charge(team, cost=3.0, tree=root.task_id, role="DEV")
        started.set()
        await asyncio.Event().wait()  # cut off here: the loop stops with the turn running

    factory = team.factory({"DEV": lambda agent, prompt: crossing(agent, prompt)})  # type: ignore[arg-type, return-value]
    loop = budgeted(team, factory, budget)
    running = asyncio.create_task(loop.run())
    await asyncio.wait_for(started.wait(), WAIT)
    loop.stop()
    await asyncio.wait_for(running, WAIT)
    assert record(team, root.task_id).state is TaskState.INTERRUPTED
    team.reopen()
    factory = team.factory()
    await asyncio.wait_for(budgeted(team, factory, budget).run(until_idle=True), WAIT)
    assert record(team, root.task_id).state is TaskState.NEEDS_BUDGET
    assert factory.prompts_for("DEV") == [], "not re-prompted past its budget"
