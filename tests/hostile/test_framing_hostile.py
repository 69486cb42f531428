"""Framing under hostile input: nothing vanishes without a trace."""

from __future__ import annotations

import json

import pytest

from baton.acp import framing
from baton.acp.framing import Frame, LineDecoder


def test_empty_lines_between_frames_are_counted() -> None:
    decoder = LineDecoder()
    data = b'\n{"a":1}\n\n   \r\n\t\n{"b":2}\n\n'
    got = decoder.feed(data)
    assert [f.message for f in got if isinstance(f, Frame)] == [{"a": 1}, {"b": 2}]
    assert decoder.blank_lines == 5
    # split at every byte boundary: the same frames and the same count
    for cut in range(len(data) + 1):
        split = LineDecoder()
        frames = split.feed(data[:cut]) + split.feed(data[cut:])
        assert [f.message for f in frames if isinstance(f, Frame)] == [{"a": 1}, {"b": 2}]
        assert split.blank_lines == 5, cut


def test_a_lone_surrogate_is_repaired_at_the_frame_and_the_frame_says_so(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(framing, "REPAIR_AT_FRAMING", True)
    decoder = LineDecoder()
    escaped = b'{"a":"x\\ud800y","b":["\\udfff"],"\\udc80k":1}\n'
    cesu = b'{"a":"\xed\xa0\x80"}\n'
    pair = b'{"a":"\\ud83d\\ude00"}\n'  # a valid pair: nothing to repair
    korean = '{"a":"\ud55c\uad6d"}\n'.encode()  # \xed lead bytes, valid UTF-8
    frames = decoder.feed(escaped + cesu + pair + korean)
    assert [f.flags for f in frames if isinstance(f, Frame)] == [
        ("unencodable_text",),
        ("unencodable_text",),
        (),
        (),
    ]
    first = frames[0]
    assert isinstance(first, Frame)
    assert first.message == {"a": "x\ufffdy", "b": ["\ufffd"], "\ufffdk": 1}
    for frame in frames:
        assert isinstance(frame, Frame)
        json.dumps(frame.message, ensure_ascii=False).encode("utf-8")  # storable now
