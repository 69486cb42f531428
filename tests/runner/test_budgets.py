"""A session metered against its budgets: the ledger's entries, and a hard limit that stops.

The fake agent ``usage-growing`` reports its running total of dollars after each model
call ($0.25 more each) and stops between calls once cancelled, as real agents do; the
meter must cancel the turn in the batch of the report that reached the limit.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
from collections.abc import AsyncIterator

import pytest

from baton.app.root import Baton
from baton.budgets.limits import BudgetConfig, Limits, parse_window
from baton.budgets.pricing import ModelPrice, PriceTable, PricingConfig
from baton.budgets.rules import ScopeKey, Spend
from baton.errors import BudgetRefused
from baton.runner.budget_plan import BudgetPlan
from baton.store import budget_sql
from baton.testing.clock import FastForwardLoop
from tests.support.harness import Harness, fake


def plan(**limits: float) -> BudgetPlan:
    return BudgetPlan(config=BudgetConfig(per_run=Limits(**limits)))  # type: ignore[arg-type]


def stored_usage(harness: Harness) -> list[dict[str, object]]:
    """Every ``usage.counted`` payload as stored in the events table (not as shown)."""
    rows = harness.store.read_tx(
        lambda tx: tx.all("SELECT json FROM events WHERE type = 'usage.counted' ORDER BY seq")
    )
    return [json.loads(r[0])["payload"] for r in rows]


async def test_growing_cost_is_cancelled_in_the_batch_that_reached_per_run(
    harness: Harness,
) -> None:
    session = await harness.open(fake("usage-growing", "--count", "8"), budget=plan(cost_usd=1.0))
    outcome = await session.prompt("go")
    assert outcome.status == "cancelled"
    assert outcome.budget == "per_run run-test cost_usd $1.00 of $1.00"
    [cancelled] = harness.of("turn.cancelled")
    assert "budget" in cancelled.reason
    reports = [u for u in harness.of("usage.reported") if u.scope == "context"]
    assert [u.cost_amount for u in reports] == [0.25, 0.5, 0.75, 1.0], "no call after the limit"
    [exceeded] = harness.of("budget.exceeded")
    assert (exceeded.scope, exceeded.key, exceeded.dimension) == ("run", "run-test", "cost_usd")
    assert (exceeded.spend, exceeded.limit, exceeded.action) == (1.0, 1.0, "cancelled")
    entries = harness.of("usage.counted")
    assert [e.entry for e in entries] == ["turn_start", *["usage"] * 4, "turn_end"]
    assert all(e.cost_provenance == "derived" for e in entries[1:5])
    assert sum(e.cost_usd or 0 for e in entries) == pytest.approx(1.0)
    # the stream says it in order: the crossing report, its entry, the announcement, the end
    types = harness.types()
    assert types.index("budget.exceeded") < types.index("turn.cancelled")


async def test_a_turn_after_the_limit_is_refused_before_its_prompt(harness: Harness) -> None:
    session = await harness.open(fake("usage-growing", "--count", "8"), budget=plan(cost_usd=1.0))
    await session.prompt("go")
    submitted = len(harness.of("turn.submitted"))
    with pytest.raises(BudgetRefused, match=r"per_run run-test cost_usd \$1.00 of \$1.00"):
        await session.prompt("again")
    assert len(harness.of("turn.submitted")) == submitted, "no prompt was sent"
    assert [e.action for e in harness.of("budget.exceeded")] == ["cancelled", "refused"]
    spend = harness.store.read_tx(lambda tx: budget_sql.spend(tx, ScopeKey("run", "run-test")))
    assert spend.turns == 1, "the refused turn was never charged"


async def test_spend_is_recomputed_from_the_stored_usage(harness: Harness) -> None:
    session = await harness.open(fake("usage-growing", "--count", "3"), budget=plan(tokens=10**9))
    await session.prompt("go")
    await session.prompt("again")
    stored = stored_usage(harness)
    spend = harness.store.read_tx(lambda tx: budget_sql.spend(tx, ScopeKey("run", "run-test")))
    assert spend.cost_usd == pytest.approx(sum(float(p["cost_usd"] or 0) for p in stored))  # type: ignore[arg-type]
    assert spend.cost_usd == pytest.approx(1.5), "the running total over two turns, once"
    assert spend.tokens == sum(int(p["tokens"] or 0) for p in stored) == 2 * 330  # type: ignore[call-overload]
    assert spend.turns == 2
    [first_end, second_end] = [p for p in stored if p["entry"] == "turn_end"]
    assert first_end["tokens_provenance"] == "reported" and first_end["tokens"] == 330
    assert second_end["tokens"] == 330, "per turn: the second turn's own tokens"


async def test_minutes_stop_a_silent_agent(harness: Harness) -> None:
    """Nothing arrives from a silent agent: the meter's timer stops it at the limit."""
    session = await harness.open(fake("silent"), budget=plan(minutes=0.5))
    outcome = await session.prompt("go", timeout=600)
    assert outcome.status == "cancelled" and outcome.budget is not None
    assert "minutes" in outcome.budget
    [exceeded] = harness.of("budget.exceeded")
    assert exceeded.dimension == "minutes" and exceeded.spend >= 0.5


async def test_an_agent_without_usage_is_said_to_be_unmetered(harness: Harness) -> None:
    session = await harness.open(fake("ok"), budget=plan(cost_usd=1.0, turns=5))
    await session.prompt("go")
    [unmetered] = harness.of("budget.unmetered")
    assert unmetered.held_to == ["turns"] and "no usage" in unmetered.reason
    end = harness.of("usage.counted")[-1]
    assert end.tokens_provenance == "unavailable" and end.cost_provenance == "unavailable"
    assert end.tokens is None and end.cost_usd is None, "unavailable, never zero"


async def test_an_estimate_is_labelled_as_one(harness: Harness) -> None:
    prices = PriceTable(PricingConfig(models={"local-model": ModelPrice(input=1.0, output=2.0)}))
    budget = BudgetPlan(config=BudgetConfig(), prices=prices)
    session = await harness.open(fake("usage-result-meta"), budget=budget)
    assert session.budget is not None and session.budget.ledger.model is None
    session.budget.ledger.model = "local-model"  # the fake agent offers no model option
    await session.prompt("go")
    end = harness.of("usage.counted")[-1]
    assert end.cost_provenance == "estimated"
    assert end.cost_source is not None and "an estimate" in end.cost_source
    assert end.cost_usd == pytest.approx((7 * 1.0 + 3 * 2.0) / 1e6)


async def test_the_soft_fraction_is_announced_once(harness: Harness) -> None:
    session = await harness.open(fake("usage-growing", "--count", "3"), budget=plan(cost_usd=1.0))
    await session.prompt("go")  # $0.75 of $1.00: past 0.8? no; 0.75 < 0.8
    assert harness.of("budget.threshold") == []
    await session.prompt("again")  # the first call of this turn: $1.00
    assert harness.of("budget.threshold") == [], "a hard crossing is said as such, not as soft"
    assert [e.action for e in harness.of("budget.exceeded")] == ["cancelled"]


async def test_the_soft_fraction_is_announced_once_when_crossed(harness: Harness) -> None:
    budget = BudgetPlan(config=BudgetConfig(per_run=Limits(cost_usd=2.0), soft=0.5))
    session = await harness.open(fake("usage-growing", "--count", "3"), budget=budget)
    await session.prompt("go")  # $0.75
    await session.prompt("again")  # $1.50: past half of $2.00 at $1.00, once
    [threshold] = harness.of("budget.threshold")
    assert (threshold.spend, threshold.limit, threshold.soft) == (1.0, 2.0, 0.5)
    assert harness.of("budget.exceeded") == []


def window_plan(**limits: float) -> BudgetPlan:
    return BudgetPlan(
        config=BudgetConfig(per_window=Limits(**limits), window=parse_window("5h"))  # type: ignore[arg-type]
    )


@contextlib.asynccontextmanager
async def second_process(harness: Harness) -> AsyncIterator[Harness]:
    """Another ``baton run`` on the same project: its own store (its own writer and
    connection) on the same database file, as a second process opens it."""
    tmp = harness.tmp / "second"
    tmp.mkdir()
    async with contextlib.AsyncExitStack() as stack:
        baton = await stack.enter_async_context(
            Baton.open(state_dir=tmp / "state", db_path=harness.tmp / "baton.db")
        )
        loop = asyncio.get_running_loop()
        if isinstance(loop, FastForwardLoop):
            loop.mark_private(baton.store.wake_channel.directory)
        other = Harness(tmp=tmp, baton=baton, stack=stack)
        try:
            yield other
        finally:
            for session in other.sessions:
                await session.close()


async def test_two_runs_share_a_window_and_only_one_takes_its_last_turn(
    harness: Harness,
) -> None:
    """Two runs, two stores on one database, admitted at once against a window with one
    turn left: the check and the charge are one transaction, so exactly one gets it."""
    async with second_process(harness) as other:
        sessions = [
            await h.open(fake("ok"), budget=window_plan(turns=1), run_id=run)
            for h, run in ((harness, "run-test"), (other, "run-other"))
        ]
        outcomes = await asyncio.gather(*(s.prompt("go") for s in sessions), return_exceptions=True)
        refused = [o for o in outcomes if isinstance(o, BudgetRefused)]
        completed = [o for o in outcomes if not isinstance(o, BaseException)]
        assert len(refused) == 1 and len(completed) == 1, outcomes
        assert completed[0].status == "completed"
        assert "per_window profile:fake turns 1 of 1" in str(refused[0])
        for store in (harness.store, other.store):
            spend = store.read_tx(
                lambda tx: budget_sql.spend(tx, ScopeKey("window", "profile:fake"))
            )
            assert spend.turns == 1, "each store sees the one turn charged"


async def test_two_runs_growing_cost_stop_together_at_their_window(harness: Harness) -> None:
    """Both runs spend one window: the report that crosses it cancels its turn, and the
    other run's next report sees the shared spend and cancels its own, so together they
    overspend by at most one report each, never each by the whole limit."""
    growing = fake("usage-growing", "--count", "8")
    async with second_process(harness) as other:
        sessions = [
            await h.open(growing, budget=window_plan(cost_usd=1.0), run_id=run)
            for h, run in ((harness, "run-test"), (other, "run-other"))
        ]
        outcomes = await asyncio.gather(*(s.prompt("go") for s in sessions))
        assert [o.status for o in outcomes] == ["cancelled", "cancelled"], outcomes
        assert all(o.budget is not None and "per_window" in o.budget for o in outcomes)
        spend = harness.store.read_tx(
            lambda tx: budget_sql.spend(tx, ScopeKey("window", "profile:fake"))
        )
        assert 1.0 <= spend.cost_usd <= 1.0 + 2 * 0.25, spend
        reports = [
            u for h in (harness, other) for u in h.of("usage.reported") if u.scope == "context"
        ]
        assert len(reports) < 8, "neither run went on to its own $1.00"


def test_the_pinned_price_table_prices_a_known_model_and_says_so() -> None:
    """``genai-prices`` (a declared, pinned dependency) prices a model it knows, labelled
    with its version; a model it does not know gets no price and a reason, never $0."""
    from baton.budgets.ledger import TokenCounts

    table = PriceTable()
    estimate, why = table.estimate("gpt-4o", TokenCounts(input=1_000_000, output=1_000_000))
    assert estimate is not None, why
    assert estimate.cost_usd > 0 and "genai-prices" in estimate.source
    assert "(an estimate)" in estimate.source
    unknown, why = table.estimate("no-such-model-xyz", TokenCounts(input=10, output=10))
    assert unknown is None and "no price" in why


def test_spend_of_agents_that_reported_nothing_is_unavailable_never_zero() -> None:
    """Usage is honest: no reported usage reads 'unavailable', never '$0.00, 0 tokens'."""
    silent = Spend(turns=2, tool_calls=3, unmetered=2)
    assert silent.unavailable and silent.describe() == "usage unavailable, 2 turns, 3 tool calls"
    partly = Spend(tokens=1200, cost_usd=0.01, turns=2, unmetered=1)
    assert not partly.unavailable
    assert partly.describe().startswith("$0.01, 1,200 tokens, 2 turns")
    assert partly.describe().endswith("(1 turn without usage)")
    assert not Spend().unavailable  # nothing ran: nothing to call unavailable
