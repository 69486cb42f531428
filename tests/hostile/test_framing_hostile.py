"""Framing under hostile input: nothing vanishes without a trace."""

from __future__ import annotations

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
