"""JSON-RPC framing (pure): every line becomes a message or an answerable error."""

import json

import pytest

from baton.acp.framing import LineDecoder
from baton.agents.builtin.jsonrpc import (
    Invalid,
    Notification,
    Request,
    Response,
    RpcError,
    encode,
    frame_message,
    parse_message,
)


def test_messages() -> None:
    assert parse_message(b'{"jsonrpc":"2.0","id":1,"method":"m","params":{"a":1}}') == Request(
        1, "m", {"a": 1}
    )
    assert parse_message(b'{"jsonrpc":"2.0","id":"x","method":"m"}') == Request("x", "m", {})
    assert parse_message(b'{"jsonrpc":"2.0","method":"n","params":[1]}') == Notification("n", {})
    assert parse_message(b'{"jsonrpc":"2.0","id":3,"result":null}') == Response(3, None)
    error = parse_message(b'{"jsonrpc":"2.0","id":null,"error":{"code":-32700,"message":"bad"}}')
    assert isinstance(error, Response) and error.id is None
    assert isinstance(error.error, RpcError) and error.error.code == -32700


@pytest.mark.parametrize(
    ("line", "request_id", "code"),
    [
        (b"{", None, -32700),
        (b"\xff", None, -32700),
        (b"[]", None, -32600),
        (b"3", None, -32600),
        (b'{"jsonrpc":"2.0","id":true,"method":"m"}', None, -32600),
        (b'{"jsonrpc":"2.0","id":1.5,"method":"m"}', None, -32600),
        (b'{"jsonrpc":"2.0","id":null,"method":"m"}', None, -32600),
        (b'{"jsonrpc":"1.0","id":4,"method":"m"}', 4, -32600),
        (b'{"jsonrpc":"2.0","id":5,"method":7}', 5, -32600),
        (b'{"jsonrpc":"2.0","id":6}', 6, -32600),
        (b'{"jsonrpc":"2.0","id":7,"method":"m","params":[1]}', 7, -32602),
    ],
)
def test_invalid_lines(line: bytes, request_id: object, code: int) -> None:
    message = parse_message(line)
    assert isinstance(message, Invalid)
    assert message.id == request_id and message.error.code == code


def test_frame_errors_become_answerable_errors() -> None:
    decoder = LineDecoder(max_line_bytes=8)
    frames = [*decoder.feed(b'{"a":1}\n0123456789\n{\n'), *decoder.close()]
    codes = [frame_message(f) for f in frames]
    assert isinstance(codes[0], Invalid) and codes[0].error.code == -32600  # not JSON-RPC
    assert isinstance(codes[1], Invalid) and "too long" in codes[1].error.message
    assert isinstance(codes[2], Invalid) and codes[2].error.code == -32700


def test_absurd_nesting_is_a_parse_error_not_a_crash() -> None:
    message = parse_message(b"[" * 100_000 + b"]" * 100_000)
    assert isinstance(message, Invalid) and message.error.code == -32700


def test_encode_is_one_line() -> None:
    data = encode({"text": "a\nb", "é": 1})
    assert data.count(b"\n") == 1 and data.endswith(b"\n")
    assert json.loads(data) == {"text": "a\nb", "é": 1}
