"""The turn of each fake-agent scenario, as a script of actions (see :mod:`.scenarios`).

Each function yields what it wants done and returns the prompt's answer (``None``: the
default ``end_turn``, or ``cancelled`` if the client cancelled; :data:`NO_ANSWER`: the
script answered itself or never will). Documented in :mod:`baton.testing.fake_agent`.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Generator
from pathlib import Path
from typing import Any

from baton.testing.faults import FAULT_SCRIPTS
from baton.testing.hostile import HOSTILE_SCRIPTS
from baton.testing.scenarios import (
    NO_ANSWER,
    Call,
    Exit,
    Hang,
    JoinStderrFlood,
    Raw,
    ScenarioCore,
    Stderr,
    TurnScript,
    WaitCancel,
    dumps,
)

__all__ = ["SCRIPTS", "Script", "run_turn"]

Message = dict[str, Any]
TurnBody = Generator[Any, Any, Any]
Script = Callable[[ScenarioCore, TurnScript], TurnBody]

DEFAULT_HUGE_BYTES = 60_000_000
DEFAULT_FLOOD_COUNT = 200_000
_FILL = b"x" * (1 << 20)


def turn_ok(core: ScenarioCore, turn: TurnScript) -> TurnBody:
    yield core.chunk("Hello from the fake agent. ", turn.message_id)
    yield core.chunk("The turn is done.", turn.message_id)


def turn_malformed_json(core: ScenarioCore, turn: TurnScript) -> TurnBody:
    yield core.chunk("Before the garbage. ", turn.message_id)
    yield Raw(b'{"jsonrpc":"2.0",\n')
    yield Raw(b"[1,2]\n")
    yield core.chunk("After the garbage.", turn.message_id)


def turn_huge_line(core: ScenarioCore, turn: TurnScript) -> TurnBody:
    total = core.options.nbytes if core.options.nbytes is not None else DEFAULT_HUGE_BYTES
    head = dumps(core.chunk("@", turn.message_id).message)
    prefix, _, suffix = head.partition(b"@")
    fill = max(0, total - len(prefix) - len(suffix))
    # One line of ``total`` bytes on the wire, written in pieces of one shared buffer:
    # neither end builds it whole (a 60 MB line cost three 60 MB copies to make).
    pieces, rest = divmod(fill, len(_FILL))
    yield Raw(prefix)
    for _ in range(pieces):
        yield Raw(_FILL)
    yield Raw(_FILL[:rest] + suffix)
    yield core.chunk("After the huge line.", turn.message_id)


def turn_invalid_utf8(core: ScenarioCore, turn: TurnScript) -> TurnBody:
    line = dumps(core.chunk("bad bytes: @ end", turn.message_id).message)
    yield Raw(line.replace(b"@", b"\xff\xfe"))
    yield core.chunk("After the invalid bytes.", turn.message_id)


def turn_die_mid_turn(core: ScenarioCore, turn: TurnScript) -> TurnBody:
    yield core.chunk("About to die. ", turn.message_id)
    yield Exit(3)


def turn_ignore_cancel(core: ScenarioCore, turn: TurnScript) -> TurnBody:
    yield core.chunk("I will never finish. ", turn.message_id)
    yield Hang()
    return NO_ANSWER


def turn_hang_prompt(core: ScenarioCore, turn: TurnScript) -> TurnBody:
    yield core.chunk("Waiting for a cancel. ", turn.message_id)
    yield WaitCancel()


def turn_silent(core: ScenarioCore, turn: TurnScript) -> TurnBody:
    """Says nothing at all until the client cancels, then speaks once (a stalled turn)."""
    yield WaitCancel()
    yield core.chunk("Back after the silence.", turn.message_id)


def turn_stderr_flood(core: ScenarioCore, turn: TurnScript) -> TurnBody:
    yield from turn_ok(core, turn)
    yield JoinStderrFlood()


def turn_flood(core: ScenarioCore, turn: TurnScript) -> TurnBody:
    count = core.options.count if core.options.count is not None else DEFAULT_FLOOD_COUNT
    sid = json.dumps(core.options.session_id)
    yield core.update(
        {
            "sessionUpdate": "tool_call",
            "toolCallId": "t1",
            "title": "flood tool",
            "kind": "other",
            "status": "in_progress",
        }
    )
    chunk_tmpl = (
        '{"jsonrpc":"2.0","method":"session/update","params":{"sessionId":' + sid + ","
        '"update":{"sessionUpdate":"agent_message_chunk","messageId":"flood-msg",'
        '"content":{"type":"text","text":"flood chunk %07d of the benchmark load."}}}}\n'
    ).encode()
    tool_tmpl = (
        '{"jsonrpc":"2.0","method":"session/update","params":{"sessionId":' + sid + ","
        '"update":{"sessionUpdate":"tool_call_update","toolCallId":"t1",'
        '"status":"in_progress","content":[{"type":"content","content":{"type":"text",'
        '"text":"flood output %07d of the benchmark load"}}]}}}\n'
    ).encode()
    batch = 16384  # ~4 MB per write
    for start in range(0, count, batch):
        stop = min(count, start + batch)
        yield Raw(b"".join([(tool_tmpl if i & 1 else chunk_tmpl) % i for i in range(start, stop)]))


def turn_late_chunks(core: ScenarioCore, turn: TurnScript) -> TurnBody:
    yield core.chunk("Before the end. ", turn.message_id)
    yield core.answer(turn, {"stopReason": "end_turn"})
    yield core.chunk("Late chunk one. ", turn.message_id)
    yield core.chunk("Late chunk two.", turn.message_id)
    return NO_ANSWER


def turn_repeat_tool_call(core: ScenarioCore, turn: TurnScript) -> TurnBody:
    path = str(Path(core.cwd) / "repeat.txt")
    yield core.update(
        {
            "sessionUpdate": "tool_call",
            "toolCallId": "t1",
            "title": "write",
            "kind": "edit",
            "status": "pending",
            "rawInput": {},
        }
    )
    yield core.update(
        {
            "sessionUpdate": "tool_call",
            "toolCallId": "t1",
            "title": "Write repeat.txt",
            "kind": "edit",
            "status": "pending",
            "locations": [{"path": path}],
            "rawInput": {"filePath": path, "content": "again\n"},
        }
    )
    yield core.update(
        {"sessionUpdate": "tool_call_update", "toolCallId": "t1", "status": "in_progress"}
    )
    yield core.update(
        {
            "sessionUpdate": "tool_call_update",
            "toolCallId": "t1",
            "content": [
                {"type": "diff", "path": path, "oldText": None, "newText": "again\n"},
            ],
        }
    )
    yield core.update(
        {
            "sessionUpdate": "tool_call_update",
            "toolCallId": "t1",
            "status": "completed",
            "rawOutput": {"output": "Wrote file successfully."},
        }
    )
    yield core.chunk("Wrote repeat.txt.", turn.message_id)


def turn_unknown_variant(core: ScenarioCore, turn: TurnScript) -> TurnBody:
    yield core.update(
        {
            "sessionUpdate": "future_variant_xyz",
            "someField": 42,
            "nested": {"a": [1, 2, 3]},
            "_meta": {"fake": True},
        }
    )
    yield core.update(
        {
            "sessionUpdate": "notice",
            "level": "warning",
            "message": "This is an unstable notice update.",
        }
    )
    yield core.chunk("After the unknown variants.", turn.message_id)


def turn_cursor_ext(core: ScenarioCore, turn: TurnScript) -> TurnBody:
    for method, params in _cursor_calls(str(Path(core.cwd) / "baton.png")):
        reply = yield Call(method, {"sessionId": turn.session_id, **params})
        echo: Message = {"method": method}
        if "error" in reply:
            echo["error"] = reply["error"]
        else:
            echo["result"] = reply.get("result")
        yield Stderr(b"cursor-reply=" + dumps(echo))
    yield core.chunk("All cursor replies arrived.", turn.message_id)


def turn_permission(core: ScenarioCore, turn: TurnScript) -> TurnBody:
    tool_call = {
        "toolCallId": "perm-1",
        "title": "rm -rf build",
        "kind": "execute",
        "rawInput": {"command": "rm -rf build"},
    }
    yield core.update({"sessionUpdate": "tool_call", "status": "pending", **tool_call})
    reply = yield Call(
        "session/request_permission",
        {
            "sessionId": turn.session_id,
            "toolCall": tool_call,
            "options": [
                {"optionId": "allow-once", "name": "Allow", "kind": "allow_once"},
                {"optionId": "allow-always", "name": "Always allow", "kind": "allow_always"},
                {"optionId": "reject-once", "name": "Reject", "kind": "reject_once"},
            ],
        },
    )
    outcome = (reply.get("result") or {}).get("outcome") or {}
    if "error" in reply:
        chosen = "error"
    elif outcome.get("outcome") == "selected":
        chosen = str(outcome.get("optionId"))
    else:
        chosen = str(outcome.get("outcome") or "none")
    allowed = chosen in ("allow-once", "allow-always")
    yield core.update(
        {
            "sessionUpdate": "tool_call_update",
            "toolCallId": "perm-1",
            "status": "completed" if allowed else "failed",
            "content": [
                {"type": "content", "content": {"type": "text", "text": f"optionId={chosen}"}}
            ],
        }
    )
    yield core.chunk(f"permission outcome: {chosen}", turn.message_id)


def turn_usage(core: ScenarioCore, turn: TurnScript) -> TurnBody:
    yield core.chunk("Counting tokens.", turn.message_id)
    yield core.update(
        {
            "sessionUpdate": "usage_update",
            "used": 1234,
            "size": 200000,
            "cost": {"amount": 0.0123, "currency": "USD"},
        }
    )
    return {
        "stopReason": "end_turn",
        "usage": {"inputTokens": 10, "outputTokens": 5, "totalTokens": 15},
    }


def turn_fs(core: ScenarioCore, turn: TurnScript) -> TurnBody:
    inside = str(Path(core.cwd) / "fake-fs.txt")
    # "<cwd>/../escape.txt", normalized: a path outside the session's cwd.
    outside = str(Path(core.cwd).parent / "escape.txt")
    calls: list[tuple[str, Message]] = [
        ("fs/write_text_file", {"path": inside, "content": "written by the fake agent\n"}),
        ("fs/write_text_file", {"path": outside, "content": "this must not escape\n"}),
        ("fs/read_text_file", {"path": "/etc/passwd"}),
    ]
    for method, params in calls:
        reply = yield Call(method, {"sessionId": turn.session_id, **params})
        report: Message = {"method": method, "path": params["path"]}
        if "error" in reply:
            report["error"] = reply["error"]
        else:
            report["result"] = reply.get("result")
        yield core.chunk(json.dumps(report), turn.message_id)


def _cursor_calls(image: str) -> list[tuple[str, Message]]:
    return [
        (
            "cursor/update_todos",
            {
                "toolCallId": "todo-1",
                "todos": [
                    {"id": "1", "content": "Write the tests", "status": "in_progress"},
                    {"id": "2", "content": "Ship it", "status": "pending"},
                ],
                "merge": False,
            },
        ),
        (
            "cursor/task",
            {
                "toolCallId": "task-1",
                "description": "Explore the repository",
                "prompt": "List the Python files",
                "subagentType": "explore",
                "model": "default[]",
            },
        ),
        (
            "cursor/generate_image",
            {"toolCallId": "img-1", "description": "A relay baton", "filePath": image},
        ),
        (
            "cursor/ask_question",
            {
                "toolCallId": "q-1",
                "title": "Pick a colour",
                "questions": [
                    {
                        "id": "q1",
                        "prompt": "Which colour?",
                        "options": [{"id": "a", "label": "Red"}, {"id": "b", "label": "Blue"}],
                        "allowMultiple": False,
                    }
                ],
            },
        ),
        (
            "cursor/create_plan",
            {
                "toolCallId": "plan-1",
                "name": "Fake plan",
                "overview": "Two steps",
                "plan": "# Plan\n\n1. Write\n2. Ship\n",
                "todos": [
                    {"id": "1", "content": "Write", "status": "pending"},
                    {"id": "2", "content": "Ship", "status": "pending"},
                ],
                "isProject": False,
            },
        ),
    ]


SCRIPTS: dict[str, Script] = {
    **HOSTILE_SCRIPTS,
    **FAULT_SCRIPTS,
    "ok": turn_ok,
    "malformed-json": turn_malformed_json,
    "huge-line": turn_huge_line,
    "invalid-utf8": turn_invalid_utf8,
    "die-mid-turn": turn_die_mid_turn,
    "ignore-cancel": turn_ignore_cancel,
    "hang-prompt": turn_hang_prompt,
    "silent": turn_silent,
    "stderr-flood": turn_stderr_flood,
    "flood": turn_flood,
    "late-chunks": turn_late_chunks,
    "repeat-tool-call": turn_repeat_tool_call,
    "unknown-variant": turn_unknown_variant,
    "cursor-ext": turn_cursor_ext,
    "permission": turn_permission,
    "usage": turn_usage,
    "fs": turn_fs,
}
"""The turn of each scenario (the others answer like ``ok``)."""


def run_turn(core: ScenarioCore, turn: TurnScript) -> TurnBody:
    """The whole turn: the scenario's script, then the prompt's answer (what drivers run)."""
    script = SCRIPTS.get(core.scenario, SCRIPTS["ok"])
    outcome = yield from script(core, turn)
    if outcome is NO_ANSWER:
        return
    result = outcome if isinstance(outcome, dict) else None
    if result is None:
        result = {"stopReason": "cancelled" if turn.cancelled else "end_turn"}
    yield core.answer(turn, result)
