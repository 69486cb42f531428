"""A tool call's unchanged output is not redacted and hashed again, unless a secret was
bound since (then it is redacted with it)."""

from __future__ import annotations

from typing import Any

from baton.events.acp_normalizer import AcpNormalizer
from baton.events.model import ToolOutput, _ToolExecution
from baton.security.redact import MARKER, Redactor

SECRET = "zq-late-bound-credential-8841"


def _tool(**update: Any) -> dict[str, Any]:
    return {"sessionId": "s1", "update": {"toolCallId": "t1", **update}}


def _output(normalizer: AcpNormalizer, **update: Any) -> ToolOutput:
    drafts = normalizer.update(_tool(sessionUpdate="tool_call_update", **update), now_ms=1)
    payload = drafts[-1].payload
    assert isinstance(payload, _ToolExecution) and payload.output is not None
    return payload.output


def _started(redactor: Redactor) -> AcpNormalizer:
    normalizer = AcpNormalizer(redaction=redactor, display_path=lambda p: p)
    normalizer.begin_turn("s1", "turn-1")
    text = {"type": "content", "content": {"type": "text", "text": f"echo {SECRET} done"}}
    normalizer.update(
        _tool(sessionUpdate="tool_call", title="t", status="in_progress", content=[text]),
        now_ms=0,
    )
    return normalizer


def test_unchanged_output_is_reused() -> None:
    normalizer = _started(Redactor())
    first = _output(normalizer, status="in_progress")
    again = _output(normalizer, status="in_progress")
    assert again is first
    other = {"type": "content", "content": {"type": "text", "text": "new"}}
    assert _output(normalizer, content=[other]).tail == "new"


def test_a_secret_bound_after_the_output_was_seen_is_redacted_in_it() -> None:
    redactor = Redactor()
    normalizer = _started(redactor)
    assert SECRET in _output(normalizer, status="in_progress").tail
    redactor.bind([SECRET])
    output = _output(normalizer, status="completed")
    assert SECRET not in output.tail and MARKER in output.tail
