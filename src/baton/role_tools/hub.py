"""One MCP endpoint per ``baton up``, serving every role slot's tools from the team loop.

Before, every role slot's agent started its own role MCP server: a Python process
with the ``mcp`` SDK, the store and ``fcop`` loaded (~70 MiB per slot). Now the
team loop hosts the :class:`~baton.role_tools.server.RoleTools` of every slot
itself (one store, one writer, one FCoP port without authority), and an agent
reaches them one of two ways:

* **HTTP** (agents that advertise ``mcpCapabilities.http``): an ``http``
  ``mcpServers`` entry for ``http://127.0.0.1:PORT/mcp/<slot>`` (on a cluster, the
  coordinator's cluster address: role actors on other hosts) with the slot's
  credential as a bearer header, served by the ``mcp`` SDK's streamable-HTTP session
  manager inside the team loop (one manager per slot session).
* **stdio** (every agent): the stdlib-only shim (:mod:`baton.role_tools.stdio_shim`),
  which relays the agent's MCP lines over the team loop's unix socket
  (``<state>/mcp/hub.sock``, directory 0700, socket 0600), authenticating with the
  credential from its environment.

Identity: a connection speaks for the slot whose *current* credential it presented
(:mod:`baton.role_tools.credentials`; constant-time); a credential of a replaced
session, of another slot, or none is refused with a clear reason, and rotating a slot's
credential also closes the connections made with the old one. In cluster mode the table
is kept in the store (:meth:`RoleHub.keep_credentials`: digests only), so a restarted
coordinator's hub accepts the live credential of a role actor it re-attaches to. Every call then goes
through the same ``RoleTools`` (allowlist, identity from the binding and pointer,
``DAEMON_GONE``) and the same ``mcp`` server handlers as the per-slot server, so the
results and refusals are the same. Tool writes happen in the team loop, so the crash
harness's hooks (:mod:`baton.crashpoints`) see them. When the team loop dies, the kernel
closes its sockets: the shims see end-of-file and exit, HTTP clients get connection
errors; nothing outlives it.

On a cluster the HTTP front also takes the calls workers' role actors relay
(:meth:`RoleHub.serve_calls`: ``/calls`` and ``/read``, delivered once by
:mod:`baton.role_tools.delivery`), and a worker's relay runs a hub of its own whose tools
are the relay's (``tools_for``).

Length: the hub's two transports, its credential table (kept in the store on a cluster)
and the relayed calls answer one question, which slot a request speaks for, so they stay
in one class.
"""

from __future__ import annotations

import asyncio
import contextlib
import importlib
import json
import logging
import os
import sys
import threading
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any
from urllib.parse import quote

from baton.events.sequencer import utc_now
from baton.fcop_errors import CoordinationError
from baton.fcop_port.port import FcopPort
from baton.role_tools import stdio_shim
from baton.role_tools.binding import Binding, CurrentTask, SlotAccess
from baton.role_tools.credentials import (
    CredentialFact,
    Credentials,
    Refusal,
    SlotCredential,
    SlotGrant,
)
from baton.role_tools.delivery import Acceptance, Delivery, refusal
from baton.role_tools.server import (
    SERVER_NAME,
    McpServerEntry,
    RoleTools,
    ToolSurface,
    build_server,
)
from baton.store.credential_sql import credential_rows, put_slot_credentials
from baton.store.store import Store

if TYPE_CHECKING:
    from baton.role_tools.http_front import HttpFront

__all__ = ["SHIM_PATH", "RoleHub"]

log = logging.getLogger(__name__)

SHIM_PATH = Path(stdio_shim.__file__).resolve()
"""The shim's file: agents run it by absolute path (``python -I -S SHIM_PATH``)."""
MAX_LINE = 8 * 1024 * 1024
"""A longer MCP line from an agent closes its connection (tool arguments are ≤ 512 KiB)."""
HELLO_TIMEOUT = 10.0
SOCKET_NAME = "hub.sock"


@dataclass(eq=False)
class _Connection:
    grant: SlotGrant
    task: asyncio.Task[Any] | None


class RoleHub:
    """The team loop's MCP endpoint: a unix socket for shims and (optionally) loopback HTTP."""

    def __init__(
        self,
        store: Store,
        state_dir: Path,
        *,
        python: str | None = None,
        tools_for: Callable[[str], ToolSurface] | None = None,
    ) -> None:
        self.store = store
        self.tools_for = tools_for
        """The slot's tools when they are not this store's :class:`RoleTools` (a worker's
        relay to the coordinator's hub, ``baton.cluster.tool_relay``)."""
        self._delivery: Delivery | None = None
        self.dir = state_dir / "mcp"
        self.socket_path = self.dir / SOCKET_NAME
        self.python = python or sys.executable
        self.credentials = Credentials()
        self._ports: dict[tuple[Path, str], FcopPort] = {}
        self._ports_lock = threading.Lock()
        self._connections: set[_Connection] = set()
        self._server: asyncio.AbstractServer | None = None
        self._dir_fd: int | None = None
        self._http: HttpFront | None = None
        self._kept: str | None = None

    # ------------------------------------------------------------ lifecycle

    @classmethod
    async def start(
        cls,
        store: Store,
        state_dir: Path,
        *,
        http: bool = False,
        python: str | None = None,
        tools_for: Callable[[str], ToolSurface] | None = None,
    ) -> RoleHub:
        """Listen on ``<state_dir>/mcp/hub.sock`` (and on 127.0.0.1 now when ``http``)."""
        hub = cls(store, state_dir, python=python, tools_for=tools_for)
        await hub._listen()
        if http:
            await hub.start_http()
        return hub

    async def start_http(self, host: str = "127.0.0.1", port: int = 0) -> str:
        """Serve HTTP too (on the first session that can use it); its base URL.

        Loopback on one machine; a cluster coordinator passes its cluster address
        (``[cluster] hub_address``) so role actors on other hosts reach it."""
        if self._http is None:
            from baton.role_tools.http_front import HttpFront

            front = HttpFront(
                self.credentials, self._server_for, host=host, port=port, relayed=self._relayed
            )
            await front.start()
            self._http = front
        elif host != self._http.host or port not in (0, self._http.bound_port):
            raise CoordinationError(
                f"the hub already serves HTTP at {self._http.base_url}, not at {host}:{port}"
            )
        return self._http.base_url

    async def _listen(self) -> None:
        self.dir.mkdir(mode=0o700, parents=True, exist_ok=True)
        os.chmod(self.dir, 0o700)
        with contextlib.suppress(FileNotFoundError):
            self.socket_path.unlink()  # a dead team loop's socket (the project lock is held)
        self._server = await asyncio.start_unix_server(
            self._accept, path=self._bind_path(), limit=MAX_LINE
        )
        os.chmod(self.socket_path, 0o600)

    def _bind_path(self) -> str:
        """The socket's path, or a short alias through an open directory when it is too long."""
        path = str(self.socket_path)
        if len(path.encode()) <= stdio_shim.UNIX_PATH_MAX:
            return path
        self._dir_fd = os.open(self.dir, os.O_PATH | os.O_DIRECTORY)
        return f"/proc/self/fd/{self._dir_fd}/{SOCKET_NAME}"

    async def aclose(self) -> None:
        """Stop listening and close every connection (idempotent)."""
        if self._server is not None:
            self._server.close()
            self._server = None
        tasks = [c.task for c in self._connections if c.task is not None]
        for task in tasks:
            task.cancel()
        if tasks:
            await asyncio.wait(tasks, timeout=5)
        if self._http is not None:
            await self._http.stop()
            self._http = None
        with contextlib.suppress(FileNotFoundError):
            self.socket_path.unlink()
        if self._dir_fd is not None:
            os.close(self._dir_fd)
            self._dir_fd = None

    # ---------------------------------------------------------- credentials

    def issue(self, slot: str) -> SlotCredential:
        """A fresh credential for ``slot``'s next session; the old one's connections close."""
        credential = self.credentials.issue(slot)
        self._drop(slot, keep=credential.generation)
        return credential

    def revoke(self, credential: SlotCredential | SlotGrant) -> None:
        """The session holding ``credential`` ended: retire it (not a successor)."""
        if self.credentials.generation(credential.slot) == credential.generation:
            self.credentials.revoke(credential.slot, credential.generation)
            self._drop(credential.slot, keep=None)

    def live(self, slot: str) -> SlotGrant | None:
        """The slot session the live credential speaks for (a re-attached holder keeps it)."""
        return self.credentials.live(slot)

    def keep_credentials(self, project: str) -> None:
        """From now on keep the table in the store under ``project``, after taking back what
        this project's previous coordinator kept there (blocking, one read: call it before
        any agent of the project can reach the hub, i.e. before the team loop starts)."""
        rows = self.store.read_tx(lambda tx: credential_rows(tx, project))
        self.credentials.restore(
            CredentialFact(str(slot), int(gen), bytes.fromhex(str(digest)), bool(live))
            for slot, gen, digest, live in rows
        )
        self._kept = project

    async def issue_kept(self, slot: str) -> SlotCredential:
        """:meth:`issue`, stored before it is handed out (when the table is kept)."""
        credential = self.issue(slot)
        await self._keep(slot)
        return credential

    async def revoke_kept(self, credential: SlotCredential | SlotGrant) -> None:
        """:meth:`revoke`, stored (when the table is kept)."""
        self.revoke(credential)
        await self._keep(credential.slot)

    async def _keep(self, slot: str) -> None:
        project = self._kept
        if project is None:
            return
        rows = [(f.generation, f.digest.hex(), f.live) for f in self.credentials.facts(slot)]
        now = utc_now()
        await self.store.write(
            lambda tx: put_slot_credentials(tx, project, slot, rows, updated_at=now)
        )

    def _drop(self, slot: str, *, keep: int | None) -> None:
        for conn in list(self._connections):
            if conn.grant.slot == slot and conn.grant.generation != keep and conn.task:
                conn.task.cancel()
        if self._http is not None:
            self._http.drop(slot, keep)

    # -------------------------------------------------------- mcpServers entry

    def stdio_entry(self, credential: SlotCredential, *, name: str = SERVER_NAME) -> McpServerEntry:
        """The ``session/new`` stdio entry: the shim, its socket and slot, the token in env."""
        return {
            "name": name,
            "command": self.python,
            "args": [
                "-I",
                "-S",
                str(SHIM_PATH),
                "--socket",
                str(self.socket_path),
                "--slot",
                credential.slot,
            ],
            "env": [{"name": stdio_shim.TOKEN_ENV, "value": credential.token}],
        }

    def http_entry(self, credential: SlotCredential, *, name: str = SERVER_NAME) -> McpServerEntry:
        """The ``session/new`` http entry: the slot's URL, the token as a bearer header."""
        if self._http is None:
            raise CoordinationError("this baton up serves no HTTP MCP endpoint")
        return {
            "type": "http",
            "name": name,
            "url": f"{self._http.base_url}/mcp/{quote(credential.slot, safe='')}",
            "headers": [{"name": "Authorization", "value": f"Bearer {credential.token}"}],
        }

    # ------------------------------------------------------------- serving

    def tools(self, slot: str) -> ToolSurface:
        """The slot's tools over the team loop's store (blocking: call from a worker thread)."""
        if self.tools_for is not None:
            return self.tools_for(slot)
        return self.pinned_tools(slot, None)

    def pinned_tools(self, slot: str, pointer: CurrentTask | None) -> RoleTools:
        """The slot's tools acting on ``pointer``'s task (a relayed call's), blocking."""
        access = SlotAccess(self.store, slot)
        binding = access.binding()
        return RoleTools(access, port=self._port(binding), pointer=pointer)

    # ------------------------------------------------------- relayed calls

    def serve_calls(self, acceptance: Acceptance) -> Delivery:
        """Deliver the calls workers' role actors relay (``/calls``, ``/read`` on the HTTP
        front), each once, accepted by ``acceptance`` (the cluster's epoch rule)."""
        if self._delivery is None:
            self._delivery = Delivery(self.store, self.pinned_tools, acceptance)
        return self._delivery

    async def _relayed(self, kind: str, slot: str, request: Mapping[str, Any]) -> dict[str, Any]:
        delivery = self._delivery
        if delivery is None:
            return refusal("NO_RELAY", "this hub delivers no relayed calls")
        if kind == "calls":
            key = request.get("key")
            if not isinstance(key, str) or not key:
                return refusal("BAD_REQUEST", "a relayed call names its key")
            return await delivery.deliver(key, slot=slot)
        tool, arguments = request.get("tool"), request.get("arguments")
        task_id, attempt_id = request.get("task_id"), request.get("attempt_id")
        if not isinstance(tool, str) or not isinstance(arguments, dict):
            return refusal("BAD_REQUEST", "a relayed read names its tool and arguments")
        pointer = CurrentTask(
            task_id if isinstance(task_id, str) else None,
            attempt_id if isinstance(attempt_id, str) else None,
        )
        return await delivery.read_only(slot, tool, arguments, pointer)

    def _port(self, binding: Binding) -> FcopPort:
        """One FCoP port per workspace, without the trusted evaluator (tools hold no authority)."""
        key = (binding.fcop_root, binding.human)
        with self._ports_lock:  # connections open their tools in worker threads
            port = self._ports.get(key)
            if port is None:
                port = self._ports[key] = FcopPort(binding.fcop_root, human=binding.human)
            return port

    async def _accept(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        conn: _Connection | None = None
        try:
            verdict = await self._hello(reader)
            if isinstance(verdict, Refusal):
                log.warning("role MCP connection refused: %s", verdict.message)
                answer = {"ok": False, "code": verdict.code, "message": verdict.message}
                writer.write(json.dumps(answer).encode() + b"\n")
                await writer.drain()
                return
            conn = _Connection(verdict, asyncio.current_task())
            self._connections.add(conn)
            try:
                server = await self._server_for(verdict.slot)
            except CoordinationError as exc:  # the slot's binding is missing or malformed
                answer = {"ok": False, "code": "BAD_BINDING", "message": str(exc)}
                writer.write(json.dumps(answer).encode() + b"\n")
                await writer.drain()
                return
            writer.write(b'{"ok": true}\n')
            await writer.drain()
            await _serve_lines(server, reader, writer)
        except (ConnectionError, CoordinationError, asyncio.IncompleteReadError) as exc:
            log.warning("role MCP connection ended: %s", exc)
        finally:
            if conn is not None:
                self._connections.discard(conn)
            writer.close()
            with contextlib.suppress(Exception):
                await writer.wait_closed()

    async def _hello(self, reader: asyncio.StreamReader) -> SlotGrant | Refusal:
        try:
            line = await asyncio.wait_for(reader.readline(), HELLO_TIMEOUT)
            hello = json.loads(line)
        except (TimeoutError, ValueError):
            return Refusal("BAD_HELLO", "no hello from the shim")
        if not isinstance(hello, dict) or hello.get("hello") != stdio_shim.HELLO:
            return Refusal("BAD_HELLO", f"expected a {stdio_shim.HELLO} hello")
        return self.credentials.check(hello.get("slot"), hello.get("credential"))

    async def _server_for(self, slot: str) -> Any:
        await _import_mcp()
        tools = await asyncio.to_thread(self.tools, slot)
        return build_server(tools)


async def _import_mcp() -> None:
    """The ``mcp`` SDK, imported once in a worker thread (it costs most of a second)."""
    if "mcp.server.lowlevel" not in sys.modules:
        await asyncio.to_thread(importlib.import_module, "mcp.server.lowlevel")


async def _serve_lines(server: Any, reader: asyncio.StreamReader, writer: Any) -> None:
    """Run the ``mcp`` server over newline-delimited JSON-RPC on one socket connection."""
    import anyio
    import mcp.types as types
    from mcp.shared.message import SessionMessage

    read_send, read_recv = anyio.create_memory_object_stream[SessionMessage | Exception](0)
    write_send, write_recv = anyio.create_memory_object_stream[SessionMessage](0)

    async def inbound() -> None:
        async with read_send:
            while True:
                try:
                    line = await reader.readline()
                except (ValueError, asyncio.LimitOverrunError, ConnectionError):
                    return  # a line over MAX_LINE, or the peer is gone: end this connection
                if not line:
                    return
                try:
                    message = types.jsonrpc_message_adapter.validate_json(line, by_name=False)
                except Exception as exc:  # the SDK answers a malformed line itself
                    await read_send.send(exc)
                    continue
                await read_send.send(SessionMessage(message))

    async def outbound() -> None:
        async with write_recv:
            try:
                async for item in write_recv:
                    data = item.message.model_dump_json(by_alias=True, exclude_unset=True)
                    writer.write(data.encode() + b"\n")
                    await writer.drain()
            except (ConnectionError, OSError):
                group.cancel_scope.cancel()  # the agent (or its shim) went away

    async with anyio.create_task_group() as group:
        group.start_soon(inbound)
        group.start_soon(outbound)
        await server.run(read_recv, write_send, server.create_initialization_options())
        group.cancel_scope.cancel()
