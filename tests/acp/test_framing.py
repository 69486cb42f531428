"""The NDJSON framer: whole input, byte by byte, and every kind of bad line."""

from __future__ import annotations

import json

import pytest
from hypothesis import given
from hypothesis import strategies as st

from baton.acp.framing import Frame, FrameError, LineDecoder, encode_message


def feed_all(
    decoder: LineDecoder, data: bytes, step: int | None = None
) -> list[Frame | FrameError]:
    out: list[Frame | FrameError] = []
    if step is None:
        out.extend(decoder.feed(data))
    else:
        for i in range(0, len(data), step):
            out.extend(decoder.feed(data[i : i + step]))
    out.extend(decoder.close())
    return out


MESSAGES = [
    {"jsonrpc": "2.0", "method": "session/update", "params": {"text": "héllo 👋\nsecond"}},
    {"jsonrpc": "2.0", "id": 1, "result": None},
    {"jsonrpc": "2.0", "id": "a", "error": {"code": -32601, "message": "nope"}},
]


@pytest.mark.parametrize("step", [None, 1, 2, 7, 64])
def test_split_at_every_boundary_yields_same_frames(step: int | None) -> None:
    data = b"".join(encode_message(m) for m in MESSAGES)
    frames = feed_all(LineDecoder(), data, step)
    assert [f.message for f in frames if isinstance(f, Frame)] == MESSAGES
    assert not [f for f in frames if isinstance(f, FrameError)]


def test_crlf_and_blank_lines_are_tolerated() -> None:
    data = b'{"a":1}\r\n\n   \n{"b":2}\n'
    frames = feed_all(LineDecoder(), data)
    assert [f.message for f in frames if isinstance(f, Frame)] == [{"a": 1}, {"b": 2}]


@pytest.mark.parametrize("step", [None, 1000, 4096])
def test_oversized_line_is_skipped_without_buffering_and_stream_continues(step: int | None) -> None:
    decoder = LineDecoder(max_line_bytes=1000)
    big = b'{"x":"' + b"a" * 5000 + b'"}\n'
    data = b'{"before":1}\n' + big + b'{"after":2}\n'
    frames = feed_all(decoder, data, step)
    errors = [f for f in frames if isinstance(f, FrameError)]
    assert [f.message for f in frames if isinstance(f, Frame)] == [{"before": 1}, {"after": 2}]
    assert len(errors) == 1
    assert errors[0].kind == "oversized"
    assert errors[0].size == len(big) - 1
    assert errors[0].preview.startswith('{"x":"aaa')
    assert decoder.buffered == 0


def test_oversized_memory_stays_bounded_while_streaming() -> None:
    decoder = LineDecoder(max_line_bytes=1000)
    decoder.feed(b'{"x":"')
    for _ in range(100):
        decoder.feed(b"a" * 10_000)
        assert decoder.buffered <= 1000
    out = decoder.feed(b'"}\n{"ok":true}\n')
    assert isinstance(out[0], FrameError) and out[0].kind == "oversized"
    assert isinstance(out[1], Frame) and out[1].message == {"ok": True}


def test_invalid_utf8_is_reported_with_escaped_preview() -> None:
    data = b'{"text":"\xff\xfe"}\n{"ok":1}\n'
    frames = feed_all(LineDecoder(), data)
    assert isinstance(frames[0], FrameError) and frames[0].kind == "invalid_utf8"
    assert "\\xff" in frames[0].preview
    assert isinstance(frames[1], Frame)


@pytest.mark.parametrize(
    ("line", "kind"),
    [(b'{"jsonrpc":"2.0",', "invalid_json"), (b"[1,2]", "not_object"), (b'"str"', "not_object")],
)
def test_malformed_lines(line: bytes, kind: str) -> None:
    frames = feed_all(LineDecoder(), line + b"\n" + b'{"ok":1}\n')
    assert isinstance(frames[0], FrameError) and frames[0].kind == kind
    assert isinstance(frames[1], Frame)


def test_unterminated_trailing_line_is_reported_at_close() -> None:
    decoder = LineDecoder()
    assert decoder.feed(b'{"a":1}\n{"partial":') == [Frame({"a": 1}, 7)]
    errors = decoder.close()
    assert len(errors) == 1 and "unterminated" in errors[0].detail


@given(st.binary(max_size=2000), st.integers(min_value=1, max_value=50))
def test_any_bytes_yield_frames_or_errors_never_exceptions(data: bytes, step: int) -> None:
    decoder = LineDecoder(max_line_bytes=300)
    for item in feed_all(decoder, data, step):
        assert isinstance(item, Frame | FrameError)


@given(st.lists(st.dictionaries(st.text(max_size=5), st.text(max_size=20), max_size=4), max_size=5))
def test_encode_decode_round_trip(messages: list[dict[str, str]]) -> None:
    data = b"".join(encode_message(m) for m in messages)
    frames = feed_all(LineDecoder(), data, 3)
    assert [f.message for f in frames if isinstance(f, Frame)] == messages
    assert all(b"\n" not in encode_message(m)[:-1] for m in messages)
    assert json.loads(encode_message({"k": "\n"})) == {"k": "\n"}


def test_absurdly_deep_nesting_is_an_error_not_a_crash() -> None:
    frames = feed_all(LineDecoder(), b"[" * 100_000 + b"]" * 100_000 + b'\n{"ok":1}\n')
    assert isinstance(frames[0], FrameError) and frames[0].kind == "invalid_json"
    assert isinstance(frames[1], Frame)
