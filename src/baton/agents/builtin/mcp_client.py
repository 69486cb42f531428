"""MCP servers given to a session: connected on first use, kept for the session, closed at exit.

stdio servers always; ``http`` (streamable HTTP) servers when the agent advertises
``mcpCapabilities.http`` (``BATON_BUILTIN_MCP_HTTP=1``: a cluster worker reaching the
coordinator's hub); other entries are skipped with a log line. The ``mcp`` SDK costs most of a second to import, so it is
imported, in a worker thread, only when a session first needs a server: sessions without MCP
work never pay for it.

Each connection lives in a task of its own, because the SDK's transport and session are
context managers that must be entered and left in the same task; callers from any task use
the session while that task keeps it open.
"""

import asyncio
import contextlib
import importlib
import logging
import sys
from collections.abc import AsyncIterator, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import baton
from baton.errors import BuiltinAgentError
from baton.jsontypes import JsonValue

from .jsonrpc import JsonObject

if TYPE_CHECKING:
    from mcp import ClientSession

__all__ = [
    "HttpServer",
    "McpError",
    "McpHub",
    "StdioServer",
    "ToolIndex",
    "ToolResult",
    "parse_servers",
]

log = logging.getLogger(__name__)

CONNECT_TIMEOUT = 30.0
_MAX_TOOL_PAGES = 20


class McpError(BuiltinAgentError):
    """An MCP server could not be reached, or would not run the call."""


@dataclass(frozen=True, slots=True)
class StdioServer:
    """A stdio MCP server as given in ``session/new`` or ``session/load``."""

    name: str
    command: str
    args: tuple[str, ...] = ()
    env: tuple[tuple[str, str], ...] = ()

    def to_json(self) -> JsonObject:
        """The ACP wire form, for storing with the session."""
        return {
            "name": self.name,
            "command": self.command,
            "args": list(self.args),
            "env": [{"name": k, "value": v} for k, v in self.env],
        }


@dataclass(frozen=True, slots=True)
class HttpServer:
    """A streamable-HTTP MCP server as given in ``session/new``: its URL and headers."""

    name: str
    url: str
    headers: tuple[tuple[str, str], ...] = ()

    def __repr__(self) -> str:  # the headers carry a bearer credential: never print them
        return f"HttpServer(name={self.name!r}, url={self.url!r})"


McpServer = StdioServer | HttpServer


@dataclass(frozen=True, slots=True)
class ToolResult:
    """A tool's answer: ACP content blocks, their text, the structured part, the error flag."""

    is_error: bool
    content: tuple[JsonObject, ...]
    text: str
    structured: Any = None


@dataclass(frozen=True, slots=True)
class ToolIndex:
    """Tool names per reachable server (in the client's order), and why others are not."""

    tools: dict[str, tuple[str, ...]]
    errors: dict[str, str]

    def provider(self, tool: str) -> str | None:
        """The first server exposing ``tool``."""
        return next((server for server, names in self.tools.items() if tool in names), None)


def parse_servers(raw: JsonValue, *, http: bool = False) -> list[McpServer]:
    """Read ``mcpServers`` (``http`` entries too when ``http``); raises ValueError on a
    malformed entry of a supported transport."""
    if raw is None:
        return []
    if not isinstance(raw, list):
        raise ValueError("mcpServers must be an array")
    servers: dict[str, McpServer] = {}
    for entry in raw:
        if not isinstance(entry, dict):
            raise ValueError("each mcpServers entry must be an object")
        kind = entry.get("type", "stdio")
        server: McpServer
        if kind == "stdio":
            server = _stdio_server(entry)
        elif kind == "http" and http:
            server = _http_server(entry)
        else:
            log.warning(
                "skipping MCP server %r: transport %r is not supported", entry.get("name"), kind
            )
            continue
        if server.name in servers:
            log.warning("skipping duplicate MCP server name %r", server.name)
            continue
        servers[server.name] = server
    return list(servers.values())


def _stdio_server(entry: JsonObject) -> StdioServer:
    name, command = entry.get("name"), entry.get("command")
    args, env = entry.get("args", []), entry.get("env", [])
    if not isinstance(name, str) or not name or not isinstance(command, str) or not command:
        raise ValueError("a stdio MCP server needs a name and a command")
    if not isinstance(args, list) or not all(isinstance(a, str) for a in args):
        raise ValueError(f"MCP server {name!r}: args must be an array of strings")
    if not isinstance(env, list) or not all(
        isinstance(e, dict) and isinstance(e.get("name"), str) and isinstance(e.get("value"), str)
        for e in env
    ):
        raise ValueError(f"MCP server {name!r}: env must be an array of {{name, value}}")
    return StdioServer(name, command, tuple(args), tuple((e["name"], e["value"]) for e in env))


def _http_server(entry: JsonObject) -> HttpServer:
    name, url, headers = entry.get("name"), entry.get("url"), entry.get("headers", [])
    if not isinstance(name, str) or not name or not isinstance(url, str):
        raise ValueError("an http MCP server needs a name and a url")
    if not url.startswith(("http://", "https://")) or len(url) > 2048:
        raise ValueError(f"MCP server {name!r}: url must be http(s), at most 2048 characters")
    if not isinstance(headers, list) or not all(
        isinstance(h, dict) and isinstance(h.get("name"), str) and isinstance(h.get("value"), str)
        for h in headers
    ):
        raise ValueError(f"MCP server {name!r}: headers must be an array of {{name, value}}")
    return HttpServer(name, url, tuple((h["name"], h["value"]) for h in headers))


class McpHub:
    """The MCP servers of one session."""

    def __init__(self, servers: Sequence[McpServer], cwd: str) -> None:
        self._links = {server.name: _Link(server, cwd) for server in servers}

    async def index(self) -> ToolIndex:
        """Connect to every server (concurrently) and list their tools."""
        names = list(self._links)
        results = await asyncio.gather(
            *(self._links[n].tools() for n in names), return_exceptions=True
        )
        tools: dict[str, tuple[str, ...]] = {}
        errors: dict[str, str] = {}
        for name, result in zip(names, results, strict=True):
            if isinstance(result, McpError):
                errors[name] = str(result)
            elif isinstance(result, BaseException):
                raise result
            else:
                tools[name] = result
        return ToolIndex(tools, errors)

    def split(self, target: str) -> tuple[str | None, str]:
        """``(server, tool)`` when ``target`` starts with a server name and a dot, else (None, target)."""
        for name in self._links:
            if target.startswith(f"{name}.") and len(target) > len(name) + 1:
                return name, target[len(name) + 1 :]
        return None, target

    async def resolve(self, target: str) -> tuple[str, str]:
        """Find ``(server, tool)`` for ``SERVER.TOOL`` or a tool name exposed by one server."""
        server, tool = self.split(target)
        if server is not None:
            return server, tool
        if not target:
            raise McpError("an mcp step needs a tool: ```mcp SERVER.TOOL")
        if not self._links:
            raise McpError("this session has no MCP servers")
        index = await self.index()
        offering = [server for server, tools in index.tools.items() if target in tools]
        if len(offering) == 1:
            return offering[0], target
        if offering:
            raise McpError(
                f"tool {target!r} is offered by {', '.join(offering)}: write SERVER.{target}"
            )
        raise McpError(f"no reachable MCP server of this session offers tool {target!r}")

    async def call(self, server: str, tool: str, arguments: JsonObject) -> ToolResult:
        """Call a tool; a tool-level failure comes back as ``is_error``, others raise McpError."""
        link = self._links.get(server)
        if link is None:
            raise McpError(f"no MCP server named {server!r} in this session")
        return await link.call(tool, arguments)

    async def aclose(self) -> None:
        """Close every connection (each shutdown is bounded by the SDK)."""
        await asyncio.gather(*(link.aclose() for link in self._links.values()))


class _Link:
    """One server: a task holding its connection open until `aclose`."""

    def __init__(self, server: McpServer, cwd: str) -> None:
        self._server = server
        self._cwd = cwd
        self._task: asyncio.Task[None] | None = None
        self._ready: asyncio.Future[tuple[ClientSession, tuple[str, ...]]] | None = None
        self._closing = asyncio.Event()

    async def tools(self) -> tuple[str, ...]:
        _, tools = await self._connect()
        return tools

    async def call(self, tool: str, arguments: JsonObject) -> ToolResult:
        from mcp import MCPError

        session, _ = await self._connect()
        try:
            result = await session.call_tool(tool, arguments)
        except MCPError as exc:
            raise McpError(f"{self._server.name}.{tool}: {exc.error.message}") from exc
        except Exception as exc:  # any transport failure is this tool call's failure
            raise McpError(f"{self._server.name}.{tool}: connection failed: {exc!r}") from exc
        blocks = tuple(
            block.model_dump(mode="json", by_alias=True, exclude_none=True)
            for block in result.content
        )
        text = "\n".join(b["text"] for b in blocks if b.get("type") == "text")
        return ToolResult(bool(result.is_error), blocks, text, result.structured_content)

    async def aclose(self) -> None:
        self._closing.set()
        if self._task is not None:
            await asyncio.wait([self._task])

    async def _connect(self) -> "tuple[ClientSession, tuple[str, ...]]":
        """The live session, (re)connecting when there is none; shared by concurrent callers."""
        if self._task is None or self._task.done():
            ready: asyncio.Future[tuple[ClientSession, tuple[str, ...]]]
            ready = asyncio.get_running_loop().create_future()
            ready.add_done_callback(_mark_retrieved)
            self._ready = ready
            self._closing = asyncio.Event()
            self._task = asyncio.create_task(self._hold(ready), name=f"mcp-{self._server.name}")
        assert self._ready is not None
        return await asyncio.shield(self._ready)

    async def _hold(self, ready: "asyncio.Future[tuple[ClientSession, tuple[str, ...]]]") -> None:
        name = self._server.name
        try:
            await asyncio.to_thread(importlib.import_module, _SDK_MODULE[type(self._server)])
            import anyio
            from mcp import ClientSession
            from mcp.types import Implementation

            info = Implementation(name="baton-builtin", version=baton.__version__)
            async with (
                _transport(self._server, self._cwd) as (read, write),
                ClientSession(read, write, client_info=info) as session,
            ):
                with anyio.fail_after(CONNECT_TIMEOUT):
                    await session.initialize()
                    tools = await _list_tools(session)
                ready.set_result((session, tools))
                await self._closing.wait()
        except Exception as exc:  # whatever ends the connection reaches its waiter
            if not ready.done():
                ready.set_exception(
                    McpError(f"MCP server {name!r} failed to start: {_reason(exc)}")
                )
            else:
                log.warning("MCP server %r disconnected: %s", name, _reason(exc))
        finally:
            if not ready.done():
                ready.set_exception(McpError(f"MCP server {name!r} was closed"))


_SDK_MODULE: dict[type, str] = {
    StdioServer: "mcp.client.stdio",
    HttpServer: "mcp.client.streamable_http",
}


@contextlib.asynccontextmanager
async def _transport(server: McpServer, cwd: str) -> AsyncIterator[tuple[Any, Any]]:
    """The SDK's (read, write) streams to ``server``: a child process, or streamable HTTP."""
    if isinstance(server, StdioServer):
        from mcp import StdioServerParameters
        from mcp.client.stdio import stdio_client

        params = StdioServerParameters(
            command=server.command, args=list(server.args), env=dict(server.env), cwd=cwd
        )
        async with stdio_client(params, errlog=sys.stderr) as (read, write):
            yield read, write
        return
    from mcp.client.streamable_http import streamable_http_client
    from mcp.shared._httpx_utils import create_mcp_http_client

    async with (
        create_mcp_http_client(headers=dict(server.headers)) as http,
        streamable_http_client(server.url, http_client=http) as streams,
    ):
        yield streams[0], streams[1]


async def _list_tools(session: "ClientSession") -> tuple[str, ...]:
    from mcp.types import PaginatedRequestParams

    names: list[str] = []
    cursor: str | None = None
    for _ in range(_MAX_TOOL_PAGES):
        params = PaginatedRequestParams(cursor=cursor) if cursor else None
        page = await session.list_tools(params=params)
        names.extend(tool.name for tool in page.tools)
        cursor = page.next_cursor
        if not cursor:
            break
    return tuple(names)


def _reason(exc: BaseException) -> str:
    """The innermost useful message of a (possibly grouped) exception."""
    while isinstance(exc, BaseExceptionGroup) and len(exc.exceptions) == 1:
        exc = exc.exceptions[0]
    if isinstance(exc, TimeoutError):
        return f"no answer within {CONNECT_TIMEOUT:g} s"
    return str(exc) or type(exc).__name__


def _mark_retrieved(future: "asyncio.Future[Any]") -> None:
    """Consume a connection failure nobody awaited (its caller was cancelled meanwhile)."""
    if not future.cancelled():
        future.exception()
