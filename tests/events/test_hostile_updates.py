"""What a hostile or merely unusual agent sends is kept, never dropped, and never leaks.

Foreign session ids, unknown fields on known variants, unknown content blocks, a bound
credential or a token split across reads from the pipe, fail-closed redaction that
must be visible: each has a failing-first test here, at the normalizer (sans-I/O).
"""

from __future__ import annotations

import typing
from typing import Any

import acp.schema as acp_schema
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from baton.events.acp_normalizer import (
    KNOWN_CONTENT_TYPES,
    KNOWN_FIELDS,
    STABLE_VARIANTS,
    AcpNormalizer,
    Draft,
)
from baton.events.model import (
    ProviderNotice,
    SecurityRedactionFallback,
    ToolExecutionProgressed,
    TranscriptAssistant,
)
from baton.providers.registry import extension_for
from baton.security.redact import MARKER, Redactor
from tests.security.corpus import BOUND_SECRETS, SHAPES, leaks

WORKSPACE = "/home/someone/projects/secret-client"


def normalizer(family: str = "generic", redactor: Redactor | None = None) -> AcpNormalizer:
    return AcpNormalizer(
        redaction=redactor or Redactor(BOUND_SECRETS),
        display_path=lambda p: p.removeprefix(WORKSPACE + "/"),
        extension=extension_for(family),
        workspace=WORKSPACE,
    )


def upd(update: dict[str, Any], session_id: str = "s1") -> dict[str, Any]:
    return {"sessionId": session_id, "update": update}


def chunk(text: str, message_id: str = "m1", **extra: Any) -> dict[str, Any]:
    return upd(
        {
            "sessionUpdate": "agent_message_chunk",
            "messageId": message_id,
            "content": {"type": "text", "text": text},
            **extra,
        }
    )


# ------------------------------------------------------------------- kept, not dropped


@pytest.mark.parametrize("family", ["generic", "claude", "cursor", "codex"])
def test_an_update_for_a_foreign_session_keeps_its_raw_payload(family: str) -> None:
    """Was: a notice saying "kept raw" with ``raw: null`` (the first time per session)."""
    n = normalizer(family)
    n.begin_turn("s1", "turn-1")
    params = upd(
        {"sessionUpdate": "agent_message_chunk", "content": {"type": "text", "text": "child"}},
        session_id="child-7",
    )
    for _ in range(2):  # the first one and every later one
        drafts = n.foreign("child-7", params)
        kept = [d for d in drafts if d.raw is not None]
        assert kept, [d.payload for d in drafts]
        assert kept[0].raw == params
        assert not any(isinstance(d.payload, TranscriptAssistant) for d in drafts)


def test_known_field_table_matches_the_acp_sdk() -> None:
    union = acp_schema.SessionNotification.model_fields["update"].annotation
    for cls in typing.get_args(union):
        variant = typing.get_args(cls.model_fields["session_update"].annotation)[0]
        if variant not in STABLE_VARIANTS:
            continue
        sdk = {f.alias or name for name, f in cls.model_fields.items()}
        assert KNOWN_FIELDS[variant] == sdk, variant
    blocks = typing.get_args(acp_schema.ContentChunk.model_fields["content"].annotation)
    sdk_types = {typing.get_args(b.model_fields["type"].annotation)[0] for b in blocks}
    assert sdk_types == KNOWN_CONTENT_TYPES


def test_unknown_fields_on_a_chunk_are_kept() -> None:
    n = normalizer()
    n.update(chunk("hello ", futureField={"x": 1}), now_ms=0)
    n.update(chunk("world", futureField={"x": 1}), now_ms=0)
    drafts = n.flush()
    assert len(drafts) == 1
    assert drafts[0].payload.text == "hello world"
    assert drafts[0].raw == {"futureField": {"x": 1}}


def test_chunks_with_different_detail_are_not_merged_into_one_raw() -> None:
    n = normalizer()
    out = n.update(chunk("a", _meta={"seq": 1}), now_ms=0)
    out += n.update(chunk("b", _meta={"seq": 2}), now_ms=0)
    out += n.flush()
    texts = [d for d in out if isinstance(d.payload, TranscriptAssistant)]
    assert [(d.payload.text, d.raw) for d in texts] == [
        ("a", {"_meta": {"seq": 1}}),
        ("b", {"_meta": {"seq": 2}}),
    ]


def test_an_unknown_content_block_type_is_kept_whole() -> None:
    n = normalizer()
    block = {"type": "hologram", "frames": [1, 2, 3], "title": "demo"}
    n.update(upd({"sessionUpdate": "agent_message_chunk", "content": block}), now_ms=0)
    (draft,) = n.flush()
    assert draft.payload.content_type == "hologram"
    assert draft.raw == {"content": block}


def test_unknown_fields_and_items_on_tool_progress_are_kept() -> None:
    n = normalizer()
    n.update(
        upd({"sessionUpdate": "tool_call", "toolCallId": "t1", "title": "x", "status": "pending"}),
        now_ms=0,
    )
    odd_item = {"type": "screenshot", "uri": "file:///tmp/x.png"}
    odd_block = {"type": "content", "content": {"type": "hologram", "frames": 3}}
    (draft,) = n.update(
        upd(
            {
                "sessionUpdate": "tool_call_update",
                "toolCallId": "t1",
                "status": "in_progress",
                "progress": 0.5,
                "content": [
                    {"type": "content", "content": {"type": "text", "text": "ok"}},
                    odd_item,
                    odd_block,
                ],
            }
        ),
        now_ms=1,
    )
    assert isinstance(draft.payload, ToolExecutionProgressed)
    assert draft.raw == {"progress": 0.5, "content": [odd_item, odd_block]}


def test_plain_tool_progress_stays_raw_free() -> None:
    """The hot path keeps nothing when there is nothing the payload cannot hold."""
    n = normalizer()
    n.update(upd({"sessionUpdate": "tool_call", "toolCallId": "t1", "title": "x"}), now_ms=0)
    (draft,) = n.update(
        upd({"sessionUpdate": "tool_call_update", "toolCallId": "t1", "status": "in_progress"}),
        now_ms=1,
    )
    assert draft.raw is None


@pytest.mark.parametrize(
    ("variant", "body"),
    [
        ("available_commands_update", {"availableCommands": [], "vendorHint": "x"}),
        ("config_option_update", {"configOptions": [], "vendorHint": "x"}),
    ],
)
def test_unknown_fields_on_other_variants_are_kept(variant: str, body: dict[str, Any]) -> None:
    (draft,) = normalizer().update(upd({"sessionUpdate": variant, **body}), now_ms=0)
    assert draft.raw == {"vendorHint": "x"}


# ------------------------------------------------------------------ split across reads


def _stream(n: AcpNormalizer, pieces: list[str], *, end: bool = True) -> list[Draft]:
    """Each piece arrives in its own read from the pipe (``flush_ready`` after each)."""
    out: list[Draft] = []
    for piece in pieces:
        out += n.update(chunk(piece), now_ms=0)
        out += n.flush_ready()
    if end:
        out += n.flush()
    return out


def _shown(drafts: list[Draft]) -> str:
    return "".join(d.payload.text for d in drafts if isinstance(d.payload, TranscriptAssistant))


def test_a_bound_secret_split_across_reads_is_found_whole() -> None:
    secret = BOUND_SECRETS[0]
    for cut in range(1, len(secret)):
        n = normalizer()
        out = _stream(n, [f"key is {secret[:cut]}", f"{secret[cut:]} (done)\n"])
        shown = _shown(out)
        assert secret[:cut] not in shown or cut < 2, (cut, shown)
        assert leaks(shown) == [], (cut, shown)
        assert MARKER in shown


def test_held_text_is_shown_as_soon_as_it_cannot_be_a_secret_any_more() -> None:
    n = normalizer()
    out = _stream(n, ["Reading the file now. The ", "build passed.\n"], end=False)
    assert _shown(out) == "Reading the file now. The build passed.\n"


def test_the_unfinished_word_waits_for_the_next_read() -> None:
    n = normalizer()
    first = _stream(n, ["one two thr"], end=False)
    assert _shown(first) == "one two "
    assert _shown(n.flush()) == "thr"


@pytest.mark.parametrize(
    "pieces",
    [
        ["password: ", "hunter2-but-longer\n"],
        ["export GITHUB_TOKEN", "=ghp_1234567890abcdefghijABCDEFGHIJ123456\n"],
        ["ghp_1234567890", "abcdefghijABCDEFGHIJ123456 pushed\n"],
        ["Authorization: Bearer ", "opaque-bearer-7f3a9c2e41", "\n"],
        ["https://hooks.slack.com/services/T0123ABCD/", "B0456EFGH/Z4PB3oMSAQBkl6R5w5JFuRl7\n"],
        ["-----BEGIN RSA PRIVATE KEY-----\n", "MIIEowIBAAKCAQEA0Z3VS5JJcds3\n", "-----END RSA"],
        ["the token ", "= cl1-t0ken-v4lue\n"],
    ],
)
def test_a_pattern_split_across_reads_is_still_redacted(pieces: list[str]) -> None:
    shown = _shown(_stream(normalizer(), pieces))
    for secret in (
        "hunter2-but-longer",
        "ghp_1234567890abcdefghijABCDEFGHIJ123456",
        "opaque-bearer-7f3a9c2e41",
        "Z4PB3oMSAQBkl6R5w5JFuRl7",
        "MIIEowIBAAKCAQEA0Z3VS5JJcds3",
        "cl1-t0ken-v4lue",
    ):
        assert secret not in shown, shown


@settings(max_examples=150, deadline=None)
@given(st.sampled_from(SHAPES), st.lists(st.integers(min_value=0, max_value=400), max_size=6))
def test_every_corpus_shape_split_anywhere_never_leaks(shape: Any, cuts: list[int]) -> None:
    text = f"The agent says: {shape.text} and goes on.\n"
    points = sorted({c % (len(text) + 1) for c in cuts})
    pieces = [text[a:b] for a, b in zip([0, *points], [*points, len(text)], strict=True)]
    shown = _shown(_stream(normalizer(), [p for p in pieces if p]))
    assert leaks(shown, [shape]) == [], (pieces, shown)


# ------------------------------------------------------------- fallbacks are visible


def test_a_redaction_fallback_is_a_security_event_naming_a_relative_path() -> None:
    n = normalizer()
    n.update(
        upd(
            {
                "sessionUpdate": "tool_call",
                "toolCallId": "t9",
                "title": "Read key",
                "locations": [{"path": f"{WORKSPACE}/deploy/id_rsa"}],
            }
        ),
        now_ms=0,
    )
    drafts = n.update(
        upd(
            {
                "sessionUpdate": "tool_call_update",
                "toolCallId": "t9",
                "status": "completed",
                "content": [
                    {
                        "type": "content",
                        "content": {
                            "type": "text",
                            "text": f"{WORKSPACE}/deploy/id_rsa:\n-----BEGIN RSA PRIVATE KEY-----\n"
                            "MIIEowIBAAKCAQEA and no end line",
                        },
                    }
                ],
            }
        ),
        now_ms=1,
    )
    fallbacks = [d.payload for d in drafts if isinstance(d.payload, SecurityRedactionFallback)]
    assert fallbacks, [d.payload for d in drafts]
    for event in fallbacks:
        assert event.control == "redaction"
        assert "deploy/id_rsa" in event.subject
        assert WORKSPACE not in event.subject + event.reason
        assert "MIIE" not in event.subject + event.reason
    done = drafts[0].payload
    assert done.output is not None and "MIIE" not in done.output.tail


def test_a_fallback_in_streamed_text_is_visible_too() -> None:
    n = normalizer()
    out = _stream(n, ['password: "never closed and more text'])
    assert any(isinstance(d.payload, SecurityRedactionFallback) for d in out)
    assert "never closed" not in _shown(out)


def test_notices_for_unknown_variants_clip_the_variant_name() -> None:
    (draft,) = normalizer().update(upd({"sessionUpdate": "v" * 10_000}), now_ms=0)
    assert isinstance(draft.payload, ProviderNotice)
    assert draft.payload.variant is not None and len(draft.payload.variant) <= 200


def test_a_private_key_longer_than_the_hold_stays_hidden_line_by_line() -> None:
    body = [f"MIIE{i:04d}" + "A" * 60 + "\n" for i in range(200)]  # ~13 KiB, over the hold
    pieces = ["here:\n-----BEGIN OPENSSH PRIVATE KEY-----\n", *body]
    pieces += ["-----END OPENSSH PRIVATE KEY-----\n", "after the key\n"]
    out = _stream(normalizer(), pieces)
    shown = _shown(out)
    assert "MIIE" not in shown and "AAAA" not in shown
    assert shown.startswith("here:\n")
    assert any(isinstance(d.payload, SecurityRedactionFallback) for d in out)


def test_the_shown_context_carries_a_key_to_its_value() -> None:
    """``the token `` is shown (nothing secret yet); its value, a read later, is not."""
    shown = _shown(_stream(normalizer(), ["the token ", "= cl1-t0ken-v4lue\n"]))
    assert shown == f"the token = {MARKER}\n"


def test_tool_kind_and_status_outside_acp_vocabulary_are_normalized_and_kept() -> None:
    n = normalizer()
    drafts = n.update(
        upd(
            {
                "sessionUpdate": "tool_call",
                "toolCallId": "t1",
                "title": "x",
                "kind": "\x1b[2Jexploit",
                "status": "weird",
            }
        ),
        now_ms=0,
    )
    started = drafts[0].payload
    assert started.kind == "other" and started.status == "pending"
    assert drafts[0].raw["kind"] == "\x1b[2Jexploit" and drafts[0].raw["status"] == "weird"


# ----------------------------------------------------------- attribution by the agent's ids


def _turns(n: AcpNormalizer) -> None:
    """Turn 1 starts tool t1 and message m1, then turn 2 begins."""
    n.begin_turn("s1", "turn-1")
    n.update(upd({"sessionUpdate": "tool_call", "toolCallId": "t1", "title": "slow"}), now_ms=0)
    n.update(chunk("turn one says ", message_id="m1"), now_ms=0)
    n.end_turn(None)
    n.begin_turn("s1", "turn-2")


def test_a_tool_update_of_turn_1_during_turn_2_belongs_to_turn_1() -> None:
    """Was: recorded on turn 2."""
    n = normalizer()
    _turns(n)
    drafts = n.update(
        upd({"sessionUpdate": "tool_call_update", "toolCallId": "t1", "status": "completed"}),
        now_ms=5,
    )
    done = [d for d in drafts if d.payload.TYPE == "tool.execution.completed"]
    assert len(done) == 1 and done[0].turn_id == "turn-1" and "late" in done[0].flags
    notices = [d for d in drafts if isinstance(d.payload, ProviderNotice)]
    assert [(d.payload.category, d.turn_id) for d in notices] == [("late_update", "turn-1")]


def test_a_late_chunk_of_turn_1_during_turn_2_belongs_to_turn_1() -> None:
    n = normalizer()
    _turns(n)
    n.update(chunk("turn two starts ", message_id="m2"), now_ms=0)
    out = n.update(chunk("and more from one\n", message_id="m1"), now_ms=0)
    out += n.flush()
    texts = {d.payload.text: (d.turn_id, d.flags) for d in out if d.payload.TYPE.startswith("tr")}
    assert texts["and more from one\n"] == ("turn-1", ("late",))
    assert texts["turn two starts "] == ("turn-2", ())


def test_updates_after_the_prompt_response_are_late_in_their_turn() -> None:
    n = normalizer()
    n.begin_turn("s1", "turn-1")
    (draft,) = n.update(
        upd({"sessionUpdate": "current_mode_update", "currentModeId": "x"}), now_ms=0
    )
    assert draft.flags == ()
    drafts = n.update(
        upd({"sessionUpdate": "current_mode_update", "currentModeId": "y"}),
        now_ms=0,
        answered=True,
    )
    mode = [d for d in drafts if d.payload.TYPE == "mode.changed"]
    assert mode[0].turn_id == "turn-1" and mode[0].flags == ("late",)


def test_a_new_tool_call_reusing_a_finished_id_is_a_call_of_the_current_turn() -> None:
    n = normalizer()
    n.begin_turn("s1", "turn-1")
    n.update(
        upd({"sessionUpdate": "tool_call", "toolCallId": "t1", "status": "completed"}), now_ms=0
    )
    n.end_turn(None)
    n.begin_turn("s1", "turn-2")
    drafts = n.update(
        upd({"sessionUpdate": "tool_call", "toolCallId": "t1", "title": "again"}), now_ms=1
    )
    assert drafts[0].payload.TYPE == "tool.execution.started"
    assert drafts[0].turn_id == "turn-2" and drafts[0].flags == ()


def test_settling_open_calls_keeps_each_in_its_own_turn() -> None:
    n = normalizer()
    _turns(n)
    n.update(upd({"sessionUpdate": "tool_call", "toolCallId": "t2", "title": "two"}), now_ms=0)
    settled = {d.payload.tool_call_id: (d.turn_id, d.flags) for d in n.settle_open("failed", 9)}
    assert settled == {"t1": ("turn-1", ("late",)), "t2": ("turn-2", ())}
