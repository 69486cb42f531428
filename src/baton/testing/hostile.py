"""Hostile scenarios of the fault agent: what an agent reading untrusted repositories may send.

Turn scripts like those of :mod:`baton.testing.scripts` (standard library only), run by both
drivers; the scenario names are listed in :data:`baton.testing.HOSTILE_SCENARIOS` and
documented in :mod:`baton.testing.fake_agent`.
"""

from __future__ import annotations

import json
from collections.abc import Generator
from pathlib import Path
from typing import Any

from baton.testing.scenarios import Call, Exit, Pause, Raw, ScenarioCore, Stderr, TurnScript

__all__ = ["HOSTILE_SCRIPTS"]

TurnBody = Generator[Any, Any, Any]


def _line(session_id: str, update_json: str) -> bytes:
    """A ``session/update`` line whose update is given as raw JSON text (escapes kept)."""
    return (
        '{"jsonrpc":"2.0","method":"session/update","params":{"sessionId":'
        + json.dumps(session_id)
        + ',"update":'
        + update_json
        + "}}\n"
    ).encode()


def turn_lone_surrogate(core: ScenarioCore, turn: TurnScript) -> TurnBody:
    """Valid JSON that UTF-8 cannot hold: ``"\\ud800"`` in a chunk and a tool title."""
    mid = turn.message_id
    yield core.chunk("before the surrogate. ", mid)
    yield Raw(
        _line(
            turn.session_id,
            '{"sessionUpdate":"agent_message_chunk","messageId":'
            + json.dumps(mid)
            + ',"content":{"type":"text","text":"lone \\ud800 surrogate"}}',
        )
    )
    yield Raw(
        _line(
            turn.session_id,
            '{"sessionUpdate":"tool_call","toolCallId":"sur-1","title":"bad \\udfff title",'
            '"kind":"read","status":"completed","rawInput":{"path\\udc80":"x"}}',
        )
    )
    yield core.chunk(" after the surrogate.", mid)


def turn_secrets(core: ScenarioCore, turn: TurnScript) -> TurnBody:
    """Every text of ``--texts FILE`` (a JSON list) on every surface an agent reaches.

    Each text goes out as a transcript split in two reads, a tool call (title, input,
    output, diff), a line of stderr, and the title and input of a permission request.
    With ``{"texts": [...], "die": true}`` the agent then writes them all to stderr
    again and exits 3 without answering the prompt.
    """
    if core.options.texts is None:
        raise ValueError("the secrets scenario needs --texts FILE")
    spec = json.loads(Path(core.options.texts).read_text(encoding="utf-8"))
    texts: list[str] = spec["texts"] if isinstance(spec, dict) else spec
    mid = turn.message_id
    for i, text in enumerate(texts):
        half = len(text) // 2
        yield core.chunk(f"[{i}] {text[:half]}", mid)
        yield Pause(0.002)  # as a model streams: the halves come in separate reads
        yield core.chunk(f"{text[half:]}\n", mid)
        yield Stderr(f"stderr [{i}]: {text}\n".encode())
        yield core.update(
            {
                "sessionUpdate": "tool_call",
                "toolCallId": f"sec-{i}",
                "title": f"Run {text}"[:300],
                "kind": "execute",
                "status": "in_progress",
                "rawInput": {"command": text},
            }
        )
        yield core.update(
            {
                "sessionUpdate": "tool_call_update",
                "toolCallId": f"sec-{i}",
                "status": "completed",
                "rawOutput": {"stdout": text},
                "content": [
                    {"type": "content", "content": {"type": "text", "text": text}},
                    {"type": "diff", "path": "config.env", "oldText": None, "newText": text},
                ],
            }
        )
    joined = "\n".join(texts)
    yield Call(
        "session/request_permission",
        {
            "sessionId": turn.session_id,
            "toolCall": {
                "toolCallId": "sec-perm",
                "title": f"Publish {joined[:2000]}",
                "kind": "execute",
                "rawInput": {"command": joined},
            },
            "options": [
                {"optionId": "allow-once", "name": "Allow", "kind": "allow_once"},
                {"optionId": "reject-once", "name": "Reject", "kind": "reject_once"},
            ],
        },
    )
    yield core.chunk("All secrets were sent.", mid)
    if isinstance(spec, dict) and spec.get("die"):
        # End on stderr and die: the turn fails with a stderr preview of these lines.
        for text in reversed(texts):
            yield Stderr(f"dying: {text}\n".encode())
        yield Exit(3)


def _batch(*messages: dict[str, Any]) -> Raw:
    """Several messages in one write: the client reads them in one batch."""
    return Raw(b"".join(json.dumps(m, separators=(",", ":")).encode() + b"\n" for m in messages))


def _request(rid: str, method: str, params: dict[str, Any]) -> dict[str, Any]:
    """An agent → client request whose reply the script does not wait for."""
    return {"jsonrpc": "2.0", "id": rid, "method": method, "params": params}


def _notification(method: str, params: dict[str, Any]) -> dict[str, Any]:
    return {"jsonrpc": "2.0", "method": method, "params": params}


def turn_request_order(core: ScenarioCore, turn: TurnScript) -> TurnBody:
    """Requests, each followed by notifications in the same read: the client must handle
    them in arrival order (a request's events before the next frame's).

    A ``cursor/update_todos`` request then the same list as a notification; a permission
    request then two updates of its tool call and a chunk; an fs write then a chunk; a
    ``terminal/create`` then a chunk. The replies are not awaited (the ids are strings).
    """
    sid, mid = turn.session_id, turn.message_id
    yield _batch(
        _request(
            "todos-1",
            "cursor/update_todos",
            {
                "sessionId": sid,
                "todos": [{"id": "a", "content": "write the parser", "status": "in_progress"}],
                "merge": False,
            },
        ),
        _notification(
            "cursor/update_todos",
            {"sessionId": sid, "todos": [{"id": "a", "status": "completed"}], "merge": True},
        ),
    )
    tool_call = {"toolCallId": "order-1", "title": "make build", "kind": "execute"}
    yield core.update({"sessionUpdate": "tool_call", "status": "pending", **tool_call})
    yield _batch(
        _request(
            "perm-1",
            "session/request_permission",
            {
                "sessionId": sid,
                "toolCall": tool_call,
                "options": [
                    {"optionId": "allow-once", "name": "Allow", "kind": "allow_once"},
                    {"optionId": "reject-once", "name": "Reject", "kind": "reject_once"},
                ],
            },
        ),
        _notification(
            "session/update",
            {
                "sessionId": sid,
                "update": {
                    "sessionUpdate": "tool_call_update",
                    "toolCallId": "order-1",
                    "status": "in_progress",
                },
            },
        ),
        core.chunk("after the permission request", mid).message,
    )
    yield _batch(
        _request(
            "fs-1",
            "fs/write_text_file",
            {"sessionId": sid, "path": str(Path(core.cwd) / "order.txt"), "content": "in order\n"},
        ),
        core.chunk("after the write", mid).message,
    )
    yield _batch(
        _request("term-1", "terminal/create", {"sessionId": sid, "command": "true"}),
        core.update(
            {
                "sessionUpdate": "agent_thought_chunk",
                "content": {"type": "text", "text": "after the terminal"},
            }
        ).message,
    )
    yield core.chunk(" done.", mid)


def turn_cross_turn(core: ScenarioCore, turn: TurnScript) -> TurnBody:
    """Updates of turn 1 sent during turn 2, by the agent's own ids.

    Turn 1 starts tool call ``xt-1`` (in progress), says a chunk (message ``fake-msg-1``)
    and answers. Turn 2 completes ``xt-1``, says a chunk of its own (``fake-msg-2``), then
    one of ``fake-msg-1``, then a plan and a chunk without ids (both of turn 2), then
    another chunk of its own.
    """
    if core.turn_count == 1:
        yield core.update(
            {
                "sessionUpdate": "tool_call",
                "toolCallId": "xt-1",
                "title": "long build",
                "kind": "execute",
                "status": "in_progress",
            }
        )
        yield core.chunk("turn one text", turn.message_id)
        return None
    yield core.update(
        {"sessionUpdate": "tool_call_update", "toolCallId": "xt-1", "status": "completed"}
    )
    yield core.chunk("turn two starts", turn.message_id)
    yield core.chunk(" and a late part of turn one", "fake-msg-1")
    yield core.update(
        {"sessionUpdate": "plan", "entries": [{"content": "step", "status": "pending"}]}
    )
    yield core.update(
        {"sessionUpdate": "agent_message_chunk", "content": {"type": "text", "text": "no ids"}}
    )
    yield core.chunk(" turn two text", turn.message_id)
    return None


HOSTILE_SCRIPTS = {
    "cross-turn": turn_cross_turn,
    "lone-surrogate": turn_lone_surrogate,
    "request-order": turn_request_order,
    "secrets": turn_secrets,
}
