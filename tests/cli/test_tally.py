"""The exit tally: what a run's exit code depends on beyond the turn's outcome."""

from __future__ import annotations

from baton.cli.tally import Tally
from baton.events.model import (
    Payload,
    RequestAnswered,
    RequestCancelled,
    RequestCreated,
    RequestExpired,
    RequestRejected,
    ToolExecutionCompleted,
    ToolExecutionProgressed,
    TranscriptAssistant,
)
from baton.events.sequencer import Sequencer


def _tally(payloads: list[Payload]) -> Tally:
    tally, sequencer = Tally(), Sequencer("r")
    for payload in payloads:
        tally(sequencer.stamp(payload))
    return tally


def _request(kind: type[RequestCreated], request_id: str, **fields: object) -> RequestCreated:
    return kind(request_id=request_id, kind="permission", **fields)


def test_each_counted_type_counts_and_streaming_detail_counts_nothing() -> None:
    tally = _tally(
        [
            _request(RequestCreated, "a", title="A"),
            _request(RequestCreated, "b", title="B"),
            _request(RequestCreated, "c", title="C"),
            _request(RequestCreated, "d", title="D"),
            _request(RequestCreated, "e", title="E"),
            _request(RequestCreated, "f", title="F"),
            RequestAnswered(
                request_id="a", kind="permission", decided_by="human", answer={"decision": "deny"}
            ),
            RequestAnswered(
                request_id="b", kind="permission", decided_by="human", answer={"decision": "allow"}
            ),
            RequestExpired(request_id="c", kind="permission", reason="nobody"),
            RequestCancelled(request_id="d", kind="permission", reason="turn ended"),
            RequestRejected(request_id="e", kind="permission", reason="malformed"),
            ToolExecutionCompleted(tool_call_id="t1", title="t", kind="execute", status="failed"),
            ToolExecutionCompleted(
                tool_call_id="t2", title="t", kind="execute", status="completed"
            ),
            ToolExecutionProgressed(tool_call_id="t3", title="t", kind="other", status="failed"),
            TranscriptAssistant(message_id="m", text="x", chunks=1, content_type="text"),
        ]
    )
    assert (tally.denied, tally.expired, tally.failed_steps) == (1, 1, 1)
    assert list(tally.waiting) == ["f"], "every other request was settled"
    assert not tally.clean
    assert _tally([TranscriptAssistant(message_id="m", text="x")]).clean
