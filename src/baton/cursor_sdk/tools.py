"""baton's custom tools for a Cursor SDK agent: every mutation asked, then run by baton.

The SDK lets a client add *custom tools*: their metadata goes to the bridge, their
execution comes back to the host (``SdkCustomToolCallbackService.CallCustomTool``, served
by the SDK's own callback server in baton's process). In ``ask`` mode these are the only
way the model can write or run anything (:data:`~baton.providers.cursor_sdk.tables.ASK_TOOLS`
withholds Cursor's built-in edit and shell tools), and each call goes through the runner
exactly as an ACP agent's would: ``session/request_permission`` (baton's policy or a human,
through the durable-requests ledger), then ``fs/write_text_file`` / ``fs/read_text_file``
/ ``terminal/*`` (contained to the workspace, recorded as ``file.written``, audited).
The permission request carries the SDK's tool call id, so the audit matches it with
the tool call the SDK reports. A denial or a refusal is the tool's error result: the
model is told, nothing is written.
"""

from __future__ import annotations

import uuid
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Final

from baton.acp.jsonrpc import RpcError
from baton.errors import AgentError, ControlFlow
from baton.jsontypes import JsonMapping, JsonValue
from baton.providers.cursor_sdk.tables import CUSTOM_TOOLS

__all__ = ["MAX_OUTPUT", "HostTools", "Peer"]

Peer = Callable[[str, Any], Awaitable[Any]]
"""Send one ACP request to the runner and return its result (errors raise)."""

MAX_OUTPUT: Final = 16 * 1024
"""Command output handed back to the model (the tail, with the total size)."""

_OPTIONS = [
    {"optionId": "allow", "name": "Allow", "kind": "allow_once"},
    {"optionId": "reject", "name": "Reject", "kind": "reject_once"},
]


class ToolDenied(ControlFlow):
    """Internal to one tool call: the answer was no (never leaves :meth:`HostTools.run`)."""


def _error(text: str) -> dict[str, Any]:
    return {"content": [{"type": "text", "text": text}], "isError": True}


def _ok(text: str) -> dict[str, Any]:
    return {"content": [{"type": "text", "text": text}]}


def _arg(args: Mapping[str, Any], name: str) -> str:
    value = args.get(name)
    if not isinstance(value, str):
        raise ValueError(f"argument {name!r} must be a string")
    return value


@dataclass(kw_only=True, eq=False)
class HostTools:
    """The custom tools of one session, executed through the runner (``peer``)."""

    peer: Peer
    session_id: Callable[[], str | None]
    cwd: Callable[[], Path]

    async def run(self, name: str, args: JsonMapping, tool_call_id: str | None) -> JsonValue:
        """One custom tool call; its result for the model (never raises for a denial)."""
        call_id = tool_call_id or f"baton-{uuid.uuid4().hex[:12]}"
        handlers = {
            "write_file": self._write_file,
            "edit_file": self._edit_file,
            "run_command": self._run_command,
        }
        handler = handlers.get(name)
        if handler is None:
            return _error(f"unknown tool {name!r}")
        try:
            return await handler(args, call_id)
        except ToolDenied as exc:
            return _error(f"not done: {exc}")
        except ValueError as exc:
            return _error(str(exc))
        except RpcError as exc:
            return _error(f"baton refused it: {exc.message}")
        except AgentError as exc:  # a refused client call (RemoteCallError and kin)
            return _error(f"baton refused it: {exc}")

    # ------------------------------------------------------------------ helpers

    def _path(self, given: str) -> str:
        path = Path(given)
        return str(path if path.is_absolute() else self.cwd() / path)

    async def _ask(self, call_id: str, kind: str, title: str, **fields: Any) -> None:
        result = await self.peer(
            "session/request_permission",
            {
                "sessionId": self.session_id(),
                "toolCall": {
                    "toolCallId": call_id,
                    "title": title,
                    "kind": kind,
                    "status": "pending",
                    **fields,
                },
                "options": _OPTIONS,
            },
        )
        outcome = result.get("outcome") if isinstance(result, Mapping) else None
        chosen = outcome.get("optionId") if isinstance(outcome, Mapping) else None
        if not isinstance(outcome, Mapping) or outcome.get("outcome") != "selected":
            raise ToolDenied("the request was cancelled")
        if chosen != "allow":
            raise ToolDenied("denied by baton (policy or a human)")

    async def _write(self, path: str, content: str) -> None:
        await self.peer(
            "fs/write_text_file",
            {"sessionId": self.session_id(), "path": path, "content": content},
        )

    # -------------------------------------------------------------------- tools

    async def _write_file(self, args: Mapping[str, Any], call_id: str) -> Any:
        path, content = self._path(_arg(args, "path")), _arg(args, "content")
        await self._write_asked(call_id, "write_file", args, path, None, content)
        return _ok(f"wrote {len(content.encode())} bytes to {_arg(args, 'path')}")

    async def _edit_file(self, args: Mapping[str, Any], call_id: str) -> Any:
        path = self._path(_arg(args, "path"))
        old, new = _arg(args, "old_text"), _arg(args, "new_text")
        read = await self.peer("fs/read_text_file", {"sessionId": self.session_id(), "path": path})
        text = read.get("content") if isinstance(read, Mapping) else None
        if not isinstance(text, str):
            raise ValueError("the file could not be read")
        count = text.count(old) if old else 0
        if count != 1:
            raise ValueError(f"old_text occurs {count} times; it must occur exactly once")
        await self._write_asked(call_id, "edit_file", args, path, text, text.replace(old, new, 1))
        return _ok(f"edited {_arg(args, 'path')}")

    async def _write_asked(
        self,
        call_id: str,
        tool: str,
        args: Mapping[str, Any],
        path: str,
        old: str | None,
        new: str,
    ) -> None:
        """Ask for the write as a diff (``old`` None: a new file), then write ``new``."""
        await self._ask(
            call_id,
            CUSTOM_TOOLS[tool].kind,
            f"{tool.removesuffix('_file')} {_arg(args, 'path')}",
            rawInput=dict(args),
            locations=[{"path": path}],
            content=[{"type": "diff", "path": path, "oldText": old, "newText": new}],
        )
        await self._write(path, new)

    async def _run_command(self, args: Mapping[str, Any], call_id: str) -> Any:
        command = _arg(args, "command")
        await self._ask(
            call_id,
            CUSTOM_TOOLS["run_command"].kind,
            command[:200],
            rawInput={"command": command},
        )
        session = self.session_id()
        created = await self.peer(
            "terminal/create",
            {
                "sessionId": session,
                "command": "/bin/sh",
                "args": ["-c", command],
                "cwd": str(self.cwd()),
                "outputByteLimit": MAX_OUTPUT,
            },
        )
        terminal = created.get("terminalId") if isinstance(created, Mapping) else None
        if not isinstance(terminal, str):
            raise ValueError("the terminal could not be created")
        ids = {"sessionId": session, "terminalId": terminal}
        try:
            exited = await self.peer("terminal/wait_for_exit", ids)
            output = await self.peer("terminal/output", ids)
        finally:
            await self.peer("terminal/release", ids)
        code = exited.get("exitCode") if isinstance(exited, Mapping) else None
        text = output.get("output") if isinstance(output, Mapping) else ""
        truncated = bool(output.get("truncated")) if isinstance(output, Mapping) else False
        result = f"exit code {code}" + (" (output truncated)" if truncated else "")
        body = _ok(f"{result}\n{text}")
        if code != 0:
            body["isError"] = True
        return body
