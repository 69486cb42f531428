"""The whole session, hot path on and off: the same stored rows and the same audit.

An in-memory agent floods a real session (composition root, connection, normalizer,
approvals, emitter, SQLite store) with the shapes the hot path takes and their near
misses: secrets in chunks and tool output, a lone surrogate (json.loads' path of the
frame parser, then the store's repair), output past the tail bound, rawOutput past the
raw bound, unknown fields, chunks with and without ids, an edit that completes without
a decision (the audit's finding) and updates after the prompt's answer (late). The run
with :meth:`AcpNormalizer.hot` switched off is the oracle: every stored row must be the
same, but for its timestamp, the turn's random id and a tool call's measured duration.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from baton.agent_profile import AgentProfile
from baton.app import Baton
from baton.events.acp_normalizer import AcpNormalizer
from baton.events.bounds import OUTPUT_TAIL_BYTES, RAW_VALUE_BYTES
from baton.runner.session_events import SessionEvents
from baton.testing.memory import AgentEnd, in_memory

SESSION = "hot-session-1"
SECRET = "ghp_1234567890abcdefghijABCDEFGHIJ123456"


def _update(update: dict[str, Any]) -> bytes:
    params = {"sessionId": SESSION, "update": update}
    message = {"jsonrpc": "2.0", "method": "session/update", "params": params}
    return json.dumps(message).encode() + b"\n"  # ensure_ascii: "\ud800" stays an escape


def _flood() -> list[bytes]:
    lines = [
        _update(
            {"sessionUpdate": "tool_call", "toolCallId": "t1", "title": "edit", "kind": "edit"}
        ),
        _update({"sessionUpdate": "tool_call", "toolCallId": "t2", "title": f"run {SECRET}"}),
    ]
    for i in range(80):
        text = [f"chunk {i} ", SECRET[:12], SECRET[12:], " \ud800 ", "x" * (OUTPUT_TAIL_BYTES + 9)][
            i % 5
        ]
        chunk: dict[str, Any] = {
            "sessionUpdate": "agent_message_chunk" if i % 7 else "agent_thought_chunk",
            "content": {"type": "text", "text": text},
        }
        if i % 3:
            chunk["messageId"] = f"m{i // 10}"
        if i % 11 == 5:
            chunk["futureField"] = i
        lines.append(_update(chunk))
        output = [f"out {i} {SECRET}", "y" * (OUTPUT_TAIL_BYTES + 3), "ok \udfff"][i % 3]
        tool: dict[str, Any] = {
            "sessionUpdate": "tool_call_update",
            "toolCallId": "t2" if i % 4 else "t1",
            "status": "in_progress" if i % 5 else "pending",
            "content": [{"type": "content", "content": {"type": "text", "text": output}}],
        }
        if i % 2:
            tool["rawOutput"] = {"stdout": SECRET, "big": "z" * (RAW_VALUE_BYTES * (i % 4 == 1))}
        if i % 13 == 7:
            tool["_meta"] = {"vendor": {"n": i}}
        lines.append(_update(tool))
    lines.append(
        _update({"sessionUpdate": "tool_call_update", "toolCallId": "t1", "status": "completed"})
    )
    for i in range(3):  # after the audited completion, in the same read
        progress = {"type": "content", "content": {"type": "text", "text": f"tail {i}"}}
        update = {"sessionUpdate": "tool_call_update", "toolCallId": "t2", "content": [progress]}
        lines.append(_update(update))
    return lines


class FloodAgent:
    """initialize, session/new, one prompt: the flood, the answer, then two late updates."""

    async def serve(self, end: AgentEnd) -> int | None:
        while (raw := await end.receive_line()) is not None:
            message = json.loads(raw)
            method, ident = message.get("method"), message.get("id")
            if ident is None or method is None:
                continue
            result: Any
            if method == "initialize":
                result = {"protocolVersion": 1, "agentCapabilities": {}, "authMethods": []}
            elif method == "session/new":
                result = {"sessionId": SESSION}
            elif method == "session/prompt":
                answer = {"jsonrpc": "2.0", "id": ident, "result": {"stopReason": "end_turn"}}
                await end.write(b"".join(_flood()) + json.dumps(answer).encode() + b"\n")
                result = None  # the answer went with the flood, in one write
            else:
                error = {"code": -32601, "message": f"method not found: {method}"}
                await end.send({"jsonrpc": "2.0", "id": ident, "error": error})
                continue
            if result is not None:
                await end.send({"jsonrpc": "2.0", "id": ident, "result": result})
            if method == "session/prompt":
                late = {"type": "content", "content": {"type": "text", "text": "late"}}
                await end.write(
                    _update(
                        {"sessionUpdate": "tool_call_update", "toolCallId": "t2", "content": [late]}
                    )
                    + _update(
                        {
                            "sessionUpdate": "agent_message_chunk",
                            "messageId": "late",
                            "content": {"type": "text", "text": "after"},
                        }
                    )
                )
        return 0


async def _rows(state: Path, workspace: Path) -> tuple[list[dict[str, Any]], int]:
    """The stored rows of one flood (timestamps dropped, turn ids by order), the audit's count."""
    profile = AgentProfile(name="flood", title="flood", command=("flood",), family="generic")
    async with (
        Baton.open(state_dir=state) as baton,
        baton.run(kind="test", agent="flood", cwd=workspace, run_id="hot-ab") as run,
    ):
        session = await baton.open_session(
            profile,
            run=run,
            requests=baton.broker("none", wait_timeout=0, notify=False),
            workspace=workspace,
            transport=in_memory(FloodAgent),
        )
        outcome = await session.prompt("go")
        unapproved = session.approvals.unapproved(outcome.turn_id)
        await session.close()
        run.status = "completed"
        await baton.store.flush()
        lines = list(baton.store.iter_event_json("hot-ab"))
    turns: dict[str, str] = {}
    rows = []
    for line in lines:
        row = json.loads(line)
        row.pop("ts")
        for timed in ("duration_ms", "seconds"):  # a turn's length; usage.counted's too
            if timed in row["payload"]:
                row["payload"][timed] = "the clock's"
        if row.get("turn_id") is not None:
            row["turn_id"] = turns.setdefault(row["turn_id"], f"turn-{len(turns)}")
        text = json.dumps(row, sort_keys=True)
        for real, alias in turns.items():
            text = text.replace(real, alias)
        rows.append(json.loads(text))
    return rows, unapproved


async def test_a_flood_stores_the_same_rows_with_and_without_the_hot_path(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    (tmp_path / "ws").mkdir()
    taken = 0
    real = AcpNormalizer.hot

    def counted(self: AcpNormalizer, params: Any, **kw: Any) -> Any:
        nonlocal taken
        out = real(self, params, **kw)
        taken += out is not None
        return out

    monkeypatch.setattr(AcpNormalizer, "hot", counted)
    fast, fast_unapproved = await _rows(tmp_path / "a", tmp_path / "ws")
    monkeypatch.setattr(AcpNormalizer, "hot", lambda self, params, **kw: None)
    slow, slow_unapproved = await _rows(tmp_path / "b", tmp_path / "ws")
    assert taken > 100  # the flood did take it
    assert len(fast) == len(slow) > 100
    assert fast == slow
    assert fast_unapproved == slow_unapproved == 1  # the edit nobody decided
    types = {row["type"] for row in fast}
    assert {"security.unapproved_mutation", "tool.execution.completed"} <= types
    assert any("late" in row["flags"] for row in fast)
    assert any("unencodable_text" in row["flags"] for row in fast)
    assert SECRET not in json.dumps(fast)


async def test_a_flood_stores_the_same_rows_emitted_per_run_as_per_update(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Drafts wait for the end of the agent's run of notifications (``defer``); the
    oracle emits each update's drafts at once. Same rows in the same order: the audit's
    finding right after the completion it is about, though updates follow it in the
    same read, and the turn's end after the updates that came before its answer."""
    (tmp_path / "ws").mkdir()
    real = SessionEvents.drafts
    deferred = 0

    async def counted(self: SessionEvents, drafts: Any, *, defer: bool = False) -> None:
        nonlocal deferred
        before = len(self._deferred)
        await real(self, drafts, defer=defer)
        deferred += len(self._deferred) > before

    async def at_once(self: SessionEvents, drafts: Any, *, defer: bool = False) -> None:
        await real(self, drafts)

    monkeypatch.setattr(SessionEvents, "drafts", counted)
    per_run, per_run_unapproved = await _rows(tmp_path / "a", tmp_path / "ws")
    monkeypatch.setattr(SessionEvents, "drafts", at_once)
    per_update, per_update_unapproved = await _rows(tmp_path / "b", tmp_path / "ws")
    assert deferred > 100  # the flood was deferred, update by update
    assert len(per_run) == len(per_update) > 100
    assert per_run == per_update
    assert per_run_unapproved == per_update_unapproved == 1
    types = [row["type"] for row in per_run]
    finding = types.index("security.unapproved_mutation")
    assert types[finding - 1] == "tool.execution.completed"
    assert types[finding + 1 : finding + 4] == ["tool.execution.progressed"] * 3
    assert types.index("turn.completed") > finding + 3
