"""A terminal the agent runs itself reports its output in ``_meta`` (Zed's convention, the
TypeScript Codex adapter): the chunks become the tool event's output, bounded and redacted like
any output, and the terminal is named in ``terminal_ids``."""

from __future__ import annotations

import hashlib
from typing import Any

from baton.events.acp_normalizer import AcpNormalizer
from baton.events.bounds import OUTPUT_TAIL_BYTES
from baton.events.model import _ToolExecution
from baton.providers.registry import extension_for
from baton.security.redact import MARKER, Redactor

SECRET = "zq-agent-terminal-credential-5521"


def _normalizer(redactor: Redactor | None = None, family: str | None = None) -> AcpNormalizer:
    normalizer = AcpNormalizer(
        redaction=redactor or Redactor(),
        display_path=lambda p: p,
        extension=extension_for(family) if family else None,
    )
    normalizer.begin_turn("s1", "turn-1")
    return normalizer


def _update(normalizer: AcpNormalizer, **update: Any) -> list[Any]:
    params = {"sessionId": "s1", "update": {"toolCallId": "call_1", **update}}
    return [d.payload for d in normalizer.update(params, now_ms=1)]


def _tool(payloads: list[Any]) -> _ToolExecution:
    [tool] = [p for p in payloads if isinstance(p, _ToolExecution)]
    return tool


def _start(normalizer: AcpNormalizer) -> None:
    _update(
        normalizer,
        sessionUpdate="tool_call",
        title="make",
        kind="execute",
        status="in_progress",
        content=[{"type": "terminal", "terminalId": "call_1"}],
        _meta={"terminal_info": {"terminal_id": "call_1", "cwd": "/w"}},
    )


def _chunk(data: Any, key: str = "terminal_output_delta", **update: Any) -> dict[str, Any]:
    return {
        "sessionUpdate": "tool_call_update",
        "_meta": {key: {"terminal_id": "call_1", "data": data}},
        **update,
    }


def test_streamed_chunks_become_the_output_of_the_tool_event() -> None:
    normalizer = _normalizer()
    _start(normalizer)
    first = _tool(_update(normalizer, **_chunk("compiling\n")))
    assert first.output is not None and first.output.tail == "compiling\n"
    done = _tool(
        _update(
            normalizer,
            **_chunk("ok\n", status="completed"),
        )
    )
    assert done.status == "completed" and done.terminal_ids == ["call_1"]
    assert done.output is not None and done.output.tail == "compiling\nok\n"
    assert done.output.total_bytes == len("compiling\nok\n") and not done.output.truncated


def test_zeds_terminal_output_key_appends_too() -> None:
    normalizer = _normalizer()
    _start(normalizer)
    _update(normalizer, **_chunk("a", key="terminal_output"))
    done = _tool(_update(normalizer, **_chunk("b", key="terminal_output", status="completed")))
    assert done.output is not None and done.output.tail == "ab"


def test_a_terminal_named_only_in_meta_is_still_named() -> None:
    normalizer = _normalizer()
    _update(normalizer, sessionUpdate="tool_call", title="run", kind="execute")
    done = _tool(
        _update(
            normalizer,
            sessionUpdate="tool_call_update",
            status="completed",
            _meta={
                "terminal_output_delta": {"terminal_id": "own-7", "data": "out\n"},
                "terminal_exit": {"terminal_id": "own-7", "exit_code": 0, "signal": None},
            },
        )
    )
    assert done.terminal_ids == ["own-7"]
    assert done.output is not None and done.output.tail == "out\n"


def test_the_output_is_redacted() -> None:
    redactor = Redactor()
    redactor.bind([SECRET])
    normalizer = _normalizer(redactor)
    _start(normalizer)
    _update(normalizer, **_chunk(f"token={SECRET[:10]}"))
    done = _tool(_update(normalizer, **_chunk(f"{SECRET[10:]} end\n", status="completed")))
    assert done.output is not None
    assert SECRET not in done.output.tail and MARKER in done.output.tail, "split across chunks"


def test_a_long_stream_keeps_its_tail_and_counts_and_hashes_all_of_it() -> None:
    normalizer = _normalizer()
    _start(normalizer)
    line = "x" * 1023 + "\n"
    chunks = (3 * OUTPUT_TAIL_BYTES) // len(line)
    for _ in range(chunks - 1):
        _update(normalizer, **_chunk(line))
    done = _tool(_update(normalizer, **_chunk("last line", status="completed")))
    output = done.output
    whole = (line * (chunks - 1) + "last line").encode()
    assert output is not None and output.truncated
    assert output.total_bytes == len(whole)
    assert output.sha256 == hashlib.sha256(whole).hexdigest()
    assert output.tail.endswith("x\nlast line"), "the unfinished last line shows at the end"
    assert len(output.tail.encode()) <= OUTPUT_TAIL_BYTES


def test_a_secret_bound_later_is_redacted_from_the_kept_tail() -> None:
    redactor = Redactor()
    normalizer = _normalizer(redactor)
    _start(normalizer)
    first = _tool(_update(normalizer, **_chunk(f"key {SECRET}\n")))
    assert first.output is not None and SECRET in first.output.tail
    redactor.bind([SECRET])
    done = _tool(_update(normalizer, **_chunk("done\n", status="completed")))
    assert done.output is not None
    assert SECRET not in done.output.tail and MARKER in done.output.tail


def test_content_text_wins_and_malformed_meta_is_ignored() -> None:
    normalizer = _normalizer()
    _start(normalizer)
    _update(normalizer, **_chunk(12))  # not text: nothing kept
    _update(normalizer, sessionUpdate="tool_call_update", _meta={"terminal_output_delta": "x"})
    text = {"type": "content", "content": {"type": "text", "text": "the agent's summary"}}
    done = _tool(_update(normalizer, **_chunk("raw\n", status="completed", content=[text])))
    assert done.output is not None and done.output.tail == "the agent's summary"


def test_no_provider_calls_the_terminal_keys_unknown() -> None:
    normalizer = _normalizer(family="codex")
    started = _update(
        normalizer,
        sessionUpdate="tool_call",
        title="run",
        kind="execute",
        _meta={"terminal_info": {"terminal_id": "call_1", "cwd": "/w"}},
    )
    payloads = _update(
        normalizer,
        **_chunk("out\n", status="completed"),
    )
    notices = [p for p in started + payloads if getattr(p, "category", None) == "unclassified"]
    assert not notices, notices
    assert _tool(payloads).output is not None


def test_a_named_terminal_without_streamed_output_leaves_the_output_to_others() -> None:
    """``terminal_info`` alone streams nothing: the output stays ``None`` (the runner then
    takes what the agent reports in ``rawOutput``)."""
    normalizer = _normalizer()
    _start(normalizer)
    done = _tool(
        _update(
            normalizer,
            sessionUpdate="tool_call_update",
            status="completed",
            rawOutput={"output": "from raw\n"},
        )
    )
    assert done.terminal_ids == ["call_1"] and done.output is None
