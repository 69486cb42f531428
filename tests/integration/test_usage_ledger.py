"""The usage ledger on every real agent: what each reports, counted per turn, never made up.

Each pinned agent runs two turns against its scripted model server (whose every answer
carries known usage), through baton's real runner with its meter; the ``usage.counted``
entries must say per turn what the agent reported (``reported``/``derived``), or that it
reported nothing (``unavailable``, never zero), with the profile and the agent's version.
The agent's wire traffic is recorded and checked against the ACP schema, as in the other
real-agent tests.
"""

from __future__ import annotations

from typing import Any

import pytest

from baton.agent_profile import AgentProfile
from baton.budgets.limits import BudgetConfig, Limits
from baton.budgets.rules import ScopeKey
from baton.runner.budget_plan import BudgetPlan
from baton.store import budget_sql
from tests.integration.test_qwen_baton import QWEN_VENDOR
from tests.support.agents import (
    claude_profile,
    codex_profile,
    codex_ts_profile,
    gemini_profile,
    qwen_profile,
)
from tests.support.anthropic_stub import USAGE as CLAUDE_USAGE
from tests.support.anthropic_stub import AnthropicStub
from tests.support.gemini_stub import GeminiStub
from tests.support.harness import Harness
from tests.support.llm_stub import LLMStub
from tests.support.model_server import RecordedRequest
from tests.support.real_session import assert_wire_conforms, open_real
from tests.support.responses_stub import MODEL_ID as RESPONSES_MODEL
from tests.support.responses_stub import USAGE as RESPONSES_USAGE
from tests.support.responses_stub import ResponsesStub

pytestmark = [pytest.mark.slow, pytest.mark.real_agent]

PLAN = BudgetPlan(config=BudgetConfig(per_run=Limits(tokens=10**9, turns=100)))
"""Limits that are never reached: every check runs, nothing stops."""


SIDE_PROMPTS = ("[SUGGESTION MODE", "Managed memory has")
"""How the background calls of Claude Code and Qwen Code begin (a next-prompt suggestion,
a memory write): they land in either turn and no usage report covers them."""


def is_side_call(request: RecordedRequest) -> bool:
    """A model call the agent makes beside the conversation and leaves out of its usage
    reports: a title (the stub's ``side``/``title``), a background prompt
    (:data:`SIDE_PROMPTS`), Codex's call on another model than the session's."""
    body = request.body if isinstance(request.body, dict) else {}
    last = (body.get("messages") or [{}])[-1]
    content = last.get("content") if isinstance(last, dict) else None
    if isinstance(content, list):
        content = "".join(str(p.get("text", "")) for p in content if isinstance(p, dict))
    return (
        request.reply in ("side", "title")
        or (isinstance(content, str) and content.startswith(SIDE_PROMPTS))
        or ("input" in body and body.get("model") != RESPONSES_MODEL)
    )


async def two_turns(
    harness: Harness, profile: AgentProfile, stub: Any, *, vendor: tuple[str, ...] = ()
) -> tuple[list[Any], list[list[str]]]:
    """Two turns; the ledger's entries and each turn's model calls (the stub's reply labels,
    side calls left out)."""
    session = await open_real(harness, profile, preset="all", budget=PLAN)
    calls: list[list[str]] = []
    for prompt in ("write hello.txt", "write hello.txt again"):
        before = len(stub.completions())
        outcome = await session.prompt(prompt, timeout=240)
        assert outcome.status == "completed", outcome
        made = stub.completions()[before:]
        calls.append([r.reply for r in made if not is_side_call(r)])
    assert_wire_conforms(harness, vendor=vendor)
    entries = harness.of("usage.counted")
    assert [e.entry for e in entries if e.entry != "usage"] == [
        "turn_start",
        "turn_end",
        "turn_start",
        "turn_end",
    ]
    assert all(e.profile == profile.name for e in entries)
    spend = harness.store.read_tx(lambda tx: budget_sql.spend(tx, ScopeKey("run", "run-test")))
    assert spend.turns == 2
    assert spend.tokens == sum(e.tokens or 0 for e in entries), "spend is the stored entries"
    return entries, calls


def ends(entries: list[Any]) -> list[Any]:
    return [e for e in entries if e.entry == "turn_end"]


async def test_claude_tokens_per_turn_and_dollars_from_its_running_total(
    harness: Harness,
) -> None:
    with AnthropicStub(cwd=harness.workspace) as stub:
        entries, calls = await two_turns(harness, claude_profile(stub.origin), stub)
    first, second = ends(entries)
    assert first.tokens_provenance == second.tokens_provenance == "reported"
    per_call = CLAUDE_USAGE["input_tokens"] + CLAUDE_USAGE["output_tokens"]
    # per turn, not the session's running total: each turn's own model calls
    assert [first.tokens, second.tokens] == [per_call * len(c) for c in calls], calls
    dollars = [e for e in entries if e.entry == "usage"]
    assert dollars and all(e.cost_provenance == "derived" for e in dollars)
    assert all(e.cost_usd is not None and e.cost_usd > 0 for e in dollars)
    assert first.cost_provenance == "derived" and first.cost_usd == 0.0, "no double count"
    assert first.agent_version  # claude-agent-acp's own version, from initialize


async def test_zed_codex_reports_only_its_context_window(harness: Harness) -> None:
    with ResponsesStub(cwd=harness.workspace) as stub:
        entries, _ = await two_turns(harness, codex_profile(stub.base_url), stub)
    for end in ends(entries):
        assert end.tokens_provenance == "unavailable" and end.tokens is None
        assert "context window" in (end.reason or "")
        assert end.cost_provenance == "unavailable" and end.cost_usd is None


async def test_codex_ts_reports_tokens_per_turn(harness: Harness) -> None:
    with ResponsesStub(cwd=harness.workspace) as stub:
        entries, calls = await two_turns(harness, codex_ts_profile(stub.base_url), stub)
    first, second = ends(entries)
    assert first.tokens_provenance == second.tokens_provenance == "reported"
    per_call = RESPONSES_USAGE["total_tokens"]
    assert [first.tokens, second.tokens] == [per_call * len(c) for c in calls], calls


async def test_qwen_tokens_summed_per_turn_from_its_meta(harness: Harness) -> None:
    with LLMStub(cwd=harness.workspace) as stub:
        entries, calls = await two_turns(
            harness, qwen_profile(stub.base_url), stub, vendor=QWEN_VENDOR
        )
    first, second = ends(entries)
    assert first.tokens_provenance == second.tokens_provenance == "reported"
    assert [first.tokens, second.tokens] == [15 * len(c) for c in calls], calls


async def test_gemini_usage_as_it_reports_it(harness: Harness) -> None:
    with GeminiStub(cwd=harness.workspace, file_content="hello\n") as stub:
        entries, calls = await two_turns(harness, gemini_profile(stub.origin), stub)
    first, second = ends(entries)
    assert first.tokens_provenance in ("reported", "unavailable")
    if first.tokens_provenance == "unavailable":
        assert first.tokens is None and first.reason
    else:
        assert [first.tokens, second.tokens] == [19 * len(c) for c in calls], calls
