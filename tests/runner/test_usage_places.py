"""Usage is read wherever each agent family puts it, and "unavailable" says what is true."""

from __future__ import annotations

from tests.support.harness import Harness, fake


async def test_qwen_usage_in_message_meta_is_summed_per_turn(harness: Harness) -> None:
    session = await harness.open(fake("usage-meta"), family="qwen")
    outcome = await session.prompt("go")
    assert outcome.usage is not None, [u for u in harness.of("usage.reported")]
    usage = outcome.usage
    assert (usage.input_tokens, usage.output_tokens, usage.total_tokens) == (20, 10, 30)
    assert (usage.thought_tokens, usage.cached_read_tokens) == (2, 4)
    assert not any(not u.available for u in harness.of("usage.reported"))


async def test_usage_in_the_prompt_results_meta_is_read(harness: Harness) -> None:
    session = await harness.open(fake("usage-result-meta"))
    outcome = await session.prompt("go")
    assert outcome.usage is not None and outcome.usage.total_tokens == 10


async def test_context_only_usage_says_so(harness: Harness) -> None:
    session = await harness.open(fake("usage-context"), family="codex")
    outcome = await session.prompt("go")
    assert outcome.usage is None
    reports = harness.of("usage.reported")
    context = [u for u in reports if u.available]
    assert context and context[0].scope == "context" and context[0].context_used == 500
    [missing] = [u for u in reports if not u.available]
    assert missing.scope == "turn" and "context" in (missing.reason or "")


async def test_no_usage_at_all_says_the_agent_reported_none(harness: Harness) -> None:
    session = await harness.open(fake("ok"))
    await session.prompt("go")
    [missing] = harness.of("usage.reported")
    assert not missing.available and "no usage" in (missing.reason or "")
