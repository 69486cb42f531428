"""Executing one step as one ACP tool call: announce it, ask permission, run it, report it.

Every step ends with exactly one final ``tool_call_update`` (``completed`` or ``failed``), also
when it is cancelled (``failed`` with ``rawOutput {"cancelled": true}``); the opening
``tool_call`` and that final update are what `session/load` replays.
"""

import asyncio
import os
import shutil
import time
import uuid
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

from baton.errors import SecurityError
from baton.security.paths import resolve_inside

from .channel import Channel, TurnInterrupted, until_cancelled
from .connection import ConnectionClosed
from .jsonrpc import JsonObject, RpcError
from .mcp_client import McpError, McpHub
from .runbook import FileStep, McpStep, ShellStep
from .shell import run_command
from .summary import Status, StepOutcome
from .updates import (
    ToolKind,
    block_content,
    diff_content,
    text_content,
    tool_call,
    tool_call_update,
)

__all__ = ["Action", "StepContext", "StepRun", "ToolStep", "run_step"]


@dataclass(frozen=True, slots=True)
class ToolStep:
    """An MCP call the agent makes on its own (delegation, report); the server is known."""

    server: str
    tool: str
    arguments: JsonObject


Action = ShellStep | FileStep | McpStep | ToolStep


@dataclass(slots=True)
class StepContext:
    """What steps of one turn share: the client, the session's settings and grants."""

    channel: Channel
    cwd: str
    hub: McpHub | None
    client_writes_files: bool
    always_allowed: set[str]
    timeout: float
    kill_grace: float


@dataclass(frozen=True, slots=True)
class StepRun:
    """A finished step: its outcome, and its opening and final updates for replay."""

    outcome: StepOutcome
    replay: tuple[JsonObject, JsonObject]
    structured: JsonObject | None = None
    """An MCP tool's ``structuredContent`` (e.g. the id ``create_task`` made)."""


@dataclass(frozen=True, slots=True)
class _Ending:
    status: Literal["completed", "failed"]
    raw_output: JsonObject
    content: tuple[JsonObject, ...] | None = None
    reason: str | None = None
    exit_code: int | None = None
    output: str = ""
    denied: bool = False


def _failed(reason: str, *, denied: bool = False) -> _Ending:
    return _Ending("failed", {"error": reason}, (text_content(reason),), reason, denied=denied)


class _Call:
    """The updates of one tool call; remembers the opening for replay."""

    def __init__(self, channel: Channel, call_id: str) -> None:
        self.channel = channel
        self.id = call_id
        self.opening: JsonObject | None = None

    async def open(
        self,
        title: str,
        kind: ToolKind,
        raw_input: JsonObject,
        *,
        locations: tuple[str, ...] = (),
        content: tuple[JsonObject, ...] = (),
    ) -> None:
        self.opening = tool_call(
            self.id, title, kind, raw_input, locations=locations, content=content
        )
        await self.channel.update(self.opening)

    async def progress(
        self,
        *,
        status: Literal["in_progress"] | None = None,
        content: list[JsonObject] | None = None,
        raw_input: JsonObject | None = None,
    ) -> None:
        if raw_input is not None and self.opening is not None:
            self.opening = {**self.opening, "rawInput": raw_input}
        await self.channel.update(
            tool_call_update(self.id, status=status, content=content, raw_input=raw_input)
        )


async def run_step(ctx: StepContext, number: int, label: str, action: Action) -> StepRun:
    """Run one step through its whole tool-call lifecycle; never raises TurnInterrupted."""
    call = _Call(ctx.channel, f"step-{number}-{uuid.uuid4().hex[:8]}")
    try:
        ending = await _execute(ctx, call, label, action)
        status = Status.SUCCEEDED if ending.status == "completed" else Status.FAILED
    except TurnInterrupted:
        ending = _Ending("failed", {"cancelled": True}, reason="cancelled")
        status = Status.CANCELLED
    assert call.opening is not None, "every step opens its tool call before it can end"
    final = tool_call_update(
        call.id, status=ending.status, content=ending.content, raw_output=ending.raw_output
    )
    await ctx.channel.update(final)
    outcome = StepOutcome(
        number=number,
        label=label,
        status=status,
        reason=ending.reason,
        exit_code=ending.exit_code,
        output=ending.output,
        denied=ending.denied,
    )
    structured = ending.raw_output.get("structuredContent")
    return StepRun(
        outcome, (call.opening, final), structured if isinstance(structured, dict) else None
    )


async def _execute(ctx: StepContext, call: _Call, label: str, action: Action) -> _Ending:
    match action:
        case ShellStep():
            return await _shell(ctx, call, label, action)
        case FileStep():
            return await _file(ctx, call, label, action)
        case McpStep():
            return await _mcp(ctx, call, label, action)
        case ToolStep(server=server, tool=tool, arguments=arguments):
            await call.open(
                label, "other", {"server": server, "tool": tool, "arguments": arguments}
            )
            if ctx.hub is None:
                return _failed("this session has no MCP servers")
            return await _call_tool(ctx, call, ctx.hub, server, tool, arguments)


async def _permit(
    ctx: StepContext,
    call: _Call,
    kind: ToolKind,
    title: str,
    raw_input: JsonObject,
    content: tuple[JsonObject, ...] = (),
) -> str | None:
    """None when the client allows the step (or always allows its kind), else why not."""
    if kind in ctx.always_allowed:
        return None
    request: JsonObject = {
        "toolCallId": call.id,
        "title": title,
        "kind": kind,
        "rawInput": raw_input,
    }
    if content:
        request["content"] = list(content)
    answer = await ctx.channel.ask_permission(request)
    if ctx.channel.cancel.is_set():
        raise TurnInterrupted
    if answer.always:
        ctx.always_allowed.add(kind)
    return None if answer.granted else answer.reason


async def _shell(ctx: StepContext, call: _Call, label: str, step: ShellStep) -> _Ending:
    raw_input: JsonObject = {"command": step.command}
    await call.open(label, "execute", raw_input)
    if (refusal := await _permit(ctx, call, "execute", label, raw_input)) is not None:
        return _failed(refusal, denied=True)
    await call.progress(status="in_progress")
    shell = "/bin/sh" if step.shell == "sh" else shutil.which("bash") or "bash"
    result = await run_command(
        [shell, "-c", step.command],
        cwd=ctx.cwd,
        timeout=ctx.timeout,
        kill_grace=ctx.kill_grace,
        cancel=ctx.channel.cancel,
        on_output=lambda text: call.progress(content=[text_content(text)]),
    )
    if result.cancelled:
        raise TurnInterrupted
    raw_output: JsonObject = {
        "exitCode": result.exit_code,
        "durationMs": result.duration_ms,
        "outputBytes": result.output_bytes,
    }
    reason: str | None = None
    if result.signal:
        raw_output["signal"] = result.signal
        reason = f"killed by {result.signal}"
    if result.timed_out:
        raw_output["timedOut"] = True
        reason = f"timed out after {ctx.timeout:g} s"
    if result.error:
        raw_output["error"] = reason = result.error
    content = result.output or result.error
    return _Ending(
        status="completed" if reason is None and result.exit_code == 0 else "failed",
        raw_output=raw_output,
        content=(text_content(content),) if content else None,
        reason=reason,
        exit_code=result.exit_code,
        output=result.output,
    )


async def _file(ctx: StepContext, call: _Call, label: str, step: FileStep) -> _Ending:
    target, problem = _target(ctx.cwd, step.path)
    if problem is not None:
        await call.open(label, "edit", {"path": step.path, "content": step.content})
        return _failed(problem)
    old = await asyncio.to_thread(_read_text, target)
    diff = diff_content(target, old, step.content)
    raw_input: JsonObject = {"path": target, "content": step.content}
    await call.open(label, "edit", raw_input, locations=(target,), content=(diff,))
    if (refusal := await _permit(ctx, call, "edit", label, raw_input, (diff,))) is not None:
        return _failed(refusal, denied=True)
    await call.progress(status="in_progress")
    started = time.monotonic()
    try:
        if ctx.client_writes_files:
            await ctx.channel.write_text_file(target, step.content)
        else:
            await asyncio.to_thread(_write_text, target, step.content)
    except RpcError as exc:
        return _failed(f"the client could not write {target}: {exc.message}")
    except ConnectionClosed:
        return _failed("the client went away before writing the file")
    except OSError as exc:
        return _failed(f"cannot write {target}: {exc.strerror or exc}")
    raw_output: JsonObject = {
        "path": target,
        "bytes": len(step.content.encode()),
        "via": "client" if ctx.client_writes_files else "direct",
        "durationMs": int((time.monotonic() - started) * 1000),
    }
    return _Ending("completed", raw_output, (diff,))


def _target(cwd: str, path: str) -> tuple[str, str | None]:
    """The absolute path a file step writes, or why it may not write there."""
    if not path:
        return "", "a file step needs a path: ```file relative/path"
    if os.path.isabs(path):
        return (
            "",
            f"refused: {path!r} is absolute; file steps take paths relative to the session directory",
        )
    try:  # baton's one containment check; links are followed only if they stay inside
        resolve_inside(Path(cwd), path, must_exist=False, regular_file=True, allow_symlink=True)
    except SecurityError as exc:
        return "", f"refused: {path!r} is outside the session directory ({exc})"
    return os.path.normpath(os.path.join(cwd, path)), None


def _read_text(path: str) -> str | None:
    try:
        return Path(path).read_text(encoding="utf-8", errors="replace")
    except OSError:
        return None


def _write_text(path: str, content: str) -> None:
    Path(path).parent.mkdir(parents=True, exist_ok=True)
    Path(path).write_text(content, encoding="utf-8", newline="")


async def _mcp(ctx: StepContext, call: _Call, label: str, step: McpStep) -> _Ending:
    server, tool = ctx.hub.split(step.target) if ctx.hub else (None, step.target)
    raw_input: JsonObject = {"server": server, "tool": tool, "arguments": step.arguments}
    await call.open(label, "other", raw_input)
    if step.error is not None:
        return _failed(step.error)
    if ctx.hub is None:
        return _failed("this session has no MCP servers")
    if server is not None:
        return await _call_tool(ctx, call, ctx.hub, server, tool, step.arguments)
    try:
        found, tool = await until_cancelled(ctx.hub.resolve(step.target), ctx.channel.cancel)
    except McpError as exc:
        return _failed(str(exc))
    await call.progress(raw_input={"server": found, "tool": tool, "arguments": step.arguments})
    return await _call_tool(ctx, call, ctx.hub, found, tool, step.arguments)


async def _call_tool(
    ctx: StepContext, call: _Call, hub: McpHub, server: str, tool: str, arguments: JsonObject
) -> _Ending:
    await call.progress(status="in_progress")
    started = time.monotonic()
    calling = asyncio.wait_for(hub.call(server, tool, arguments), ctx.timeout)
    try:
        result = await until_cancelled(calling, ctx.channel.cancel)
    except TimeoutError:
        return _failed(f"timed out after {ctx.timeout:g} s")
    except McpError as exc:
        return _failed(str(exc))
    raw_output: JsonObject = {
        "isError": result.is_error,
        "durationMs": int((time.monotonic() - started) * 1000),
    }
    if result.structured is not None:
        raw_output["structuredContent"] = result.structured
    first_line = result.text.strip().split("\n", 1)[0] or "no details"
    return _Ending(
        status="failed" if result.is_error else "completed",
        raw_output=raw_output,
        content=tuple(block_content(block) for block in result.content) or None,
        reason=f"tool error: {first_line}" if result.is_error else None,
        output=result.text,
    )
