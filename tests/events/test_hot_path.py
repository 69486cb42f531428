"""The hot path (:meth:`AcpNormalizer.hot`) gives what the generic path gives.

The oracle is the normalizer itself with :meth:`~AcpNormalizer.hot` switched off: the
same update stream goes through both, and every draft must be the same (payload object:
type, ``__dict__`` in field order, fields set; raw, turn, flags), in the same order, and
every stamped event the same line of JSON. Streams: every recorded trace in
``tests/traces``, the hostile update streams, and streams built for the hot shapes and
their near misses (bound secrets split across chunks, lone surrogates, text past the
coalescing bound, output past the tail bound, rawOutput past the raw bound, unknown
fields, ``_meta``, terminal statuses, unknown and finished calls, late updates, turns).
``test_a_broken_hot_path_is_caught`` checks that the oracle has teeth: each mutant of
the hot path must fail it.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from baton.events.acp_normalizer import COALESCE_MAX_BYTES, AcpNormalizer, Draft
from baton.events.bounds import OUTPUT_TAIL_BYTES, RAW_VALUE_BYTES
from baton.events.sequencer import Sequencer
from baton.events.tools import ToolCallTracker
from baton.providers.registry import extension_for
from baton.security.redact import Redactor
from tests.events.test_trusted_payloads import TRACE_STREAMS, _same
from tests.hostile.test_pipeline_properties import updates as hostile_updates

SECRET = "sk-bound-secret-0123456789"

# ------------------------------------------------------------------- the oracle

Step = tuple[str, Any]
"""``("update", params)``, ``("answered", params)`` (a late one), ``("read", None)``
(the end of a read: flush_ready) or ``("turn", turn_id)``."""


def _run(family: str, steps: list[Step], *, hot: bool) -> tuple[list[tuple[Draft, str]], int]:
    """Every draft of ``steps`` and its stamped line; how many updates took the hot path."""
    normalizer = AcpNormalizer(
        redaction=Redactor([SECRET]),
        display_path=lambda p: p,
        extension=extension_for(family),
        workspace="/w",
    )
    taken = 0
    if hot:
        real = normalizer.hot

        def counted(params: Any, **kw: Any) -> list[Draft] | None:
            nonlocal taken
            out = real(params, **kw)
            taken += out is not None
            return out

        normalizer.hot = counted  # type: ignore[method-assign]
    else:
        normalizer.hot = lambda params, **kw: None  # type: ignore[method-assign]
    sequencer = Sequencer("run-1", clock=lambda: 1_700_000_000.5)
    drafts = list(normalizer.begin_turn("s1", "turn-1"))
    for i, (kind, arg) in enumerate(steps):
        if kind == "turn":
            drafts += normalizer.begin_turn("s1", arg)
        elif kind == "read":
            drafts += normalizer.flush_ready()
        else:
            drafts += normalizer.update(arg, now_ms=float(i), answered=kind == "answered")
    drafts += normalizer.settle_open("cancelled", 1e6)
    drafts += normalizer.end_turn(None)
    lines = [
        sequencer.stamp(
            d.payload, session_id="s1", turn_id=d.turn_id or "turn-1", raw=d.raw, flags=d.flags
        ).to_json()
        for d in drafts
    ]
    return list(zip(drafts, lines, strict=True)), taken


def _assert_same(family: str, steps: list[Step]) -> int:
    """Both paths over ``steps``; how many updates the hot one took."""
    fast, taken = _run(family, steps, hot=True)
    slow, _ = _run(family, steps, hot=False)
    assert [line for _, line in fast] == [line for _, line in slow]
    for (a, _), (b, _) in zip(fast, slow, strict=True):
        _same(a.payload, b.payload)
        assert (a.raw, a.turn_id, a.flags) == (b.raw, b.turn_id, b.flags)
    return taken


def _updates(stream: list[dict[str, Any]]) -> list[Step]:
    return [("update", params) for params in stream]


# ------------------------------------------------------------- recorded traces


@pytest.mark.parametrize("name", sorted(TRACE_STREAMS))
def test_recorded_traces_are_the_same_on_the_hot_path(name: str) -> None:
    family = "cursor" if name.startswith("cursor/") else "generic"
    steps: list[Step] = []
    for i, params in enumerate(TRACE_STREAMS[name]):
        steps.append(("update", params))
        if i % 3 == 2:
            steps.append(("read", None))
    _assert_same(family, steps)


def test_the_recorded_traces_take_the_hot_path() -> None:
    """Not vacuous: real agents' chunks and tool updates are of the hot shapes."""
    taken = sum(_assert_same("generic", _updates(s)) for s in TRACE_STREAMS.values())
    assert taken >= 12


# ---------------------------------------------------------------- hot shapes

_surrogates = st.integers(0xD800, 0xDFFF).map(chr)
_pieces = st.one_of(
    st.sampled_from([SECRET, SECRET[:9], SECRET[9:], "password=hunter2hunter2", "\n", " "]),
    st.text(max_size=10),
    _surrogates,
)
texts = st.lists(_pieces, max_size=6).map("".join)
huge = st.sampled_from([COALESCE_MAX_BYTES, OUTPUT_TAIL_BYTES + 7, RAW_VALUE_BYTES + 1]).map(
    lambda n: ("é" + SECRET + "x" * 61) * (n // 64 + 1)
)
big_or_small = st.one_of(texts, texts, texts, huge)
values = st.recursive(
    st.none() | st.booleans() | st.integers() | texts | huge,
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(texts, inner, max_size=3),
    max_leaves=5,
)
tool_ids = st.sampled_from(["t1", "t2", "t3"])
message_ids = st.sampled_from(["m1", "m2", ""])
extra = st.sampled_from([{}, {}, {}, {"_meta": {"x": 1}}, {"futureField": 2}])


def _chunk(variant: str, mid: str, text: str, block: dict[str, Any], more: dict[str, Any]) -> Any:
    update = {"sessionUpdate": variant, "messageId": mid, "content": {**block, "text": text}}
    if not mid:
        del update["messageId"]
    return update | more


chunks = st.builds(
    _chunk,
    st.sampled_from(["agent_message_chunk", "agent_message_chunk", "agent_thought_chunk"]),
    message_ids,
    big_or_small,
    st.sampled_from([{"type": "text"}, {"type": "text"}, {"type": "text", "annotations": {}}]),
    extra,
)


def _tool_update(
    tid: str, status: Any, items: list[str] | None, raw: Any, more: dict[str, Any]
) -> Any:
    update: dict[str, Any] = {"sessionUpdate": "tool_call_update", "toolCallId": tid}
    if status is not None:
        update["status"] = status
    if items is not None:
        update["content"] = [
            {"type": "content", "content": {"type": "text", "text": t}} for t in items
        ]
    if raw is not None:
        update["rawOutput"] = raw
    return update | more


tool_updates = st.builds(
    _tool_update,
    tool_ids,
    st.sampled_from([None, "in_progress", "in_progress", "pending", "completed", "failed", 3]),
    st.none() | st.lists(big_or_small, max_size=3),
    st.none() | values,
    extra,
)
tool_starts = st.builds(
    lambda tid, kind, status: {
        "sessionUpdate": "tool_call",
        "toolCallId": tid,
        "title": f"run {SECRET}",
        "kind": kind,
        "status": status,
    },
    tool_ids,
    st.sampled_from(["execute", "edit", "other"]),
    st.sampled_from(["pending", "in_progress"]),
)
hot_updates = st.one_of(chunks, chunks, tool_updates, tool_updates, tool_starts)
steps = st.one_of(
    st.tuples(st.sampled_from(["update"] * 6 + ["answered"]), hot_updates).map(
        lambda s: (s[0], {"sessionId": "s1", "update": s[1]})
    ),
    st.just(("read", None)),
    st.sampled_from([("turn", "turn-2"), ("turn", "turn-3")]),
)


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    st.lists(steps, min_size=1, max_size=30),
    st.sampled_from(["generic", "claude", "cursor", "codex"]),
)
def test_hot_shapes_and_near_misses_are_the_same_on_the_hot_path(
    stream: list[Step], family: str
) -> None:
    _assert_same(family, stream)


@settings(max_examples=100, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(st.one_of(hostile_updates, hot_updates), min_size=1, max_size=20))
def test_hostile_streams_are_the_same_on_the_hot_path(stream: list[dict[str, Any]]) -> None:
    _assert_same("generic", _updates([{"sessionId": "s1", "update": u} for u in stream]))


# -------------------------------------------------------------- its teeth

_FLOOD: list[Step] = [
    ("update", {"sessionId": "s1", "update": u})
    for u in [
        {"sessionUpdate": "tool_call", "toolCallId": "t1", "title": "x", "kind": "execute"},
        {
            "sessionUpdate": "agent_message_chunk",
            "messageId": "m1",
            "content": {"type": "text", "text": f"key {SECRET[:9]}"},
        },
        {
            "sessionUpdate": "agent_message_chunk",
            "messageId": "m1",
            "content": {"type": "text", "text": f"{SECRET[9:]} \ud800 ok"},
        },
        {
            "sessionUpdate": "tool_call_update",
            "toolCallId": "t1",
            "status": "in_progress",
            "content": [{"type": "content", "content": {"type": "text", "text": f"out {SECRET}"}}],
            "rawOutput": {"stdout": SECRET},
        },
        {
            "sessionUpdate": "agent_message_chunk",
            "messageId": "m2",
            "content": {"type": "text", "text": "x" * (OUTPUT_TAIL_BYTES + 10)},
        },
        {
            "sessionUpdate": "tool_call_update",
            "toolCallId": "t1",
            "content": [
                {
                    "type": "content",
                    "content": {"type": "text", "text": "y" * (OUTPUT_TAIL_BYTES + 10)},
                }
            ],
        },
    ]
] + [
    (
        "answered",
        {
            "sessionId": "s1",
            "update": {
                "sessionUpdate": "tool_call_update",
                "toolCallId": "t1",
                "status": "pending",
            },
        },
    )
]


def _skip_flush(self: AcpNormalizer, update: Any, now_ms: float, answered: bool) -> Any:
    """Mutant: the tool update does not end the pending message first."""
    pending, self._pending = self._pending, None
    out = _real_hot_tool(self, update, now_ms, answered)
    self._pending = pending
    return out


def _not_late(self: AcpNormalizer, params: Any, *, now_ms: float, answered: bool = False) -> Any:
    """Mutant: the hot path forgets that the turn already answered."""
    return _real_hot(self, params, now_ms=now_ms, answered=False)


def _unredacted_raw(self: Any, state: Any, update: Any, *, parent_tool_call_id: Any) -> Any:
    """Mutant: rawOutput kept as received (neither redacted nor bounded)."""
    payload = _real_progress(self, state, update, parent_tool_call_id=parent_tool_call_id)
    if "rawOutput" in update:
        payload.__dict__["raw_output"] = update["rawOutput"]
    return payload


def _unowned(self: AcpNormalizer, variant: str, update: Any, answered: bool) -> Any:
    """Mutant: the chunk is coalesced without its owner turn."""
    out = _real_hot_chunk(self, variant, update, answered)
    if out is not None and self._pending is not None:
        self._pending.turn_id = None
    return out


_real_hot = AcpNormalizer.hot
_real_hot_tool = AcpNormalizer._hot_tool
_real_hot_chunk = AcpNormalizer._hot_chunk
_real_progress = ToolCallTracker.progress
MUTANTS: dict[str, tuple[Any, str, Callable[..., Any]]] = {
    "skip_flush": (AcpNormalizer, "_hot_tool", _skip_flush),
    "not_late": (AcpNormalizer, "hot", _not_late),
    "unredacted_raw": (ToolCallTracker, "progress", _unredacted_raw),
    "unowned_chunk": (AcpNormalizer, "_hot_chunk", _unowned),
}


@contextmanager
def _mutant(name: str) -> Iterator[None]:
    owner, attr, fn = MUTANTS[name]
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(owner, attr, fn)
        yield


def test_the_flood_shapes_are_the_same_and_hot() -> None:
    steps = [*_FLOOD, ("turn", "turn-2"), *_FLOOD[:1]]
    assert _assert_same("generic", steps) == 6


@pytest.mark.parametrize("name", sorted(MUTANTS))
def test_a_broken_hot_path_is_caught(name: str) -> None:
    with _mutant(name), pytest.raises(AssertionError):
        _assert_same("generic", [*_FLOOD, ("turn", "turn-2"), *_FLOOD[3:4]])
