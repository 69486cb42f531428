"""Only the agent's faults are caught: malformed native payloads become notices, never errors.

Every sample native payload of every provider (``tests/providers/samples.py``) and every
stable ACP variant is mutated at random paths into hostile shapes (wrong types, huge and
non-finite numbers, deep nesting, missing keys). Handlers must answer each with payloads
(a ``malformed`` notice is fine); any exception escaping is a bug in baton, because the
seam catches only :data:`baton.events.extension.AGENT_FAULTS`.
"""

from __future__ import annotations

import copy
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from baton.events.acp_normalizer import STABLE_VARIANTS, AcpNormalizer
from baton.events.extension import AGENT_FAULTS, MalformedPayload, TurnContext, require
from baton.events.redaction import NoRedaction
from baton.providers.registry import extension_for
from tests.providers.samples import SAMPLES

HOSTILE = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(min_value=-(2**70), max_value=2**70),
    st.floats(allow_nan=True, allow_infinity=True),
    st.text(max_size=8),
    st.just("\ud800"),
    st.lists(st.integers(), max_size=3),
    st.dictionaries(st.text(max_size=4), st.integers(), max_size=3),
    st.just([[[[[[[[[[]]]]]]]]]]),
)

STABLE_SAMPLES: dict[str, dict[str, Any]] = {
    "agent_message_chunk": {"messageId": "m", "content": {"type": "text", "text": "hi"}},
    "agent_thought_chunk": {"content": {"type": "text", "text": "hmm"}},
    "user_message_chunk": {"content": {"type": "text", "text": "go"}},
    "tool_call": {
        "toolCallId": "t",
        "title": "Edit",
        "kind": "edit",
        "status": "pending",
        "locations": [{"path": "/w/a.py", "line": 3}],
        "content": [{"type": "diff", "path": "/w/a.py", "oldText": "a", "newText": "b"}],
        "rawInput": {"path": "/w/a.py"},
    },
    "tool_call_update": {
        "toolCallId": "t",
        "status": "completed",
        "content": [
            {"type": "content", "content": {"type": "text", "text": "ok"}},
            {"type": "terminal", "terminalId": "term-1"},
        ],
        "rawOutput": {"ok": True},
    },
    "plan": {"entries": [{"content": "Do", "status": "pending", "priority": "high"}]},
    "available_commands_update": {"availableCommands": [{"name": "init"}]},
    "current_mode_update": {"currentModeId": "build"},
    "config_option_update": {"configOptions": [{"id": "model", "currentValue": "m"}]},
    "session_info_update": {"title": "t", "updatedAt": "2026-01-01T00:00:00Z"},
    "usage_update": {"used": 1, "size": 2, "cost": {"amount": 0.1, "currency": "USD"}},
}
assert set(STABLE_SAMPLES) == set(STABLE_VARIANTS), "a stable variant without a sample"


def _paths(value: Any, prefix: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
    out = [prefix]
    if isinstance(value, dict):
        for key, item in value.items():
            out += _paths(item, (*prefix, key))
    elif isinstance(value, list):
        for index, item in enumerate(value):
            out += _paths(item, (*prefix, index))
    return out


@st.composite
def mutated(draw: st.DrawFn, sample: Any) -> Any:
    """``sample`` with a few of its values replaced by hostile ones (or removed)."""
    value = copy.deepcopy(sample)
    paths = [p for p in _paths(value) if p]
    for _ in range(draw(st.integers(min_value=1, max_value=3))):
        if not paths:
            break
        path = draw(st.sampled_from(paths))
        parent = value
        try:
            for key in path[:-1]:
                parent = parent[key]
            if draw(st.booleans()) and isinstance(parent, dict):
                parent.pop(path[-1], None)
            else:
                # a copy: ``st.just`` hands out one shared list, and a later mutation in
                # place would make it contain itself (a structure no JSON decode produces)
                parent[path[-1]] = copy.deepcopy(draw(HOSTILE))
        except (KeyError, IndexError, TypeError):
            continue  # an earlier mutation changed the shape above this path
    return value


def _context() -> TurnContext:
    return TurnContext(session_id="sess", turn_id="t1", workspace="/w")


NATIVE = sorted(SAMPLES, key=repr)


@pytest.mark.parametrize("key", NATIVE, ids=["/".join(k) for k in NATIVE])
@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(data=st.data())
def test_a_mutated_native_payload_never_raises(key: tuple[str, str, str], data: Any) -> None:
    family, kind, native = key
    ext = extension_for(family)
    ctx = _context()
    ext.begin_turn(ctx)
    sample = SAMPLES[key]
    if kind == "update":
        update = data.draw(mutated({"sessionUpdate": native, **sample}))
        ext.classify_update(native, update, ctx)
        ext.foreign_session_update("child-1", update, ctx)
    elif kind == "method":
        params = data.draw(mutated(sample))
        if isinstance(params, dict):
            ext.vendor_method(native, params, has_id=data.draw(st.booleans()), ctx=ctx)
    else:
        variant, value = sample
        meta = data.draw(mutated({native: value}))
        ext.observe_update(variant, {"sessionUpdate": variant, "_meta": meta}, ctx)
    ext.end_turn(ctx)


FAMILIES = sorted({family for family, _, _ in SAMPLES} | {"generic"})


@pytest.mark.parametrize("variant", sorted(STABLE_SAMPLES))
@settings(max_examples=40, deadline=None)
@given(data=st.data())
def test_a_mutated_stable_update_never_raises(variant: str, data: Any) -> None:
    family = data.draw(st.sampled_from(FAMILIES))
    normalizer = AcpNormalizer(
        redaction=NoRedaction(), display_path=lambda p: p, extension=extension_for(family)
    )
    normalizer.begin_turn("sess", "t1")
    update = data.draw(mutated({"sessionUpdate": variant, **STABLE_SAMPLES[variant]}))
    normalizer.update({"sessionId": "sess", "update": update}, now_ms=1.0)
    normalizer.flush()
    normalizer.end_turn(None)


def test_require_names_what_failed() -> None:
    assert require("x", str, "title") == "x"
    with pytest.raises(MalformedPayload, match="toolCallId must be str or int, not NoneType"):
        require(None, (str, int), "toolCallId")
    with pytest.raises(MalformedPayload, match="boolean"):
        require(True, int, "line")
    assert MalformedPayload in AGENT_FAULTS and KeyError not in AGENT_FAULTS


def test_a_bug_in_a_handler_is_not_mistaken_for_the_agent() -> None:
    """The seam does not catch a baton bug: it propagates instead of becoming a notice."""
    ext = extension_for("cursor")
    ctx = _context()

    def broken(update: Any, ctx: TurnContext) -> list[Any]:
        raise KeyError("a bug in baton")

    ext._updates["subagent_spawned"] = broken
    with pytest.raises(KeyError, match="a bug in baton"):
        ext.classify_update("subagent_spawned", {"sessionUpdate": "subagent_spawned"}, ctx)
