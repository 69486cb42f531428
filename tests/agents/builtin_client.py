"""A raw JSON-RPC test client driving the built-in agent as a real subprocess over stdio.

Deliberately independent of baton's own ACP client: these tests pin the agent's wire behaviour.
Every wait is on a message with a timeout; nothing sleeps and polls.
"""

import asyncio
import json
import sys
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

Message = dict[str, Any]
Answer = Callable[[Message], Any]

FIXTURES = Path(__file__).parent / "fixtures"
TIMEOUT = 10.0


class AgentError(Exception):
    """The agent answered a request with a JSON-RPC error."""

    def __init__(self, error: Message) -> None:
        super().__init__(f"{error.get('code')}: {error.get('message')}")
        self.code = error.get("code")
        self.error = error


def allow_once(message: Message) -> Any:
    """Default answers to agent requests: allow permissions, accept file writes."""
    method = message["method"]
    if method == "session/request_permission":
        return {"outcome": {"outcome": "selected", "optionId": "allow-once"}}
    if method == "fs/write_text_file":
        return None
    raise AgentError({"code": -32601, "message": f"test client does not implement {method}"})


def choose(option_id: str) -> Answer:
    """Answer every permission request with ``option_id``."""

    def answer(message: Message) -> Any:
        if message["method"] == "session/request_permission":
            return {"outcome": {"outcome": "selected", "optionId": option_id}}
        return allow_once(message)

    return answer


@dataclass
class Turn:
    """Everything the agent sent during one prompt, in order, and the prompt's response."""

    messages: list[Message]
    response: Message

    @property
    def updates(self) -> list[Message]:
        return [m["params"]["update"] for m in self.messages if m.get("method") == "session/update"]

    @property
    def requests(self) -> list[Message]:
        return [m for m in self.messages if "method" in m and "id" in m]

    @property
    def stop_reason(self) -> str:
        return str(self.response["result"]["stopReason"])

    def tool_updates(self, kind: str = "tool_call_update") -> list[Message]:
        return [u for u in self.updates if u["sessionUpdate"] == kind]

    def finals(self) -> list[Message]:
        """The final update of each tool call."""
        return [u for u in self.tool_updates() if u.get("status") in ("completed", "failed")]

    def summary(self) -> str:
        messages = [u for u in self.updates if u["sessionUpdate"] == "agent_message_chunk"]
        assert len(messages) == 1, messages
        return str(messages[0]["content"]["text"])

    def shape(self, *, keep_output: bool = False) -> list[str]:
        """A compact, comparable picture of the sequence (output-only updates dropped)."""
        shapes = [shape(m) for m in self.messages] + [f"response:{self.stop_reason}"]
        return [s for s in shapes if keep_output or s != "tool_call_update:output"]


def shape(message: Message) -> str:
    if "id" in message and "method" in message:
        return f"request:{message['method']}"
    update = message["params"]["update"]
    kind = update["sessionUpdate"]
    if kind == "plan":
        return "plan:" + ",".join(e["status"] for e in update["entries"])
    if kind == "tool_call":
        return f"tool_call:{update['kind']}:{update['status']}"
    if kind == "tool_call_update":
        return f"tool_call_update:{update.get('status') or 'output'}"
    return str(kind)


@dataclass
class AgentProcess:
    """One running agent and the client end of its pipes."""

    process: asyncio.subprocess.Process
    log_path: Path
    pending: list[Message] = field(default_factory=list)
    next_id: int = 1000

    @classmethod
    async def start(cls, env: dict[str, str], log_path: Path) -> "AgentProcess":
        with log_path.open("ab") as log:
            process = await asyncio.create_subprocess_exec(
                sys.executable,
                "-m",
                "baton.agents.builtin",
                stdin=asyncio.subprocess.PIPE,
                stdout=asyncio.subprocess.PIPE,
                stderr=log,
                env=env,
                limit=64 * 1024 * 1024,
            )
        return cls(process, log_path)

    def log(self) -> str:
        return self.log_path.read_text(errors="replace")

    async def send(self, message: Message | bytes) -> None:
        assert self.process.stdin is not None
        data = message if isinstance(message, bytes) else json.dumps(message).encode() + b"\n"
        self.process.stdin.write(data)
        await self.process.stdin.drain()

    async def send_request(self, method: str, params: Message) -> int:
        self.next_id += 1
        await self.send({"jsonrpc": "2.0", "id": self.next_id, "method": method, "params": params})
        return self.next_id

    async def notify(self, method: str, params: Message) -> None:
        await self.send({"jsonrpc": "2.0", "method": method, "params": params})

    async def receive(self, timeout: float = TIMEOUT) -> Message:
        """The next message from the agent."""
        if self.pending:
            return self.pending.pop(0)
        assert self.process.stdout is not None
        try:
            line = await asyncio.wait_for(self.process.stdout.readline(), timeout)
        except TimeoutError:
            raise AssertionError(
                f"no message from the agent within {timeout} s\n{self.log()}"
            ) from None
        assert line, f"the agent closed its stdout\n{self.log()}"
        assert line.endswith(b"\n")
        message: Message = json.loads(line)
        return message

    async def exchange(
        self,
        request_id: int,
        answer: Answer = allow_once,
        on_message: Callable[[Message], Awaitable[None]] | None = None,
        timeout: float = TIMEOUT,
    ) -> tuple[list[Message], Message]:
        """Collect messages until the response to ``request_id``, answering agent requests."""
        seen: list[Message] = []
        while True:
            message = await self.receive(timeout)
            if "method" not in message and message.get("id") == request_id:
                return seen, message
            seen.append(message)
            if "method" in message and "id" in message:
                await self._answer(message, answer)
            if on_message is not None:
                await on_message(message)

    async def _answer(self, message: Message, answer: Answer) -> None:
        try:
            result = answer(message)
        except AgentError as exc:
            await self.send({"jsonrpc": "2.0", "id": message["id"], "error": exc.error})
        else:
            await self.send({"jsonrpc": "2.0", "id": message["id"], "result": result})

    async def call(self, method: str, params: Message, timeout: float = TIMEOUT) -> Any:
        """A request whose response is expected without agent requests in between."""
        request_id = await self.send_request(method, params)
        seen, response = await self.exchange(request_id, timeout=timeout)
        self.pending.extend(seen)
        if "error" in response:
            raise AgentError(response["error"])
        return response["result"]

    async def initialize(self, *, write_files: bool = False) -> Message:
        capabilities = {
            "fs": {"readTextFile": write_files, "writeTextFile": write_files},
            "terminal": False,
        }
        result: Message = await self.call(
            "initialize",
            {
                "protocolVersion": 1,
                "clientCapabilities": capabilities,
                "clientInfo": {"name": "tests", "version": "0"},
            },
        )
        return result

    async def new_session(self, cwd: Path, mcp_servers: list[Message] | None = None) -> str:
        result = await self.call("session/new", {"cwd": str(cwd), "mcpServers": mcp_servers or []})
        return str(result["sessionId"])

    async def prompt(
        self,
        session_id: str,
        text: str,
        answer: Answer = allow_once,
        on_message: Callable[[Message], Awaitable[None]] | None = None,
        timeout: float = TIMEOUT,
    ) -> Turn:
        request_id = await self.send_request(
            "session/prompt", {"sessionId": session_id, "prompt": [{"type": "text", "text": text}]}
        )
        messages, response = await self.exchange(request_id, answer, on_message, timeout)
        assert "result" in response, response
        return Turn(messages, response)

    async def close(self, timeout: float = TIMEOUT) -> int:
        """Close stdin (the agent's cue to exit) and wait for the exit code."""
        assert self.process.stdin is not None
        if not self.process.stdin.is_closing():
            self.process.stdin.close()
        try:
            return await asyncio.wait_for(self.process.wait(), timeout)
        except TimeoutError:
            self.process.kill()
            await self.process.wait()
            raise AssertionError(
                f"the agent did not exit within {timeout} s\n{self.log()}"
            ) from None


StartAgent = Callable[..., Awaitable[AgentProcess]]


def echo_server(log_path: Path, name: str = "echo") -> Message:
    """The ``mcpServers`` entry for the test MCP server, logging its calls to ``log_path``."""
    return {
        "name": name,
        "command": sys.executable,
        "args": [str(FIXTURES / "echo_mcp_server.py")],
        "env": [{"name": "ECHO_MCP_LOG", "value": str(log_path)}],
    }


def read_calls(log_path: Path) -> list[Message]:
    """The tool calls the test MCP server received, in order."""
    if not log_path.exists():
        return []
    return [json.loads(line) for line in log_path.read_text().splitlines()]
