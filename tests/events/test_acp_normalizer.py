"""The generic ACP normalizer: closed variant table, upserts, coalescing, honest usage."""

from __future__ import annotations

import typing
from typing import Any

import acp.schema as acp_schema
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from baton.events.acp_normalizer import (
    COALESCE_MAX_BYTES,
    STABLE_VARIANTS,
    UNSTABLE_VARIANTS,
    AcpNormalizer,
    Draft,
)
from baton.events.model import (
    PAYLOAD_TYPES,
    ModeChanged,
    PlanUpdated,
    ProviderNotice,
    ToolExecutionCompleted,
    ToolExecutionProgressed,
    ToolExecutionStarted,
    TranscriptAssistant,
    TranscriptThinking,
    UsageReported,
)
from baton.events.redaction import NoRedaction


def normalizer() -> AcpNormalizer:
    return AcpNormalizer(redaction=NoRedaction(), display_path=lambda p: p, workspace="/w")


def upd(update: dict[str, Any]) -> dict[str, Any]:
    return {"sessionId": "s1", "update": update}


def payloads(drafts: list[Draft]) -> list[Any]:
    return [d.payload for d in drafts]


def test_every_sdk_variant_is_in_the_closed_table() -> None:
    """A new variant in the ACP SDK's schema must break this test, never vanish."""
    union = acp_schema.SessionNotification.model_fields["update"].annotation
    sdk_variants = {
        typing.get_args(cls.model_fields["session_update"].annotation)[0]
        for cls in typing.get_args(union)
    }
    known = set(STABLE_VARIANTS) | set(UNSTABLE_VARIANTS)
    assert sdk_variants - known == set(), "add the new variants to STABLE/UNSTABLE_VARIANTS"


def test_unknown_variant_becomes_a_visible_unclassified_notice_with_raw() -> None:
    n = normalizer()
    out = n.update(upd({"sessionUpdate": "future_variant_xyz", "x": 1}), now_ms=0)
    assert len(out) == 1
    notice = out[0].payload
    assert isinstance(notice, ProviderNotice)
    assert notice.category == "unclassified" and notice.variant == "future_variant_xyz"
    assert out[0].raw == {"sessionUpdate": "future_variant_xyz", "x": 1}


def test_unstable_variants_are_recognised_notices() -> None:
    for variant in UNSTABLE_VARIANTS:
        out = normalizer().update(upd({"sessionUpdate": variant}), now_ms=0)
        assert isinstance(out[0].payload, ProviderNotice)
        assert out[0].payload.category == "unstable_variant"


@given(
    st.dictionaries(
        st.sampled_from(["sessionUpdate", "content", "toolCallId", "entries", "title", "status"]),
        st.one_of(
            st.none(),
            st.integers(),
            st.text(max_size=10),
            st.sampled_from(sorted(STABLE_VARIANTS)),
            st.lists(st.integers(), max_size=3),
            st.dictionaries(st.text(max_size=4), st.text(max_size=4), max_size=3),
        ),
    )
)
@settings(max_examples=300, deadline=None)
def test_any_update_yields_events_or_a_notice_never_an_exception(update: dict[str, Any]) -> None:
    n = normalizer()
    out = n.update(upd(update), now_ms=0) + n.flush()
    for draft in out:  # each a canonical payload that survives the store's JSON
        payload = draft.payload
        assert payload.TYPE in PAYLOAD_TYPES
        assert type(payload).model_validate_json(payload.model_dump_json()) == payload
    if not isinstance(update.get("sessionUpdate"), str):
        kinds = [d.payload.category for d in out if isinstance(d.payload, ProviderNotice)]
        assert kinds == ["malformed"], "an update without a variant is visible, once"


def test_chunks_with_one_message_id_coalesce_until_something_else_happens() -> None:
    n = normalizer()
    out: list[Draft] = []
    for word in ["Hel", "lo ", "world"]:
        out += n.update(
            upd(
                {
                    "sessionUpdate": "agent_message_chunk",
                    "messageId": "m1",
                    "content": {"type": "text", "text": word},
                }
            ),
            now_ms=0,
        )
    assert out == []
    out += n.update(
        upd({"sessionUpdate": "current_mode_update", "currentModeId": "plan"}), now_ms=0
    )
    got = payloads(out)
    assert isinstance(got[0], TranscriptAssistant)
    assert got[0].text == "Hello world" and got[0].chunks == 3 and got[0].message_id == "m1"
    assert isinstance(got[1], ModeChanged)


def test_chunks_without_ids_are_one_message_per_uninterrupted_run() -> None:
    n = normalizer()
    chunk = {"sessionUpdate": "agent_message_chunk", "content": {"type": "text", "text": "a"}}
    n.update(upd(chunk), now_ms=0)
    first = payloads(n.flush())[0]
    n.update(upd(chunk), now_ms=0)  # same run continues after a flush
    second = payloads(n.flush())[0]
    n.update(
        upd({"sessionUpdate": "agent_thought_chunk", "content": {"type": "text", "text": "t"}}),
        now_ms=0,
    )
    got = payloads(n.update(upd(chunk), now_ms=0) + n.flush())
    assert first.message_id == second.message_id
    assert isinstance(got[0], TranscriptThinking)
    assert got[1].message_id != first.message_id


def test_coalescing_is_bounded() -> None:
    n = normalizer()
    big = "x" * (COALESCE_MAX_BYTES // 2 + 1)
    out: list[Draft] = []
    for _ in range(3):
        out += n.update(
            upd(
                {
                    "sessionUpdate": "agent_message_chunk",
                    "messageId": "m",
                    "content": {"type": "text", "text": big},
                }
            ),
            now_ms=0,
        )
    out += n.flush()
    texts = [p.text for p in payloads(out)]
    assert "".join(texts) == big * 3 and len(texts) == 2


def test_tool_call_upsert_restores_fields_and_emits_one_completion() -> None:
    n = normalizer()
    out = n.update(
        upd(
            {
                "sessionUpdate": "tool_call",
                "toolCallId": "t1",
                "title": "Write a.txt",
                "kind": "edit",
                "status": "pending",
                "rawInput": {},
            }
        ),
        now_ms=0,
    )
    out += n.update(
        upd(
            {
                "sessionUpdate": "tool_call",
                "toolCallId": "t1",
                "title": "Write a.txt",
                "kind": "edit",
                "status": "pending",
                "rawInput": {"filePath": "/w/a.txt"},
            }
        ),
        now_ms=5,
    )
    out += n.update(
        upd(
            {
                "sessionUpdate": "tool_call_update",
                "toolCallId": "t1",
                "status": "in_progress",
                "locations": [{"path": "/w/a.txt"}],
            }
        ),
        now_ms=10,
    )
    out += n.update(
        upd(
            {
                "sessionUpdate": "tool_call_update",
                "toolCallId": "t1",
                "status": "completed",
                "content": [
                    {"type": "content", "content": {"type": "text", "text": "ok"}},
                    {"type": "diff", "path": "/w/a.txt", "oldText": None, "newText": "hi"},
                ],
            }
        ),
        now_ms=40,
    )
    out += n.update(
        upd({"sessionUpdate": "tool_call_update", "toolCallId": "t1", "status": "completed"}),
        now_ms=50,
    )
    got = payloads(out)
    assert [type(p) for p in got] == [
        ToolExecutionStarted,
        ToolExecutionProgressed,
        ToolExecutionProgressed,
        ToolExecutionCompleted,
        ToolExecutionProgressed,
    ]
    done = got[3]
    assert done.title == "Write a.txt" and done.kind == "edit"
    assert done.raw_input == {"filePath": "/w/a.txt"}
    assert [loc.path for loc in done.locations] == ["/w/a.txt"]
    assert done.output is not None and done.output.tail == "ok"
    assert done.diffs[0].new_text == "hi" and done.diffs[0].old_text is None
    assert done.duration_ms == 40
    assert n.tool_calls == 1


def test_update_before_start_is_tolerated() -> None:
    n = normalizer()
    got = payloads(
        n.update(
            upd(
                {
                    "sessionUpdate": "tool_call_update",
                    "toolCallId": "z",
                    "status": "failed",
                    "title": "late",
                }
            ),
            now_ms=0,
        )
    )
    assert [type(p) for p in got] == [ToolExecutionStarted, ToolExecutionCompleted]
    assert got[1].status == "failed"


def test_tool_output_is_bounded_to_a_tail_with_size_and_digest() -> None:
    n = normalizer()
    text = "0123456789" * 10_000
    got = payloads(
        n.update(
            upd(
                {
                    "sessionUpdate": "tool_call",
                    "toolCallId": "t",
                    "title": "t",
                    "content": [{"type": "content", "content": {"type": "text", "text": text}}],
                }
            ),
            now_ms=0,
        )
    )
    output = got[0].output
    assert output.total_bytes == 100_000 and output.truncated
    assert len(output.tail.encode()) == 64 * 1024 and text.endswith(output.tail)
    import hashlib

    assert output.sha256 == hashlib.sha256(text.encode()).hexdigest()


def test_plan_snapshots_have_increasing_revisions() -> None:
    n = normalizer()
    entries = [
        {"content": "a", "priority": "high", "status": "pending"},
        {"content": "b", "priority": "low", "status": "weird"},
    ]
    p1 = payloads(n.update(upd({"sessionUpdate": "plan", "entries": entries}), now_ms=0))[0]
    p2 = payloads(n.update(upd({"sessionUpdate": "plan", "entries": entries[:1]}), now_ms=0))[0]
    assert isinstance(p1, PlanUpdated) and (p1.revision, p2.revision) == (1, 2)
    assert p1.steps[1].status == "pending" and p1.steps[1].native_status == "weird"
    assert len(p2.steps) == 1


def test_usage_is_unavailable_never_zero_when_nothing_was_reported() -> None:
    n = normalizer()
    n.begin_turn("s1", "t1")
    got = payloads(n.end_turn(None))
    assert got == [
        UsageReported(available=False, reason="the agent reported no usage for this turn")
    ]


@pytest.mark.parametrize("amount", [float("inf"), float("-inf"), float("nan"), -0.5, True, "1"])
def test_a_cost_no_meter_measures_is_no_cost(amount: object) -> None:
    """``1e999`` or ``Infinity`` in an agent's JSON decodes to ``inf``: charged, it would
    exhaust every budget the turn counts against; it is no cost (the rest is kept)."""
    n = normalizer()
    n.begin_turn("s1", "t1")
    update = {"sessionUpdate": "usage_update", "used": 5, "cost": {"amount": amount}}
    (ctx,) = payloads(n.update(upd(update), now_ms=0))
    assert isinstance(ctx, UsageReported)
    assert ctx.context_used == 5 and ctx.cost_amount is None and ctx.cost_currency is None


def test_reported_usage_is_kept_and_no_unavailable_notice_follows() -> None:
    n = normalizer()
    n.begin_turn("s1", "t1")
    ctx = payloads(
        n.update(
            upd(
                {
                    "sessionUpdate": "usage_update",
                    "used": 1200,
                    "size": 8000,
                    "cost": {"amount": 0.01, "currency": "USD"},
                }
            ),
            now_ms=0,
        )
    )[0]
    assert ctx.context_used == 1200 and ctx.cost_amount == 0.01
    got = payloads(n.end_turn({"inputTokens": 10, "outputTokens": 0, "totalTokens": 10}))
    assert len(got) == 1 and got[0].available and got[0].output_tokens == 0
