"""Fault scenarios of the fake agent for approvals, the audit, usage places and terminals.

What real agents were seen doing (or could do): writing without asking, ignoring a denial,
switching themselves to a self-approving mode, asking for a tool call they never announced
(Codex), usage in ``_meta`` (Qwen Code) or only the context window (Zed codex-acp),
terminals of their own. Turn scripts like those of :mod:`baton.testing.scripts` (standard
library only), run by both drivers; documented in :mod:`baton.testing.fake_agent`.
"""

from __future__ import annotations

import json
from collections.abc import Generator
from pathlib import Path
from typing import Any

from baton.testing.scenarios import Call, ScenarioCore, TurnScript, WaitCancel

__all__ = ["FAULT_SCRIPTS", "ask"]

Message = dict[str, Any]
TurnBody = Generator[Any, Any, Any]


def ask(turn: TurnScript, tool_call: Message, allow: str, reject: str) -> TurnBody:
    """``session/request_permission`` with one allow and one reject option; returns the
    chosen option id (or the outcome, or ``error``)."""
    reply = yield Call(
        "session/request_permission",
        {
            "sessionId": turn.session_id,
            "toolCall": tool_call,
            "options": [
                {"optionId": allow, "name": "Allow", "kind": "allow_once"},
                {"optionId": reject, "name": "Reject", "kind": "reject_once"},
            ],
        },
    )
    outcome = (reply.get("result") or {}).get("outcome") or {}
    return str(outcome.get("optionId") or outcome.get("outcome") or "error")


def _own_edit(
    core: ScenarioCore, turn: TurnScript, tool_call_id: str, name: str, *, asks: bool
) -> TurnBody:
    """An edit of ``<cwd>/name`` the agent makes itself (after asking, when ``asks``)."""
    path = str(Path(core.cwd) / name)
    tool_call = {
        "toolCallId": tool_call_id,
        "title": f"Write {name}",
        "kind": "edit",
        "locations": [{"path": path}],
        "rawInput": {"file_path": path, "content": "written without asking\n"},
    }
    yield core.update({"sessionUpdate": "tool_call", "status": "pending", **tool_call})
    chosen = "not asked"
    if asks:
        chosen = yield from ask(turn, tool_call, "allow-once", "reject-once")
    Path(path).write_text("written without asking\n")
    yield core.update(
        {
            "sessionUpdate": "tool_call_update",
            "toolCallId": tool_call_id,
            "status": "completed",
            "rawOutput": {"output": f"wrote {name} (answer: {chosen})"},
        }
    )
    return chosen


def turn_skip_permission(core: ScenarioCore, turn: TurnScript) -> TurnBody:
    yield from _own_edit(core, turn, "skip-1", "skipped.txt", asks=False)
    yield core.chunk("Wrote skipped.txt without asking.", turn.message_id)
    if core.options.linger:
        yield WaitCancel(core.options.linger)


def turn_ignore_denial(core: ScenarioCore, turn: TurnScript) -> TurnBody:
    chosen = yield from _own_edit(core, turn, "deny-1", "denied.txt", asks=True)
    yield core.chunk(f"Wrote denied.txt although the answer was {chosen}.", turn.message_id)


def turn_write_unasked(core: ScenarioCore, turn: TurnScript) -> TurnBody:
    path = str(Path(core.cwd) / "unasked.txt")
    reply = yield Call(
        "fs/write_text_file",
        {"sessionId": turn.session_id, "path": path, "content": "written unasked\n"},
    )
    yield core.chunk(json.dumps({"method": "fs/write_text_file", "reply": reply}), turn.message_id)


def _run_terminal(turn: TurnScript, command: str, args: list[str]) -> TurnBody:
    """``terminal/create`` (returns its reply); the caller waits for and releases it."""
    created = yield Call(
        "terminal/create", {"sessionId": turn.session_id, "command": command, "args": args}
    )
    return created


def _wait_release(turn: TurnScript, terminal_id: Any) -> TurnBody:
    ids = {"sessionId": turn.session_id, "terminalId": terminal_id}
    yield Call("terminal/wait_for_exit", ids)
    yield Call("terminal/release", ids)


def turn_terminal_unasked(core: ScenarioCore, turn: TurnScript) -> TurnBody:
    created = yield from _run_terminal(turn, "echo", ["unasked"])
    terminal_id = (created.get("result") or {}).get("terminalId")
    if terminal_id is not None:
        yield from _wait_release(turn, terminal_id)
    yield core.chunk(json.dumps({"method": "terminal/create", "reply": created}), turn.message_id)


def turn_switch_mode(core: ScenarioCore, turn: TurnScript) -> TurnBody:
    core.mode = core.options.switch_to
    yield core.update({"sessionUpdate": "current_mode_update", "currentModeId": core.mode})
    yield core.chunk(f"Switched myself to {core.mode}.", turn.message_id)
    yield WaitCancel(2.0)


def turn_permission_unannounced(core: ScenarioCore, turn: TurnScript) -> TurnBody:
    tool_call = {
        "toolCallId": "u-1",
        "title": "rm -rf build",
        "kind": "execute",
        "status": "pending",
        "rawInput": {"command": ["rm", "-rf", "build"]},
    }
    chosen = yield from ask(turn, tool_call, "approved", "abort")
    if chosen == "approved":
        for status in ("in_progress", "completed"):
            yield core.update(
                {"sessionUpdate": "tool_call_update", "toolCallId": "u-1", "status": status}
            )
    yield core.chunk("Done.", turn.message_id)


def turn_usage_meta(core: ScenarioCore, turn: TurnScript) -> TurnBody:
    usage = {
        "inputTokens": 10,
        "outputTokens": 5,
        "totalTokens": 15,
        "thoughtTokens": 1,
        "cachedReadTokens": 2,
    }
    for text in ("First call. ", "Second call."):
        yield core.update(
            {
                "sessionUpdate": "agent_message_chunk",
                "messageId": turn.message_id,
                "content": {"type": "text", "text": text},
                "_meta": {"usage": usage, "durationMs": 12},
            }
        )


def turn_usage_context(core: ScenarioCore, turn: TurnScript) -> TurnBody:
    yield core.chunk("Working.", turn.message_id)
    yield core.update({"sessionUpdate": "usage_update", "used": 500, "size": 258400})


def turn_usage_result_meta(core: ScenarioCore, turn: TurnScript) -> TurnBody:
    yield core.chunk("Done.", turn.message_id)
    usage = {"inputTokens": 7, "outputTokens": 3, "totalTokens": 10}
    return {"stopReason": "end_turn", "_meta": {"usage": usage}}


def turn_usage_growing(core: ScenarioCore, turn: TurnScript) -> TurnBody:
    """``--count`` model calls (default 8), each a chunk and a ``usage_update`` whose ``cost``
    is the session's running total, $0.25 more per call, then a short wait for a cancel
    (an agent stops between model calls); the prompt result carries the turn's tokens."""
    calls = core.options.count or 8
    done = (core.turn_count - 1) * calls
    for call in range(1, calls + 1):
        yield core.chunk(f"Model call {call}. ", turn.message_id)
        total = round(0.25 * (done + call), 2)
        yield core.update(
            {
                "sessionUpdate": "usage_update",
                "used": 1000 * call,
                "size": 200_000,
                "cost": {"amount": total, "currency": "USD"},
            }
        )
        yield WaitCancel(timeout=0.05)
        if turn.cancelled:
            return None
    usage = {"inputTokens": 100 * calls, "outputTokens": 10 * calls, "totalTokens": 110 * calls}
    return {"stopReason": "end_turn", "usage": usage}


def turn_agent_terminal(core: ScenarioCore, turn: TurnScript) -> TurnBody:
    terminal = [{"type": "terminal", "terminalId": "agent-term-1"}]
    yield core.update(
        {
            "sessionUpdate": "tool_call",
            "toolCallId": "at-1",
            "title": "make build",
            "kind": "execute",
            "status": "in_progress",
            "content": terminal,
        }
    )
    yield core.update(
        {
            "sessionUpdate": "tool_call_update",
            "toolCallId": "at-1",
            "status": "completed",
            "content": terminal,
            "rawOutput": {"output": "built ok\n", "exit_code": 0},
        }
    )
    yield core.chunk("Built.", turn.message_id)


def turn_client_terminal_tool(core: ScenarioCore, turn: TurnScript) -> TurnBody:
    created = yield from _run_terminal(turn, "printf", ["from the client terminal\n"])
    terminal_id = (created.get("result") or {}).get("terminalId")
    content = [{"type": "terminal", "terminalId": terminal_id}]
    yield core.update(
        {
            "sessionUpdate": "tool_call",
            "toolCallId": "ct-1",
            "title": "printf",
            "kind": "execute",
            "status": "in_progress",
            "content": content,
        }
    )
    yield from _wait_release(turn, terminal_id)
    yield core.update(
        {
            "sessionUpdate": "tool_call_update",
            "toolCallId": "ct-1",
            "status": "completed",
            "content": content,
        }
    )
    yield core.chunk("Printed.", turn.message_id)


FAULT_SCRIPTS = {
    "skip-permission": turn_skip_permission,
    "ignore-denial": turn_ignore_denial,
    "write-unasked": turn_write_unasked,
    "terminal-unasked": turn_terminal_unasked,
    "switch-mode": turn_switch_mode,
    "permission-unannounced": turn_permission_unannounced,
    "usage-meta": turn_usage_meta,
    "usage-growing": turn_usage_growing,
    "usage-context": turn_usage_context,
    "usage-result-meta": turn_usage_result_meta,
    "agent-terminal": turn_agent_terminal,
    "client-terminal-tool": turn_client_terminal_tool,
}
"""The turns of the approval, audit, usage and terminal fault scenarios."""
