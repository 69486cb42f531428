"""JSON-RPC framing (pure): every line becomes a message or an answerable error."""

import json

import pytest
from hypothesis import given
from hypothesis import strategies as st

from baton.agents.builtin.jsonrpc import (
    Invalid,
    LineSplitter,
    Notification,
    Request,
    Response,
    RpcError,
    encode,
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
        (b'{"id":4,"method":"m"}', 4, -32600),
        (b'{"jsonrpc":"2.0","id":5,"method":7}', 5, -32600),
        (b'{"jsonrpc":"2.0","id":6}', 6, -32600),
        (b'{"jsonrpc":"2.0","id":7,"method":"m","params":[1]}', 7, -32602),
    ],
)
def test_invalid_lines(line: bytes, request_id: object, code: int) -> None:
    message = parse_message(line)
    assert isinstance(message, Invalid)
    assert message.id == request_id and message.error.code == code


def test_encode_is_one_line() -> None:
    data = encode({"text": "a\nb", "é": 1})
    assert data.count(b"\n") == 1 and data.endswith(b"\n")
    assert json.loads(data) == {"text": "a\nb", "é": 1}


def test_splitter_bounds_long_lines_and_resynchronises() -> None:
    splitter = LineSplitter(max_line=8)
    assert list(splitter.feed(b"short\n\n  \n12345")) == [b"short"]
    assert list(splitter.feed(b"6789")) == [None]
    assert list(splitter.feed(b"more\nok\nabcdefghij\nlast")) == [b"ok", None]
    assert list(splitter.finish()) == [b"last"]


@given(st.lists(st.binary(max_size=20), max_size=8), st.integers(min_value=1, max_value=30))
def test_splitting_does_not_depend_on_chunking(chunks: list[bytes], size: int) -> None:
    data = b"\n".join(chunks)
    whole = LineSplitter(size)
    expected = [*whole.feed(data), *whole.finish()]
    single = LineSplitter(size)
    got = [line for i in range(len(data)) for line in single.feed(data[i : i + 1])]
    assert [*got, *single.finish()] == expected
