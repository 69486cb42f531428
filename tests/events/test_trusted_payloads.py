"""Payloads built without validation (:mod:`baton.events.trusted`) are those validation builds.

Two oracles: the model itself (``cls(**kw)`` against ``trusted(cls, **kw)`` for any
arguments of the right types), and the whole normalizer run twice over the same
updates, once as shipped and once with every trusted build replaced by validation:
every recorded trace in ``tests/traces`` and hypothesis-generated hostile update
streams must give the same events, object for object and byte for byte.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from pydantic import BaseModel
from pydantic_core import PydanticSerializationError

from baton.events import acp_normalizer, bounds, tools
from baton.events.acp_normalizer import AcpNormalizer, Draft
from baton.events.model import (
    DiffContent,
    Location,
    ToolExecutionCompleted,
    ToolExecutionProgressed,
    ToolExecutionStarted,
    ToolOutput,
    TranscriptAssistant,
    TranscriptThinking,
    TranscriptUser,
)
from baton.events.sequencer import Sequencer
from baton.events.trusted import trusted
from baton.providers.registry import extension_for
from baton.security.redact import Redactor
from tests.hostile.test_pipeline_properties import updates

TRACES = Path(__file__).resolve().parents[1] / "traces"
MODULES = (acp_normalizer, bounds, tools)
"""Every module that builds payloads with :func:`trusted`."""

texts = st.text(st.characters(codec=None, categories=None), max_size=12)
json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats() | texts,
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(texts, inner, max_size=3),
    max_leaves=6,
)
outputs = st.builds(
    ToolOutput, tail=texts, total_bytes=st.integers(0), sha256=texts, truncated=st.booleans()
)


def _tool_kwargs() -> st.SearchStrategy[dict[str, Any]]:
    optional = {
        "locations": st.lists(st.builds(Location, path=texts, line=st.none() | st.integers())),
        "raw_input": json_values,
        "raw_output": json_values,
        "diffs": st.lists(
            st.builds(DiffContent, path=texts, old_text=st.none() | texts, new_text=texts),
            max_size=2,
        ),
        "output": st.none() | outputs,
        "terminal_ids": st.lists(texts, max_size=2),
        "agent_terminal_ids": st.lists(texts, max_size=2),
        "parent_tool_call_id": st.none() | texts,
    }
    required = {"tool_call_id": texts, "title": texts, "kind": texts, "status": texts}
    return st.fixed_dictionaries(required, optional=optional)


def _same(a: BaseModel, b: BaseModel) -> None:
    assert type(a) is type(b)
    assert a == b
    assert a.__dict__ == b.__dict__ and list(a.__dict__) == list(b.__dict__)
    assert a.__pydantic_fields_set__ == b.__pydantic_fields_set__
    assert _json(a) == _json(b)
    assert a.model_dump() == b.model_dump()


def _json(model: BaseModel) -> str:
    """The model's JSON, or the name of the error it raises (a lone surrogate)."""
    try:
        return model.model_dump_json()
    except PydanticSerializationError as exc:
        return f"raises {type(exc).__name__}"


@given(
    st.sampled_from([ToolExecutionStarted, ToolExecutionProgressed, ToolExecutionCompleted]),
    _tool_kwargs(),
)
def test_a_trusted_tool_payload_is_the_validated_one(cls: Any, kwargs: dict[str, Any]) -> None:
    _same(trusted(cls, **kwargs), cls(**kwargs))


@given(
    st.sampled_from([TranscriptAssistant, TranscriptThinking, TranscriptUser]),
    st.fixed_dictionaries(
        {"message_id": texts, "text": texts},
        optional={"chunks": st.integers(), "content_type": texts},
    ),
)
def test_a_trusted_transcript_payload_is_the_validated_one(
    cls: Any, kwargs: dict[str, Any]
) -> None:
    _same(trusted(cls, **kwargs), cls(**kwargs))


def test_defaults_made_by_a_factory_are_fresh_per_object() -> None:
    a = trusted(ToolExecutionProgressed, tool_call_id="t", title="", kind="other", status="x")
    b = trusted(ToolExecutionProgressed, tool_call_id="t", title="", kind="other", status="x")
    assert a.locations == [] and a.locations is not b.locations


def test_a_name_that_is_not_a_field_or_a_missing_field_is_refused() -> None:
    for _ in range(2):  # a refused call shape is refused every time (never remembered)
        with pytest.raises(TypeError, match="not fields"):
            trusted(ToolOutput, tail="", total_bytes=0, sha256="", truncated=False, extra=1)
        with pytest.raises(TypeError, match="missing fields"):
            trusted(ToolOutput, tail="", total_bytes=0, sha256="")


def test_each_call_shape_is_its_own() -> None:
    """The names are checked once per call shape: the same fields given in another order,
    or fewer of them, are another shape (field order and defaults as validation gives)."""
    values = {"tail": "t", "total_bytes": 1, "sha256": "s", "truncated": False}
    for _ in range(2):
        _same(trusted(ToolOutput, **values), ToolOutput(**values))
        backwards = dict(reversed(values.items()))
        _same(trusted(ToolOutput, **backwards), ToolOutput(**backwards))
    some = {"tool_call_id": "t", "title": "", "kind": "other", "status": "x"}
    more = {**some, "terminal_ids": ["a"], "agent_terminal_ids": ["b"]}
    for kwargs in (some, more, some, dict(reversed(more.items()))):
        _same(trusted(ToolExecutionProgressed, **kwargs), ToolExecutionProgressed(**kwargs))


# ------------------------------------------------------------ the whole normalizer


def _validating(cls: type[BaseModel], /, **values: Any) -> BaseModel:
    return cls(**values)


def _normalized(family: str, stream: list[dict[str, Any]]) -> list[tuple[Draft, str]]:
    normalizer = AcpNormalizer(
        redaction=Redactor(["sk-bound-secret-0123456789"]),
        display_path=lambda p: p,
        extension=extension_for(family),
        workspace="/w",
    )
    sequencer = Sequencer("run-1", clock=lambda: 1_700_000_000.5)
    drafts = list(normalizer.begin_turn("s1", "turn-1"))
    for i, params in enumerate(stream):
        drafts += normalizer.update(params, now_ms=float(i))
        if i % 3 == 2:
            drafts += normalizer.flush_ready()
    drafts += normalizer.settle_open("cancelled", 1e6)
    drafts += normalizer.end_turn(None)
    return [
        (
            d,
            sequencer.stamp(
                d.payload, session_id="s1", turn_id=d.turn_id or "turn-1", raw=d.raw
            ).to_json(),
        )
        for d in drafts
    ]


def _both_ways(monkeypatch: pytest.MonkeyPatch, family: str, stream: list[dict[str, Any]]) -> None:
    fast = _normalized(family, stream)
    with monkeypatch.context() as patch:
        for module in MODULES:
            patch.setattr(module, "trusted", _validating)
        slow = _normalized(family, stream)
    assert [line for _, line in fast] == [line for _, line in slow]
    for (a, _), (b, _) in zip(fast, slow, strict=True):
        _same(a.payload, b.payload)
        assert (a.raw, a.turn_id, a.flags) == (b.raw, b.turn_id, b.flags)


def _trace_updates() -> Iterator[tuple[str, list[dict[str, Any]]]]:
    for path in sorted(TRACES.glob("*/*.ndjson")):
        stream = []
        for line in path.read_text().splitlines():
            record = json.loads(line)
            message = record.get("msg", {})
            if record.get("dir") == "agent" and message.get("method") == "session/update":
                stream.append(message["params"])
        if stream:
            yield f"{path.parent.name}/{path.stem}", stream


TRACE_STREAMS = dict(_trace_updates())


def test_there_are_recorded_updates() -> None:
    assert len(TRACE_STREAMS) >= 10
    assert sum(len(s) for s in TRACE_STREAMS.values()) >= 50


@pytest.mark.parametrize("name", sorted(TRACE_STREAMS))
def test_recorded_traces_normalize_the_same_without_validation(
    name: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    family = "cursor" if name.startswith("cursor/") else "generic"
    _both_ways(monkeypatch, family, TRACE_STREAMS[name])


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    st.lists(updates, min_size=1, max_size=20),
    st.sampled_from(["generic", "claude", "cursor", "codex"]),
)
def test_hostile_updates_normalize_the_same_without_validation(
    stream: list[dict[str, Any]], family: str
) -> None:
    with pytest.MonkeyPatch.context() as monkeypatch:
        _both_ways(monkeypatch, family, [{"sessionId": "s1", "update": u} for u in stream])
