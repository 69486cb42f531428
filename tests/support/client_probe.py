"""An in-memory agent that calls baton's client methods with scripted params, and the table of
what ACP says baton must answer each.

:class:`ProbeAgent` answers ``initialize``/``session/new``; on ``session/prompt`` it sends its
steps to the client one by one (``"$terminal"`` in a step's params stands for the last
``terminalId`` the client gave it), keeps each answer, then ends the turn. Every frame of both
directions is kept in :attr:`ProbeAgent.frames` in the tap's record format, so the same run can
be checked against the official schema (``tests/integration/test_acp_schema.py``).

:data:`CASES` is the error table: for each case, its steps and the last step's expected
outcome, ACP's code (or ``None`` for a result) and whether it is a security refusal (the only
answers that make ``security.*`` events).
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from baton.testing.memory import AgentEnd

__all__ = [
    "CASES",
    "CODES",
    "SESSION",
    "Case",
    "ProbeAgent",
    "prepare_workspace",
]

SESSION = "probe-session-1"
INVALID_PARAMS, NOT_FOUND, METHOD_NOT_FOUND, INTERNAL = -32602, -32002, -32601, -32603
CODES = {
    INVALID_PARAMS: "Invalid params",
    NOT_FOUND: "Resource not found",
    METHOD_NOT_FOUND: "Method not found",
    INTERNAL: "Internal error",
}
"""The codes baton answers with, and the standard message each answer starts with."""

Step = tuple[str, Any]


@dataclass(frozen=True)
class Case:
    steps: tuple[Step, ...]
    code: int | None
    """ACP's code for the last step's answer; ``None``: a result."""
    refusal: bool = False
    """A security refusal: -32602 and a ``security.*`` event (no other case makes one)."""


def s(**params: Any) -> dict[str, Any]:
    """Params of this probe's session."""
    return {"sessionId": SESSION, **params}


def prepare_workspace(workspace: Path) -> None:
    """The files the cases name."""
    (workspace / "present.txt").write_text("one\ntwo\nthree\n")
    (workspace / "binary.bin").write_bytes(b"\xff\xfe\x00not utf-8")
    (workspace / "subdir").mkdir()
    (workspace / "link.txt").symlink_to("/etc/hostname")


_TOOL = {"toolCallId": "probe-call", "title": "probe", "kind": "edit"}
_OPTIONS = [{"optionId": "ok", "name": "Allow", "kind": "allow_once"}]
_CREATE = ("terminal/create", s(command="printf", args=["hi\\n"]))

CASES: dict[str, Case] = {
    # fs/read_text_file
    "read": Case((("fs/read_text_file", s(path="present.txt")),), None),
    "read lines": Case((("fs/read_text_file", s(path="present.txt", line=2, limit=1)),), None),
    "read missing file": Case((("fs/read_text_file", s(path="new.txt")),), NOT_FOUND),
    "read missing dir": Case((("fs/read_text_file", s(path="no/such/f.txt")),), NOT_FOUND),
    "read outside": Case((("fs/read_text_file", s(path="/etc/passwd")),), INVALID_PARAMS, True),
    "read dotdot": Case((("fs/read_text_file", s(path="../x.txt")),), INVALID_PARAMS, True),
    "read symlink": Case((("fs/read_text_file", s(path="link.txt")),), INVALID_PARAMS, True),
    "read path number": Case((("fs/read_text_file", s(path=42)),), INVALID_PARAMS),
    "read no path": Case((("fs/read_text_file", s()),), INVALID_PARAMS),
    "read line negative": Case(
        (("fs/read_text_file", s(path="present.txt", line=-1)),), INVALID_PARAMS
    ),
    "read limit text": Case(
        (("fs/read_text_file", s(path="present.txt", limit="2")),), INVALID_PARAMS
    ),
    "read not utf-8": Case((("fs/read_text_file", s(path="binary.bin")),), INVALID_PARAMS),
    "read no session": Case((("fs/read_text_file", {"path": "present.txt"}),), INVALID_PARAMS),
    "read session number": Case(
        (("fs/read_text_file", {"sessionId": 7, "path": "present.txt"}),), INVALID_PARAMS
    ),
    "read other session": Case(
        (("fs/read_text_file", {"sessionId": "nope", "path": "present.txt"}),), NOT_FOUND
    ),
    "read params array": Case((("fs/read_text_file", [1]),), INVALID_PARAMS),
    # fs/write_text_file
    "write": Case((("fs/write_text_file", s(path="out/new.txt", content="x\n")),), None),
    "write content number": Case(
        (("fs/write_text_file", s(path="new.txt", content=5)),), INVALID_PARAMS
    ),
    "write no content": Case((("fs/write_text_file", s(path="new.txt")),), INVALID_PARAMS),
    "write outside": Case(
        (("fs/write_text_file", s(path="/tmp/escape.txt", content="x")),), INVALID_PARAMS, True
    ),
    "write symlink": Case(
        (("fs/write_text_file", s(path="link.txt", content="x")),), INVALID_PARAMS, True
    ),
    "write other session": Case(
        (("fs/write_text_file", {"sessionId": "nope", "path": "a.txt", "content": ""}),),
        NOT_FOUND,
    ),
    # terminal/*
    "create": Case((_CREATE,), None),
    "create no command": Case((("terminal/create", s()),), INVALID_PARAMS),
    "create command number": Case((("terminal/create", s(command=3)),), INVALID_PARAMS),
    "create args text": Case((("terminal/create", s(command="ls", args="-l")),), INVALID_PARAMS),
    "create args number": Case((("terminal/create", s(command="ls", args=[1])),), INVALID_PARAMS),
    "create env text": Case((("terminal/create", s(command="ls", env=["A=1"])),), INVALID_PARAMS),
    "create limit negative": Case(
        (("terminal/create", s(command="ls", outputByteLimit=-1)),), INVALID_PARAMS
    ),
    "create cwd missing": Case((("terminal/create", s(command="ls", cwd="gone")),), NOT_FOUND),
    "create cwd file": Case(
        (("terminal/create", s(command="ls", cwd="present.txt")),), INVALID_PARAMS
    ),
    "create cwd outside": Case(
        (("terminal/create", s(command="ls", cwd="/etc")),), INVALID_PARAMS, True
    ),
    "create unknown command": Case(
        (("terminal/create", s(command="baton-no-such-command-4711")),), NOT_FOUND
    ),
    "create other session": Case(
        (("terminal/create", {"sessionId": "nope", "command": "ls"}),), NOT_FOUND
    ),
    "output": Case((_CREATE, ("terminal/output", s(terminalId="$terminal"))), None),
    "output unknown": Case((("terminal/output", s(terminalId="term-nope")),), NOT_FOUND),
    "output id number": Case((("terminal/output", s(terminalId=5)),), INVALID_PARAMS),
    "output released": Case(
        (
            _CREATE,
            ("terminal/release", s(terminalId="$terminal")),
            ("terminal/output", s(terminalId="$terminal")),
        ),
        NOT_FOUND,
    ),
    "wait": Case((_CREATE, ("terminal/wait_for_exit", s(terminalId="$terminal"))), None),
    "wait unknown": Case((("terminal/wait_for_exit", s(terminalId="term-nope")),), NOT_FOUND),
    "wait no id": Case((("terminal/wait_for_exit", s()),), INVALID_PARAMS),
    "kill": Case((_CREATE, ("terminal/kill", s(terminalId="$terminal"))), None),
    "kill unknown": Case((("terminal/kill", s(terminalId="term-nope")),), NOT_FOUND),
    "release": Case((_CREATE, ("terminal/release", s(terminalId="$terminal"))), None),
    "release unknown": Case((("terminal/release", s(terminalId="term-nope")),), NOT_FOUND),
    "release twice": Case(
        (
            _CREATE,
            ("terminal/release", s(terminalId="$terminal")),
            ("terminal/release", s(terminalId="$terminal")),
        ),
        NOT_FOUND,
    ),
    # session/request_permission
    "permission": Case(
        (("session/request_permission", s(toolCall=_TOOL, options=_OPTIONS)),), None
    ),
    "permission no tool call": Case(
        (("session/request_permission", s(options=_OPTIONS)),), INVALID_PARAMS
    ),
    "permission tool call id number": Case(
        (("session/request_permission", s(toolCall={"toolCallId": 1}, options=_OPTIONS)),),
        INVALID_PARAMS,
    ),
    "permission options object": Case(
        (("session/request_permission", s(toolCall=_TOOL, options={})),), INVALID_PARAMS
    ),
    "permission session number": Case(
        (("session/request_permission", {"sessionId": 1, "toolCall": _TOOL, "options": _OPTIONS}),),
        INVALID_PARAMS,
    ),
    "permission other session": Case(
        (
            (
                "session/request_permission",
                {"sessionId": "nope", "toolCall": _TOOL, "options": _OPTIONS},
            ),
        ),
        NOT_FOUND,
    ),
    # elicitation/create
    "elicitation malformed": Case(
        (("elicitation/create", s(mode="form", message=3)),), INVALID_PARAMS
    ),
    # extension and unknown methods
    "extension method": Case((("_vendor/anything", {"x": 1}),), METHOD_NOT_FOUND),
    "unknown method": Case((("files/delete", s(path="present.txt")),), METHOD_NOT_FOUND),
}


@dataclass
class ProbeAgent:
    """Sends :attr:`steps` to the client during the first prompt; keeps every answer."""

    steps: tuple[Step, ...]
    answers: list[dict[str, Any]] = field(default_factory=list)
    frames: list[dict[str, Any]] = field(default_factory=list)
    on_request: Callable[[dict[str, Any]], None] | None = None

    async def serve(self, end: AgentEnd) -> int | None:
        while (message := await self._receive(end)) is not None:
            method, msg_id = message.get("method"), message.get("id")
            if method == "initialize":
                await self._send(end, _result(msg_id, _INITIALIZE))
            elif method == "session/new":
                await self._send(end, _result(msg_id, {"sessionId": SESSION}))
            elif method == "session/prompt":
                await self._run_steps(end)
                await self._send(end, _result(msg_id, {"stopReason": "end_turn"}))
            elif msg_id is not None and method is not None:
                error = {"code": METHOD_NOT_FOUND, "message": f"Method not found: {method}"}
                await self._send(end, {"jsonrpc": "2.0", "id": msg_id, "error": error})
        return 0

    async def _run_steps(self, end: AgentEnd) -> None:
        terminal: str | None = None
        for number, (method, params) in enumerate(self.steps, start=1000):
            text = json.dumps(params).replace('"$terminal"', json.dumps(terminal))
            await self._send(
                end, {"jsonrpc": "2.0", "id": number, "method": method, "params": json.loads(text)}
            )
            while (answer := await self._receive(end)) is not None and answer.get("id") != number:
                pass  # nothing else is expected mid-turn
            assert answer is not None, f"the client closed before answering {method}"
            self.answers.append(answer)
            result = answer.get("result")
            if isinstance(result, dict) and isinstance(result.get("terminalId"), str):
                terminal = result["terminalId"]

    async def _receive(self, end: AgentEnd) -> dict[str, Any] | None:
        line = await end.receive_line()
        if line is None:
            return None
        message: dict[str, Any] = json.loads(line)
        self.frames.append({"dir": "client", "msg": message})
        return message

    async def _send(self, end: AgentEnd, message: dict[str, Any]) -> None:
        self.frames.append({"dir": "agent", "msg": message})
        await end.send(message)


_INITIALIZE = {
    "protocolVersion": 1,
    "agentCapabilities": {"loadSession": False},
    "authMethods": [],
}


def _result(msg_id: Any, value: Any) -> dict[str, Any]:
    return {"jsonrpc": "2.0", "id": msg_id, "result": value}
