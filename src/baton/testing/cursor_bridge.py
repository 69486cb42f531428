"""baton's scripted Cursor SDK bridge: the ``sdk/v1`` contract, runs played from scripts.

A stand-in for Cursor's ``cursor-sdk-bridge`` that needs no Cursor account and no network,
for driving the *real* ``cursor-sdk`` client (and baton's ``cursor-sdk`` transport) end to
end: ``python -m baton.testing.cursor_bridge`` takes the real bridge's flags, prints the
same ``cursor-sdk-bridge ready {...}`` line on stderr (token in a private file), and serves
the Connect methods the client calls (``SdkBridgeControlService``: Ping, GetVersion,
Shutdown, SetToolCallback; ``SdkAgentService``: CreateAgent, ResumeAgent, CloseAgent,
Send, CancelRun). Local agents live in ``<state root>/scripted-agents.json``, so a bridge
started again (baton restarted) resumes them; an unknown id is ``AGENT_NOT_FOUND``. A
``Send`` plays the message's script (:mod:`baton.testing.cursor_script`) as a run stream
of ``sdkMessage`` envelopes (the shapes ``@cursor/sdk`` 1.0.32 emits for local runs), then
the result and done envelopes.

``BATON_CURSOR_BRIDGE_TRACE`` names an NDJSON file that receives every message both ways
(``{"service", "method", "kind", "message"}``), the host callbacks included, after a first
``kind: "process"`` line with the bridge's pid and process group; tests check the traffic
against the protobuf schema shipped in the ``cursor-sdk`` wheel.

Length: the contract's methods over one agent store, and the player of the script steps.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import secrets
import signal
import subprocess
import sys
import tempfile
import time
import uuid
from collections.abc import AsyncIterator, Awaitable, Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Final

from baton.jsontypes import JsonMapping, JsonObject, JsonValue
from baton.testing.connect_server import ConnectError, ConnectServer
from baton.testing.cursor_script import ScriptError, parse_script

__all__ = ["BRIDGE_VERSION", "TRACE_ENV", "VALID_TOOLS", "ScriptedBridge", "main"]

BRIDGE_VERSION: Final = "1.0.0-scripted"
TRACE_ENV: Final = "BATON_CURSOR_BRIDGE_TRACE"
AGENT: Final = "sdk.v1.SdkAgentService"
CONTROL: Final = "sdk.v1.SdkBridgeControlService"
CALLBACK: Final = "sdk.v1.SdkCustomToolCallbackService"
CALLBACK_TIMEOUT: Final = 900.0
"""A host tool may wait for a human (a permission request): as long as a turn may."""

VALID_TOOLS: Final = frozenset(
    [
        "aiAttribution",
        "applyAgentDiff",
        "askQuestion",
        "await",
        "blameByFilePath",
        "communicateUpdate",
        "computerUse",
        "connectScm",
        "createAgent",
        "createGoal",
        "createPlan",
        "createProject",
        "createTrackedTasks",
        "delete",
        "deleteTrackedTasks",
        "edit",
        "editPrLabels",
        "fetch",
        "fetchCloudAgentData",
        "generateImage",
        "generateVideo",
        "getAgentStatus",
        "getMcpTools",
        "getOriginPrCodeTour",
        "glob",
        "grep",
        "listMcpResources",
        "listTrackedTasks",
        "ls",
        "mcp",
        "mcpAuth",
        "prManagement",
        "read",
        "readAgentTranscript",
        "readCanvas",
        "readLints",
        "readMcpResource",
        "readTodos",
        "recordCiInvestigationFindings",
        "recordScreen",
        "reflect",
        "replaceEnv",
        "reportBug",
        "reportBugfixResults",
        "searchConversations",
        "semSearch",
        "sendFinalSummary",
        "sendMessage",
        "sendToAgent",
        "sendToUser",
        "setActiveBranch",
        "setupVmEnvironment",
        "shell",
        "startGrindExecution",
        "startGrindPlanning",
        "startProjectUpdates",
        "stopAgent",
        "stopProjectUpdates",
        "switchMode",
        "task",
        "truncated",
        "updateGoal",
        "updateOriginPrCodeTour",
        "updateTodos",
        "updateTrackedTaskStatuses",
        "updateTrackedTaskTags",
        "updateTrackedTasks",
        "webFetch",
        "webSearch",
        "writeCanvas",
        "writeShellStdin",
        "xSearch",
    ]
)
"""The tool names cursor-sdk-bridge 1.0.0 accepts (its own error message lists them)."""


def _object(value: Any) -> dict[str, Any]:
    return dict(value) if isinstance(value, Mapping) else {}


def _status(word: str) -> str:
    return f"RUN_LIFECYCLE_STATUS_{word}"


@dataclass
class LiveRun:
    """One live run: cancelled by ``CancelRun``."""

    run_id: str
    agent_id: str
    cancelled: asyncio.Event = field(default_factory=asyncio.Event)


class ScriptedBridge:
    """The bridge's state and its Connect methods (see the module docstring)."""

    def __init__(self, state_root: Path, workspace: str, trace: Path | None) -> None:
        self.state_root = state_root
        self.workspace = workspace
        self.trace = trace
        self.agents: dict[str, dict[str, Any]] = self._load()
        self.runs: dict[str, LiveRun] = {}
        self.callback: tuple[str, str] | None = None
        self.stop = asyncio.Event()

    # ------------------------------------------------------------------ storage

    @property
    def _store(self) -> Path:
        return self.state_root / "scripted-agents.json"

    def _load(self) -> dict[str, dict[str, Any]]:
        try:
            data = json.loads(self._store.read_text(encoding="utf-8"))
        except (OSError, ValueError):
            return {}
        return data if isinstance(data, dict) else {}

    def _save(self) -> None:
        self.state_root.mkdir(parents=True, exist_ok=True)
        tmp = self._store.with_suffix(".tmp")
        tmp.write_text(json.dumps(self.agents, indent=1), encoding="utf-8")
        tmp.replace(self._store)

    def record(self, service: str, method: str, kind: str, message: JsonValue) -> None:
        if self.trace is None:
            return
        line = {"service": service, "method": method, "kind": kind, "message": message}
        with self.trace.open("a", encoding="utf-8") as out:
            out.write(json.dumps(line, separators=(",", ":")) + "\n")

    # ----------------------------------------------------------------- control

    async def ping(self, _: JsonObject) -> JsonObject:
        return {"message": "pong"}

    async def get_version(self, _: JsonObject) -> JsonObject:
        return {
            "bridgeVersion": BRIDGE_VERSION,
            "protocolVersion": "sdk.v1",
            "capabilities": ["agent.create", "agent.resume", "agent.send", "run.cancel"],
        }

    async def shutdown(self, _: JsonObject) -> JsonObject:
        asyncio.get_running_loop().call_later(0.05, self.stop.set)
        return {}

    async def set_tool_callback(self, message: JsonObject) -> JsonObject:
        url, token = message.get("url") or "", message.get("authToken") or ""
        self.callback = (url, token) if url else None
        return {}

    # ------------------------------------------------------------------- agents

    def _options(self, options: Any) -> dict[str, Any]:
        options = options if isinstance(options, Mapping) else {}
        tools = options.get("tools")
        names = tools.get("names") if isinstance(tools, Mapping) else None
        unknown = sorted(set(names or ()) - VALID_TOOLS)
        if unknown:
            raise ConnectError(
                "invalid_argument", f"Unknown tool name(s) in `tools`: {', '.join(unknown)}."
            )
        local = options.get("local") if isinstance(options.get("local"), Mapping) else {}
        cwd = (local.get("cwd") or [self.workspace])[0]
        custom = local.get("customTools")
        return {
            "cwd": cwd,
            "model": options.get("model") or {"id": "composer-2"},
            "tools": list(names) if names is not None else None,
            "customTools": sorted(custom) if isinstance(custom, Mapping) else [],
            "apiKey": bool(options.get("apiKey")),
        }

    async def create_agent(self, message: JsonObject) -> JsonObject:
        settings = self._options(message.get("options"))
        options = _object(message.get("options"))
        # The client names a new agent itself when it registers custom tools for it.
        agent_id = str(options.get("agentId") or f"agent-{uuid.uuid4()}")
        if agent_id in self.agents:
            raise ConnectError("already_exists", f"Agent {agent_id} already exists")
        self.agents[agent_id] = {**settings, "runs": 0, "created": time.time()}
        self._save()
        return {"agentId": agent_id, "model": settings["model"]}

    async def resume_agent(self, message: JsonObject) -> JsonObject:
        agent_id = str(message.get("agentId") or "")
        if agent_id not in self.agents:
            raise ConnectError(
                "not_found", f"Agent {agent_id} not found", "SDK_ERROR_CODE_AGENT_NOT_FOUND"
            )
        settings = self._options(message.get("options"))
        self.agents[agent_id].update(settings, resumed=self.agents[agent_id].get("resumed", 0) + 1)
        self._save()
        return {"agentId": agent_id, "model": settings["model"]}

    async def close_agent(self, message: JsonObject) -> JsonObject:
        return {}

    async def cancel_run(self, message: JsonObject) -> JsonObject:
        run = self.runs.get(str(message.get("runId") or ""))
        if run is None:  # as cursor-sdk-bridge 1.0.0 answers it (observed)
            raise ConnectError("invalid_argument", f"Run {message.get('runId')} not found")
        run.cancelled.set()
        return {}

    async def send(self, message: JsonObject) -> AsyncIterator[JsonObject]:
        agent_id = str(message.get("agentId") or "")
        agent = self.agents.get(agent_id)
        if agent is None:
            raise ConnectError(
                "not_found", f"Agent {agent_id} not found", "SDK_ERROR_CODE_AGENT_NOT_FOUND"
            )
        if any(r.agent_id == agent_id for r in self.runs.values()):
            raise ConnectError("failed_precondition", "agent is busy", "SDK_ERROR_CODE_AGENT_BUSY")
        run = LiveRun(f"run-{uuid.uuid4()}", agent_id)
        self.runs[run.run_id] = run
        agent["runs"] += 1
        self._save()
        options = _object(message.get("options"))
        text = str(_object(message.get("message")).get("text") or "")
        player = Player(self, agent, run, options.get("mcpServers") or {})
        try:
            async for envelope in player.play(text):
                yield envelope
        finally:
            self.runs.pop(run.run_id, None)

    def server(self, token: str) -> ConnectServer:
        return ConnectServer(
            token=token,
            unary={
                f"{CONTROL}/Ping": self.ping,
                f"{CONTROL}/GetVersion": self.get_version,
                f"{CONTROL}/Shutdown": self.shutdown,
                f"{CONTROL}/SetToolCallback": self.set_tool_callback,
                f"{AGENT}/CreateAgent": self.create_agent,
                f"{AGENT}/ResumeAgent": self.resume_agent,
                f"{AGENT}/CloseAgent": self.close_agent,
                f"{AGENT}/CancelRun": self.cancel_run,
            },
            streams={f"{AGENT}/Send": self.send},
            observer=self.record,
        )


class Player:
    """Plays one message's script as one run's envelopes."""

    def __init__(
        self, bridge: ScriptedBridge, agent: JsonObject, run: LiveRun, mcp: JsonMapping
    ) -> None:
        self.bridge = bridge
        self.agent = agent
        self.run = run
        self.mcp = mcp
        self.offset = 0
        self.reply: list[str] = []
        self.calls = 0

    def _envelope(self, body: dict[str, Any]) -> dict[str, Any]:
        self.offset += 1
        return {**body, "offset": str(self.offset)}

    def _sdk(self, kind: str, **fields: Any) -> dict[str, Any]:
        message = {"type": kind, "agent_id": self.run.agent_id, "run_id": self.run.run_id, **fields}
        return self._envelope({"sdkMessage": {"type": kind, "message": message}})

    def _allowed(self, tool: str) -> bool:
        tools = self.agent.get("tools")
        return tools is None or tool in tools

    async def play(self, text: str) -> AsyncIterator[JsonObject]:
        started = time.monotonic()
        yield self._sdk("status", status="RUNNING")
        yield self._sdk(
            "user", message={"role": "user", "content": [{"type": "text", "text": text}]}
        )
        try:
            steps = parse_script(text)
        except ScriptError as exc:
            steps = [{"text": f"scripted bridge: {exc}"}]
        if steps is None:
            steps = [{"text": "scripted bridge: the message holds no cursor-sdk-script block"}]
        status, error = "FINISHED", None
        for step in steps:
            if self.run.cancelled.is_set():
                status = "CANCELLED"
                break
            ((kind, value),) = step.items()
            if kind == "error":
                status, error = "ERROR", value
                break
            if kind == "fail_stream":
                raise ConnectError(
                    str(value.get("code", "internal")), str(value.get("message", ""))
                )
            if kind == "exit":
                os._exit(int(value))
            if kind == "hang":
                await asyncio.Event().wait()
            if kind == "wait_cancel":
                timeout = value.get("timeout") if isinstance(value, Mapping) else None
                try:
                    await asyncio.wait_for(self.run.cancelled.wait(), timeout)
                except TimeoutError:
                    continue
                status = "CANCELLED"
                break
            async for envelope in getattr(self, f"_{kind}")(value):
                yield envelope
        if status == "FINISHED" and self.run.cancelled.is_set():
            status = "CANCELLED"
        message = str(error.get("message", "")) if isinstance(error, Mapping) else None
        yield self._sdk("status", status=status, **({"message": message} if message else {}))
        result: dict[str, Any] = {
            "runId": self.run.run_id,
            "agentId": self.run.agent_id,
            "status": _status(status),
            "result": "".join(self.reply),
            "model": self.agent.get("model") or {"id": "composer-2"},
            "durationMs": str(int((time.monotonic() - started) * 1000)),
        }
        if isinstance(error, Mapping):
            result["errorCode"] = str(error.get("code", "internal"))
            result["errorMessage"] = message or ""
        yield self._envelope(
            {
                "result": {
                    "agentId": self.run.agent_id,
                    "runId": self.run.run_id,
                    "status": _status(status),
                    **({"errorCode": result["errorCode"]} if "errorCode" in result else {}),
                    "result": result,
                }
            }
        )
        yield self._envelope({"done": {"agentId": self.run.agent_id, "runId": self.run.run_id}})

    # -------------------------------------------------------------------- steps

    async def _text(self, value: Any) -> AsyncIterator[dict[str, Any]]:
        text = str(value)
        self.reply.append(text)
        cut = max(1, len(text) // 3)
        for start in range(0, len(text), cut):
            block = {"type": "text", "text": text[start : start + cut]}
            yield self._sdk("assistant", message={"role": "assistant", "content": [block]})

    async def _thinking(self, value: Any) -> AsyncIterator[dict[str, Any]]:
        yield self._sdk("thinking", text=str(value))
        yield self._sdk("thinking", text="", thinking_duration_ms=7)

    def _call_id(self) -> str:
        self.calls += 1
        return f"call-{self.run.run_id[-8:]}-{self.calls}"

    async def _tool(
        self, name: str, args: Any, result: Any, *, error: bool = False, call_id: str | None = None
    ) -> AsyncIterator[dict[str, Any]]:
        call = call_id or self._call_id()
        yield self._sdk("tool_call", call_id=call, name=name, status="running", args=args)
        yield self._sdk(
            "tool_call",
            call_id=call,
            name=name,
            status="error" if error else "completed",
            args=args,
            result=result,
        )

    async def _write(self, value: Any) -> AsyncIterator[dict[str, Any]]:
        path, content = str(value["path"]), str(value["content"])
        args = {"path": path, "fileText": content}
        if not self._allowed("edit"):
            refusal = {"status": "error", "error": "the edit tool is not offered to this agent"}
            async for envelope in self._tool("write", args, refusal, error=True):
                yield envelope
            return
        target = Path(self.agent["cwd"]) / path
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(content, encoding="utf-8")
        value_ = {"path": path, "linesCreated": content.count("\n"), "fileSize": len(content)}
        async for envelope in self._tool("write", args, {"status": "success", "value": value_}):
            yield envelope

    async def _shell(self, value: Any) -> AsyncIterator[dict[str, Any]]:
        args = {"command": str(value)}
        if not self._allowed("shell"):
            refusal = {"status": "error", "error": "the shell tool is not offered to this agent"}
            async for envelope in self._tool("shell", args, refusal, error=True):
                yield envelope
            return
        done = await asyncio.to_thread(
            subprocess.run,
            ["/bin/sh", "-c", str(value)],
            cwd=self.agent["cwd"],
            capture_output=True,
            text=True,
            timeout=120,
            check=False,
        )
        result = {
            "status": "success",
            "value": {
                "exitCode": done.returncode,
                "signal": "",
                "stdout": done.stdout,
                "stderr": done.stderr,
                "executionTime": 1,
            },
        }
        async for envelope in self._tool("shell", args, result):
            yield envelope

    async def _mcp_tool(
        self, mcp_args: dict[str, Any], outcome: Callable[[str], Awaitable[tuple[Any, bool]]]
    ) -> AsyncIterator[dict[str, Any]]:
        """An ``mcp`` tool call: running, then ``outcome(call_id)``'s (result, failed)."""
        call = self._call_id()
        yield self._sdk("tool_call", call_id=call, name="mcp", status="running", args=mcp_args)
        result, failed = await outcome(call)
        yield self._sdk(
            "tool_call",
            call_id=call,
            name="mcp",
            status="error" if failed else "completed",
            args=mcp_args,
            result=result,
        )

    async def _custom(self, value: Any) -> AsyncIterator[dict[str, Any]]:
        tool, args = str(value["tool"]), dict(value.get("args") or {})
        mcp_args = {"providerIdentifier": "custom-user-tools", "toolName": tool, "args": args}
        async for envelope in self._mcp_tool(
            mcp_args, lambda call: self._call_custom(tool, args, call)
        ):
            yield envelope

    async def _call_custom(self, tool: str, args: dict[str, Any], call: str) -> tuple[Any, bool]:
        if self.bridge.callback is None or tool not in self.agent.get("customTools", []):
            return {"error": f"no custom tool {tool!r} is registered for this agent"}, True
        import httpx

        url, token = self.bridge.callback
        request = {"toolName": tool, "args": args, "toolCallId": call, "agentId": self.run.agent_id}
        self.bridge.record(CALLBACK, "CallCustomTool", "request", request)
        async with httpx.AsyncClient(timeout=CALLBACK_TIMEOUT) as client:
            reply = await client.post(
                url.rstrip("/") + f"/{CALLBACK}/CallCustomTool",
                json=request,
                headers={"Authorization": f"Bearer {token}", "Connect-Protocol-Version": "1"},
            )
        body = reply.json()
        self.bridge.record(
            CALLBACK, "CallCustomTool", "response" if reply.is_success else "error", body
        )
        if not reply.is_success:
            return {"error": body.get("message", "")}, True
        result = body.get("result") or {}
        return result, bool(result.get("isError"))

    async def _mcp(self, value: Any) -> AsyncIterator[dict[str, Any]]:
        tool, args = str(value["tool"]), dict(value.get("args") or {})
        servers = dict(self.mcp)
        name = value.get("server") or (next(iter(servers)) if len(servers) == 1 else None)
        mcp_args = {"providerIdentifier": str(name), "toolName": tool, "args": args}

        async def outcome(call: str) -> tuple[Any, bool]:
            if name not in servers:
                return {"error": f"no MCP server {name!r} was given on Send"}, True
            return await _call_mcp(servers[name], tool, args, self.agent["cwd"])

        async for envelope in self._mcp_tool(mcp_args, outcome):
            yield envelope

    async def _todos(self, value: Any) -> AsyncIterator[dict[str, Any]]:
        async for envelope in self._tool("updateTodos", {"todos": value}, {"status": "success"}):
            yield envelope

    async def _task(self, value: Any) -> AsyncIterator[dict[str, Any]]:
        args = {
            "description": str(value.get("description", "")),
            "prompt": str(value.get("prompt", "")),
            "subagentType": {"kind": str(value.get("subagent", "explore"))},
        }
        async for envelope in self._tool("task", args, {"status": "success", "value": {}}):
            yield envelope

    async def _usage(self, value: Any) -> AsyncIterator[dict[str, Any]]:
        yield self._sdk("usage", usage=dict(value))

    async def _unknown(self, value: Any) -> AsyncIterator[dict[str, Any]]:
        fields = dict(value) if isinstance(value, Mapping) else {"value": value}
        kind = str(fields.pop("type", "hologram"))
        yield self._sdk(kind, **fields)


async def _call_mcp(
    config: Mapping[str, Any], tool: str, args: dict[str, Any], cwd: str
) -> tuple[Any, bool]:
    """One MCP tool call on a stdio server started from ``Send``'s config."""
    from mcp import ClientSession, StdioServerParameters
    from mcp.client.stdio import stdio_client

    stdio = config.get("stdio") if isinstance(config.get("stdio"), Mapping) else None
    if stdio is None:
        return {"error": "only stdio MCP servers are scripted"}, True
    params = StdioServerParameters(
        command=str(stdio["command"]),
        args=[str(a) for a in stdio.get("args") or []],
        env={str(k): str(v) for k, v in (stdio.get("env") or {}).items()},
        cwd=str(stdio.get("cwd") or cwd),
    )
    try:
        async with (
            stdio_client(params, errlog=sys.stderr) as (read, write),
            ClientSession(read, write) as session,
        ):
            await session.initialize()
            answer = await session.call_tool(tool, args)
    except Exception as exc:  # the server failed: the tool call's error, as Cursor shows it
        return {"error": f"{type(exc).__name__}: {exc}"}, True
    content = [b.model_dump(mode="json", by_alias=True, exclude_none=True) for b in answer.content]
    return {"content": content, "isError": bool(answer.is_error)}, bool(answer.is_error)


# ------------------------------------------------------------------------- process


def _parse(argv: list[str]) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="python -m baton.testing.cursor_bridge")
    parser.add_argument("--host", default=os.environ.get("CURSOR_SDK_BRIDGE_HOST", "127.0.0.1"))
    parser.add_argument(
        "--port", type=int, default=int(os.environ.get("CURSOR_SDK_BRIDGE_PORT") or 0)
    )
    parser.add_argument("--workspace", default=os.environ.get("CURSOR_SDK_BRIDGE_WORKSPACE", "."))
    parser.add_argument("--state-root", default=os.environ.get("CURSOR_SDK_BRIDGE_STATE_ROOT"))
    for flag in ("--tool-callback-url", "--tool-callback-auth-token", "--local-store"):
        parser.add_argument(flag)
    for flag in ("--store-callback-url", "--store-callback-auth-token"):
        parser.add_argument(flag)
    parser.add_argument("--verbose", action="store_true")
    return parser.parse_args(argv)


async def _serve(args: argparse.Namespace) -> int:
    state = Path(args.state_root or tempfile.mkdtemp(prefix="scripted-bridge-")).resolve()
    trace = os.environ.get(TRACE_ENV)
    bridge = ScriptedBridge(
        state, str(Path(args.workspace).resolve()), Path(trace) if trace else None
    )
    bridge.record("", "", "process", {"pid": os.getpid(), "pgid": os.getpgid(0)})
    if args.tool_callback_url:
        bridge.callback = (args.tool_callback_url, args.tool_callback_auth_token or "")
    token = secrets.token_urlsafe(32)
    server = bridge.server(token)
    port = await server.start(args.host, args.port)
    token_dir = Path(tempfile.mkdtemp(prefix="cursor-sdk-bridge-"))
    token_file = token_dir / "auth-token"
    fd = os.open(token_file, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    with os.fdopen(fd, "w") as out:
        out.write(token)
    ready = {
        "schemaVersion": 1,
        "serverVersion": BRIDGE_VERSION,
        "pid": os.getpid(),
        "transport": "tcp",
        "protocol": "connect",
        "host": args.host,
        "port": port,
        "url": f"http://{args.host}:{port}",
        "authTokenFile": str(token_file),
        "workspaceRef": bridge.workspace,
        "stateRoot": str(state),
    }
    sys.stderr.write("cursor-sdk-bridge ready " + json.dumps(ready) + "\n")
    sys.stderr.flush()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, bridge.stop.set)
    await bridge.stop.wait()
    await server.close()
    token_file.unlink(missing_ok=True)
    token_dir.rmdir()
    return 0


def main(argv: list[str] | None = None) -> int:
    return asyncio.run(_serve(_parse(sys.argv[1:] if argv is None else argv)))


if __name__ == "__main__":
    raise SystemExit(main())
