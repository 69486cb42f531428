from __future__ import annotations

import pytest

from baton.acp.jsonrpc import Invalid, Notification, Request, Response, classify


def test_classifies_the_four_kinds() -> None:
    assert classify({"jsonrpc": "2.0", "id": 1, "method": "m", "params": {}}) == Request(1, "m", {})
    assert classify({"jsonrpc": "2.0", "method": "m"}) == Notification("m", None)
    assert classify({"jsonrpc": "2.0", "id": "x", "result": {"a": 1}}) == Response("x", {"a": 1})
    err = classify({"jsonrpc": "2.0", "id": 3, "error": {"code": -1, "message": "m"}})
    assert isinstance(err, Response) and err.error == {"code": -1, "message": "m"}


def test_missing_jsonrpc_member_is_tolerated() -> None:
    assert classify({"id": 1, "method": "m"}) == Request(1, "m", None)


@pytest.mark.parametrize(
    "obj",
    [
        {"jsonrpc": "1.0", "method": "m"},
        {"jsonrpc": "2.0", "method": 5},
        {"jsonrpc": "2.0", "id": 1.5, "method": "m"},
        {"jsonrpc": "2.0", "id": True, "result": 1},
        {"jsonrpc": "2.0", "id": 1, "result": 1, "error": {"code": 1}},
        {"jsonrpc": "2.0", "id": 1},
        {"jsonrpc": "2.0", "id": 1, "error": "bad"},
        {"jsonrpc": "2.0"},
    ],
)
def test_invalid_messages(obj: dict[str, object]) -> None:
    assert isinstance(classify(obj), Invalid)


def test_invalid_keeps_a_readable_id_so_the_peer_can_be_answered() -> None:
    out = classify({"jsonrpc": "2.0", "id": 7, "method": ""})
    assert isinstance(out, Invalid) and out.id == 7


def test_a_null_id_is_allowed_only_on_an_error_answering_an_unreadable_request() -> None:
    parse_error = {"jsonrpc": "2.0", "id": None, "error": {"code": -32700, "message": "bad"}}
    assert classify(parse_error) == Response(None, error=parse_error["error"])
    assert classify({"jsonrpc": "2.0", "id": None, "method": "m"}) == Invalid(
        "request id must be a string or an integer"
    )
    result = classify({"jsonrpc": "2.0", "id": None, "result": 1})
    assert isinstance(result, Invalid) and result.response


def test_a_malformed_answer_is_marked_as_an_answer() -> None:
    bad = classify({"jsonrpc": "2.0", "id": 3, "error": {"code": "x"}})
    assert isinstance(bad, Invalid) and bad.response and bad.id == 3
    request = classify({"jsonrpc": "2.0", "id": 3, "method": ""})
    assert isinstance(request, Invalid) and not request.response


CORPUS = [
    b'{"jsonrpc":"2.0","id":1,"method":"m","params":{"a":1}}',
    b'{"id":1,"method":"m"}',
    b'{"jsonrpc":"1.0","id":1,"method":"m"}',
    b'{"jsonrpc":"2.0","id":true,"method":"m"}',
    b'{"jsonrpc":"2.0","id":null,"method":"m"}',
    b'{"jsonrpc":"2.0","id":1.5,"method":"m"}',
    b'{"jsonrpc":"2.0","method":"n"}',
    b'{"jsonrpc":"2.0","id":2,"result":null}',
    b'{"jsonrpc":"2.0","id":null,"error":{"code":-32700,"message":"x"}}',
    b'{"jsonrpc":"2.0","id":2,"result":1,"error":{"code":1}}',
    b'{"jsonrpc":"2.0","id":2,"error":"nope"}',
    b'{"jsonrpc":"2.0","id":6}',
]


@pytest.mark.parametrize("line", CORPUS)
def test_baton_and_its_builtin_agent_read_a_message_the_same_way(line: bytes) -> None:
    """One classifier: the agent side only adds its answers on top (no second reading)."""
    import json

    from baton.agents.builtin import jsonrpc as agent_side

    ours = classify(json.loads(line))
    theirs = agent_side.parse_message(line)
    expected = {
        Request: agent_side.Request,
        Notification: agent_side.Notification,
        Response: agent_side.Response,
    }
    if isinstance(ours, Invalid):
        wanted = agent_side.Response if ours.response else agent_side.Invalid
        assert isinstance(theirs, wanted)
    else:
        assert isinstance(theirs, expected[type(ours)])
    assert getattr(theirs, "id", None) == getattr(ours, "id", None)
