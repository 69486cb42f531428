"""The frame parser (msgspec first, ``json.loads`` for what it refuses) decodes every
line exactly as ``json.loads`` alone: same objects, same errors, over hostile input."""

from __future__ import annotations

import json
from typing import Any

from hypothesis import example, given, settings
from hypothesis import strategies as st

from baton.acp import framing
from baton.acp.framing import Frame, FrameError, decode_line


def outcome(loads: Any, data: bytes) -> tuple[str, object]:
    """What a parser makes of ``data``: the value's repr (floats, -0.0, key order and
    int-vs-float all show in it), or the type of what it raised."""
    try:
        return ("value", repr(loads(data)))
    except Exception as exc:
        return ("error", type(exc))


# Every code point, lone surrogates included.
any_text = st.text(st.characters(codec=None, categories=None), max_size=12)
scalars = (
    st.none()
    | st.booleans()
    | st.integers()  # unbounded: far beyond 64 bits
    | st.floats(allow_nan=True, allow_infinity=True)
    | any_text
)
values = st.recursive(
    scalars,
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(any_text, inner, max_size=4),
    max_leaves=20,
)


def encoded(value: Any, ascii_only: bool) -> bytes:
    text = json.dumps(value, ensure_ascii=ascii_only)
    return text.encode("utf-8", "surrogatepass")  # a lone surrogate as CESU bytes


@settings(max_examples=400)
@given(values, st.booleans())
def test_any_json_value_decodes_as_json_loads_does(value: Any, ascii_only: bool) -> None:
    data = encoded(value, ascii_only)
    assert outcome(framing.loads, data) == outcome(json.loads, data)


NUMBER = r"-?(0|[1-9][0-9]{0,45})(\.[0-9]{1,30})?([eE][+-]?[0-9]{1,4})?"


@settings(max_examples=400)
@given(st.from_regex(NUMBER, fullmatch=True))
@example("18446744073709551616")  # 2**64: orjson turns this into a float
@example("-9223372036854775809")
@example("1e400")
@example("-0")
@example("-0.0")
@example("2.4e-324")
def test_number_literals_decode_as_json_loads_does(literal: str) -> None:
    data = b'{"n":' + literal.encode() + b"}"
    assert outcome(framing.loads, data) == outcome(json.loads, data)


HOSTILE = [
    b'{"x":"\\ud800"}',
    b'{"x":"\\udc00\\ud800"}',
    b'{"x":"\xed\xa0\x80"}',
    b'{"x":NaN,"y":-Infinity}',
    b"\xef\xbb\xbf{}",
    b'{"a":1,"b":2,"a":3}',
    b'{"x":"\xff"}',
    b" \t{} \r",
    b"[" * 5000 + b"]" * 5000,
    b'{"x":1}garbage',
    b'{"x":"\x01"}',
    b'"\\u0000"',
]


@given(
    st.sampled_from(HOSTILE) | st.binary(max_size=64),
    st.binary(max_size=4),
    st.integers(0, 80),
)
def test_hostile_and_mutated_bytes_decode_as_json_loads_does(
    base: bytes, insert: bytes, at: int
) -> None:
    data = base[:at] + insert + base[at:]
    assert outcome(framing.loads, data) == outcome(json.loads, data)


def test_decode_line_goes_through_the_fast_parser(monkeypatch: Any) -> None:
    """The frame decoder uses :func:`framing.loads`: msgspec for what it accepts,
    ``json.loads`` only for what it refuses (here a lone surrogate)."""
    calls: list[bytes] = []
    real = json.loads

    def counting(data: Any) -> Any:
        calls.append(bytes(data))
        return real(data)

    monkeypatch.setattr(framing.json, "loads", counting)
    plain = decode_line(b'{"jsonrpc":"2.0","method":"m","params":{"n":18446744073709551616}}')
    assert isinstance(plain, Frame) and plain.message["params"]["n"] == 2**64
    assert calls == []
    lone = decode_line(b'{"jsonrpc":"2.0","method":"m","params":{"t":"\\ud800"}}')
    assert isinstance(lone, Frame) and lone.message["params"]["t"] == "\ud800"
    assert len(calls) == 1
    bad = decode_line(b'{"jsonrpc":')
    assert isinstance(bad, FrameError) and bad.kind == "invalid_json"
