"""A bug in baton while handling one frame: that frame's typed, visible error; the turn goes on.

Was: the exception escaped the reader loop, whose ``finally`` failed every pending request
with "agent closed its stdout" (untrue), and the turn ended ``turn.failed(AgentExited)``.
Faults are injected into baton's own parts (the normalizer, the emitter, a request's
admission) on one frame; every frame after it must still be recorded.
"""

from __future__ import annotations

from typing import Any

import pytest

from baton.events.acp_normalizer import AcpNormalizer
from baton.events.model import ToolExecutionStarted
from baton.runner import client_methods
from baton.runner.emitter import EventEmitter
from tests.support.harness import Harness, fake


def _internal(harness: Harness) -> list[Any]:
    return [d for d in harness.of("harness.diagnostic") if d.category == "internal"]


def _no_false_exit(harness: Harness) -> None:
    assert not harness.of("turn.failed"), harness.types()
    for event in harness.events:
        assert "closed its stdout" not in event.to_json(), event


async def test_a_normalizer_fault_on_one_frame_is_its_error_and_the_turn_completes(
    harness: Harness, monkeypatch: pytest.MonkeyPatch
) -> None:
    real = AcpNormalizer.update
    calls = 0

    def update(self: AcpNormalizer, params: Any, **kw: Any) -> Any:
        nonlocal calls
        calls += 1
        if calls == 1:  # the first chunk of the turn
            raise RuntimeError("normalizer bug on frame text: Hello from the fake agent")
        return real(self, params, **kw)

    monkeypatch.setattr(AcpNormalizer, "update", update)
    session = await harness.open(fake("ok"))
    outcome = await session.prompt("go")
    assert outcome.status == "completed", outcome
    _no_false_exit(harness)
    text = "".join(p.text for p in harness.of("transcript.assistant"))
    assert text == "The turn is done.", "the next frame is still recorded"
    [diagnostic] = _internal(harness)
    assert diagnostic.method == "session/update"
    assert isinstance(diagnostic.frame, int) and diagnostic.frame >= 3  # after the handshake
    assert "RuntimeError" in diagnostic.summary and "reads on" in diagnostic.summary
    [event] = [e for e in harness.events if e.payload is diagnostic]
    assert event.turn_id == outcome.turn_id, "the error is shown in the turn it happened in"
    assert (await session.prompt("again")).status == "completed"


async def test_an_emitter_fault_on_one_frame_is_its_error_and_the_turn_completes(
    harness: Harness, monkeypatch: pytest.MonkeyPatch
) -> None:
    real = EventEmitter.emit_drafts
    failed = False

    async def emit_drafts(self: EventEmitter, drafts: Any, **kw: Any) -> None:
        nonlocal failed
        drafts = list(drafts)
        if not failed and any(isinstance(d.payload, ToolExecutionStarted) for d in drafts):
            failed = True
            raise OSError("the store hiccuped")
        await real(self, drafts, **kw)

    monkeypatch.setattr(EventEmitter, "emit_drafts", emit_drafts)
    session = await harness.open(fake("permission"), wait_timeout=0)
    outcome = await session.prompt("go")
    assert failed and outcome.status == "completed", outcome
    _no_false_exit(harness)
    [diagnostic] = _internal(harness)
    assert diagnostic.method == "session/update" and "OSError" in diagnostic.summary
    types = harness.types()
    assert "request.created" in types, "the permission request after the fault was handled"
    assert "permission outcome:" in "".join(p.text for p in harness.of("transcript.assistant"))


async def test_a_fault_admitting_a_request_answers_it_internal_error_and_goes_on(
    harness: Harness, monkeypatch: pytest.MonkeyPatch
) -> None:
    def broken(*_a: Any, **_k: Any) -> Any:
        raise AttributeError("document builder bug")

    monkeypatch.setattr(client_methods, "permission_document", broken)
    session = await harness.open(fake("permission"), wait_timeout=0)
    outcome = await session.prompt("go")
    assert outcome.status == "completed", outcome
    _no_false_exit(harness)
    [diagnostic] = _internal(harness)
    assert diagnostic.method == "session/request_permission"
    assert "AttributeError" in diagnostic.summary
    text = "".join(p.text for p in harness.of("transcript.assistant"))
    assert "permission outcome: error" in text, "the agent got a JSON-RPC error reply"
