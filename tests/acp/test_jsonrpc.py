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
