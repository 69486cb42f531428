"""A minimal raw JSON-RPC 2.0 / ACP client over a subprocess's stdio, for tests.

It deliberately knows nothing about ACP beyond the framing (one JSON object per ``\\n``-terminated
line), so tests can see exactly what an agent puts on the wire, including garbage:

* stdout is read in large chunks and split on ``\\n`` by hand (no ``readline`` limits), so a
  60 MB line is just a long line;
* lines that are not UTF-8 JSON objects carrying ``"jsonrpc": "2.0"`` are kept, raw, in
  :attr:`RawClient.bad_lines`;
* stderr is always drained (kept up to ``stderr_limit`` bytes, counted beyond that);
* agent -> client requests are answered through an async ``handler(method, params)`` callback
  (raise :class:`RpcError` to answer an error; the default answers -32601);
* every message in and out can be recorded as ``{"dir": "client"|"agent", "msg": ...}`` lines
  (:attr:`RawClient.trace`), the format of ``tests/traces``.

Waiting is event-driven: :meth:`RawClient.wait_for` registers a predicate that is checked as each
message arrives, and raises :class:`AgentExited` when stdout closes first.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import re
import signal
from collections.abc import Awaitable, Callable, Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

__all__ = [
    "AgentExited",
    "Handler",
    "Message",
    "RawClient",
    "RpcError",
    "default_handler",
    "normalize_trace",
    "write_trace",
]

Message = dict[str, Any]
Handler = Callable[[str, Any], Awaitable[Any]]


class RpcError(Exception):
    """A JSON-RPC error: raised by :meth:`RawClient.request`, or by a handler to answer one."""

    def __init__(self, code: int, message: str, data: Any = None) -> None:
        super().__init__(f"{code}: {message}")
        self.code = code
        self.message = message
        self.data = data

    def to_json(self) -> Message:
        err: Message = {"code": self.code, "message": self.message}
        if self.data is not None:
            err["data"] = self.data
        return err


class AgentExited(Exception):
    """The agent closed its stdout (exited) before what we waited for arrived."""


async def default_handler(method: str, params: Any) -> Any:
    raise RpcError(-32601, f"Method not found: {method}")


class RawClient:
    """Drive one agent subprocess. Use :meth:`spawn`, preferably as ``async with``."""

    def __init__(
        self,
        proc: asyncio.subprocess.Process,
        *,
        handler: Handler = default_handler,
        record: bool = False,
        chunk_size: int = 1 << 20,
        stderr_limit: int = 8 << 20,
        first_id: int = 0,
    ) -> None:
        self.proc = proc
        self.handler = handler
        self.record = record
        self.chunk_size = chunk_size
        self.stderr_limit = stderr_limit
        #: Every well-formed JSON-RPC message the agent sent, in arrival order.
        self.messages: list[Message] = []
        #: Raw lines (without the newline) that were not UTF-8 JSON-RPC objects.
        self.bad_lines: list[bytes] = []
        #: ``{"dir": ..., "msg": ...}`` records of everything sent and received (if ``record``).
        self.trace: list[Message] = []
        #: Replies we sent to agent -> client requests, as ``(method, params, reply message)``.
        self.answered: list[tuple[str, Any, Message]] = []
        self.stderr = bytearray()
        self.stderr_total = 0
        self.stdout_total = 0
        self._next_id = first_id
        self._pending: dict[int | str, asyncio.Future[Message]] = {}
        self._waiters: list[tuple[Callable[[Message], bool], asyncio.Future[Message]]] = []
        self._stderr_waiters: list[tuple[bytes, asyncio.Future[None]]] = []
        self._eof = asyncio.Event()
        self._answered_cond = asyncio.Condition()
        self._tasks: set[asyncio.Task[Any]] = set()
        self._reader = asyncio.create_task(self._read_stdout())
        self._stderr_reader = asyncio.create_task(self._read_stderr())

    # -- lifecycle ---------------------------------------------------------------------------

    @classmethod
    async def spawn(
        cls,
        argv: Sequence[str],
        *,
        env: Mapping[str, str] | None = None,
        cwd: str | os.PathLike[str] | None = None,
        handler: Handler = default_handler,
        record: bool = False,
        chunk_size: int = 1 << 20,
        stderr_limit: int = 8 << 20,
        first_id: int = 0,
    ) -> RawClient:
        """Start ``argv`` in its own session (process group) with piped stdio."""
        proc = await asyncio.create_subprocess_exec(
            *argv,
            stdin=asyncio.subprocess.PIPE,
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.PIPE,
            env=dict(env) if env is not None else None,
            cwd=cwd,
            start_new_session=True,
        )
        return cls(
            proc,
            handler=handler,
            record=record,
            chunk_size=chunk_size,
            stderr_limit=stderr_limit,
            first_id=first_id,
        )

    async def __aenter__(self) -> RawClient:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()

    @property
    def pid(self) -> int:
        return self.proc.pid

    @property
    def returncode(self) -> int | None:
        return self.proc.returncode

    async def close_stdin(self) -> None:
        stdin = self.proc.stdin
        if stdin is not None and not stdin.is_closing():
            stdin.close()
            with contextlib.suppress(Exception):
                await stdin.wait_closed()

    async def wait_exit(self, timeout: float = 10.0) -> int:
        """Wait for the process to exit and its stdout to close; return the exit code.

        Note: asyncio's ``Process.wait()`` (3.11) only returns once *all* the child's pipes are
        closed, so it also waits for any grandchild that inherited them.
        """
        async with asyncio.timeout(timeout):
            code = await self.proc.wait()
            await self._eof.wait()
        return code

    @property
    def stdout_closed(self) -> bool:
        return self._eof.is_set()

    async def wait_stdout_closed(self, timeout: float = 10.0) -> None:
        """Wait for EOF on the agent's stdout (every holder of the pipe, grandchildren too)."""
        async with asyncio.timeout(timeout):
            await self._eof.wait()

    def kill_group(self, sig: int = signal.SIGKILL) -> None:
        """Signal the agent's whole process group (it was started in its own session)."""
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(self.proc.pid, sig)

    async def close(self, *, grace: float = 2.0) -> int:
        """Close stdin, give the agent ``grace`` seconds, then SIGTERM, then SIGKILL the group.

        The group is SIGKILLed at the end in any case, so grandchildren never outlive a test.
        """
        await self.close_stdin()
        code: int | None = None
        for sig in (None, signal.SIGTERM, signal.SIGKILL):
            if sig is not None:
                self.kill_group(sig)
            try:
                async with asyncio.timeout(grace):
                    code = await self.proc.wait()
                break
            except TimeoutError:
                continue
        self.kill_group(signal.SIGKILL)
        if code is None:
            code = await self.proc.wait()
        with contextlib.suppress(TimeoutError):
            async with asyncio.timeout(grace):
                await asyncio.gather(self._reader, self._stderr_reader, return_exceptions=True)
        for task in (self._reader, self._stderr_reader, *self._tasks):
            task.cancel()
        return code

    # -- sending -----------------------------------------------------------------------------

    def _write(self, msg: Message) -> None:
        if self.record:
            self.trace.append({"dir": "client", "msg": msg})
        self.write_bytes(json.dumps(msg, separators=(",", ":")).encode() + b"\n")

    def write_bytes(self, data: bytes) -> None:
        """Write raw bytes to the agent's stdin (not recorded)."""
        stdin = self.proc.stdin
        if stdin is None or stdin.is_closing():
            raise AgentExited("stdin is closed")
        stdin.write(data)

    async def drain(self) -> None:
        stdin = self.proc.stdin
        if stdin is not None:
            with contextlib.suppress(ConnectionError):
                await stdin.drain()

    def start_request(self, method: str, params: Any = None) -> asyncio.Future[Message]:
        """Send a request; return a future of the whole response message (result or error)."""
        rid = self._next_id
        self._next_id += 1
        fut: asyncio.Future[Message] = asyncio.get_running_loop().create_future()
        self._pending[rid] = fut
        msg: Message = {"jsonrpc": "2.0", "id": rid, "method": method}
        if params is not None:
            msg["params"] = params
        if self._eof.is_set():
            fut.set_exception(AgentExited(f"agent gone before {method}"))
            return fut
        self._write(msg)
        return fut

    async def request(self, method: str, params: Any = None, *, timeout: float = 10.0) -> Any:
        """Send a request and return its ``result``; raise :class:`RpcError` on an error reply."""
        fut = self.start_request(method, params)
        await self.drain()
        async with asyncio.timeout(timeout):
            reply = await fut
        if "error" in reply:
            err = reply["error"] or {}
            raise RpcError(int(err.get("code", 0)), str(err.get("message", "")), err.get("data"))
        return reply.get("result")

    async def notify(self, method: str, params: Any = None) -> None:
        msg: Message = {"jsonrpc": "2.0", "method": method}
        if params is not None:
            msg["params"] = params
        self._write(msg)
        await self.drain()

    # -- ACP conveniences --------------------------------------------------------------------

    async def initialize(self, *, timeout: float = 10.0, **capabilities: Any) -> Any:
        client_caps: Message = {"fs": {"readTextFile": True, "writeTextFile": True}}
        client_caps.update(capabilities)
        params = {
            "protocolVersion": 1,
            "clientCapabilities": client_caps,
            "clientInfo": {"name": "baton-rawclient", "version": "0"},
        }
        return await self.request("initialize", params, timeout=timeout)

    async def new_session(self, cwd: str | os.PathLike[str], *, timeout: float = 10.0) -> Any:
        params = {"cwd": str(cwd), "mcpServers": []}
        return await self.request("session/new", params, timeout=timeout)

    def start_prompt(self, session_id: str, text: str) -> asyncio.Future[Message]:
        return self.start_request(
            "session/prompt",
            {"sessionId": session_id, "prompt": [{"type": "text", "text": text}]},
        )

    async def prompt(self, session_id: str, text: str, *, timeout: float = 10.0) -> Any:
        params = {"sessionId": session_id, "prompt": [{"type": "text", "text": text}]}
        return await self.request("session/prompt", params, timeout=timeout)

    async def cancel(self, session_id: str) -> None:
        await self.notify("session/cancel", {"sessionId": session_id})

    # -- inspecting --------------------------------------------------------------------------

    def notifications(self, method: str | None = None) -> list[Message]:
        return [
            m
            for m in self.messages
            if "method" in m and "id" not in m and (method is None or m["method"] == method)
        ]

    def requests(self, method: str | None = None) -> list[Message]:
        """Agent -> client requests received so far."""
        return [
            m
            for m in self.messages
            if "method" in m and "id" in m and (method is None or m["method"] == method)
        ]

    def updates(self, session_id: str | None = None) -> list[Message]:
        """The ``update`` objects of all ``session/update`` notifications, in order."""
        return [
            m["params"]["update"]
            for m in self.notifications("session/update")
            if session_id is None or m["params"].get("sessionId") == session_id
        ]

    def update_kinds(self, session_id: str | None = None) -> list[str]:
        return [u.get("sessionUpdate", "?") for u in self.updates(session_id)]

    def stderr_text(self) -> str:
        return self.stderr.decode("utf-8", "replace")

    async def wait_for(
        self, predicate: Callable[[Message], bool], *, timeout: float = 10.0, start: int = 0
    ) -> Message:
        """Return the first message (at index >= ``start``) for which ``predicate`` holds."""
        for msg in self.messages[start:]:
            if predicate(msg):
                return msg
        if self._eof.is_set():
            raise AgentExited("agent closed stdout before the awaited message")
        fut: asyncio.Future[Message] = asyncio.get_running_loop().create_future()
        entry = (predicate, fut)
        self._waiters.append(entry)
        try:
            async with asyncio.timeout(timeout):
                return await fut
        finally:
            with contextlib.suppress(ValueError):
                self._waiters.remove(entry)

    async def wait_for_update(self, kind: str, *, timeout: float = 10.0, start: int = 0) -> Message:
        """Wait for a ``session/update`` whose ``sessionUpdate`` is ``kind``; return the update."""
        msg = await self.wait_for(
            lambda m: (
                m.get("method") == "session/update"
                and m.get("params", {}).get("update", {}).get("sessionUpdate") == kind
            ),
            timeout=timeout,
            start=start,
        )
        update: Message = msg["params"]["update"]
        return update

    async def wait_for_request(self, method: str, *, timeout: float = 10.0) -> Message:
        return await self.wait_for(
            lambda m: m.get("method") == method and "id" in m, timeout=timeout
        )

    async def wait_answered(self, count: int, *, timeout: float = 10.0) -> None:
        """Wait until ``count`` agent -> client requests have been answered (replies written)."""
        async with asyncio.timeout(timeout), self._answered_cond:
            await self._answered_cond.wait_for(lambda: len(self.answered) >= count)

    async def wait_stderr(self, needle: bytes | str, *, timeout: float = 10.0) -> None:
        """Wait until ``needle`` appears in the kept stderr."""
        data = needle.encode() if isinstance(needle, str) else needle
        if data in self.stderr:
            return
        fut: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        entry = (data, fut)
        self._stderr_waiters.append(entry)
        try:
            async with asyncio.timeout(timeout):
                await fut
        finally:
            with contextlib.suppress(ValueError):
                self._stderr_waiters.remove(entry)

    # -- reading -----------------------------------------------------------------------------

    async def _read_stdout(self) -> None:
        stdout = self.proc.stdout
        assert stdout is not None
        buf = bytearray()
        scan = 0
        try:
            while chunk := await stdout.read(self.chunk_size):
                self.stdout_total += len(chunk)
                buf += chunk
                start = 0
                while (nl := buf.find(b"\n", scan)) >= 0:
                    self._on_line(bytes(buf[start:nl]))
                    start = scan = nl + 1
                if start:
                    del buf[:start]
                scan = len(buf)
            if buf.strip():
                self._on_line(bytes(buf))
        finally:
            self._eof.set()
            exc = AgentExited("agent closed stdout")
            for fut in self._pending.values():
                if not fut.done():
                    fut.set_exception(exc)
            for _, fut in self._waiters:
                if not fut.done():
                    fut.set_exception(exc)

    async def _read_stderr(self) -> None:
        stderr = self.proc.stderr
        assert stderr is not None
        while chunk := await stderr.read(self.chunk_size):
            self.stderr_total += len(chunk)
            room = self.stderr_limit - len(self.stderr)
            if room > 0:
                self.stderr += chunk[:room]
            for needle, fut in self._stderr_waiters:
                if not fut.done() and needle in self.stderr:
                    fut.set_result(None)

    def _on_line(self, line: bytes) -> None:
        if not line.strip():
            return
        try:
            msg = json.loads(line)
        except ValueError:  # includes UnicodeDecodeError
            self.bad_lines.append(line)
            return
        if not isinstance(msg, dict) or msg.get("jsonrpc") != "2.0":
            self.bad_lines.append(line)
            return
        if self.record:
            self.trace.append({"dir": "agent", "msg": msg})
        self.messages.append(msg)
        if "method" in msg:
            if "id" in msg:
                task = asyncio.create_task(self._answer(msg))
                self._tasks.add(task)
                task.add_done_callback(self._tasks.discard)
        elif "id" in msg:
            fut = self._pending.pop(msg["id"], None)
            if fut is not None and not fut.done():
                fut.set_result(msg)
        for predicate, waiter in list(self._waiters):
            if not waiter.done() and predicate(msg):
                waiter.set_result(msg)

    async def _answer(self, msg: Message) -> None:
        reply: Message = {"jsonrpc": "2.0", "id": msg["id"]}
        try:
            reply["result"] = await self.handler(msg["method"], msg.get("params"))
        except RpcError as err:
            reply["error"] = err.to_json()
        except Exception as err:  # a buggy handler must not leave the agent waiting forever
            reply["error"] = {"code": -32603, "message": f"client handler failed: {err!r}"}
        try:
            if not self._eof.is_set():
                with contextlib.suppress(AgentExited, ConnectionError):
                    self._write(reply)
                    await self.drain()
        finally:
            async with self._answered_cond:
                self.answered.append((msg["method"], msg.get("params"), reply))
                self._answered_cond.notify_all()


# -- traces ------------------------------------------------------------------------------------

_ID_RE = re.compile(r"\b(ses|msg|prt|per|call|tool|toolu|que|perm)_[A-Za-z0-9]{6,}\b")


def normalize_trace(
    records: Iterable[Message],
    replacements: Mapping[str, str],
    *,
    stable_ids: bool = True,
) -> list[str]:
    """Serialize trace records to NDJSON lines with private details made reproducible.

    ``replacements`` maps literal strings (temporary paths, the stub's port) to placeholders;
    longer keys are applied first. With ``stable_ids``, generated identifiers such as OpenCode's
    ``ses_…``/``msg_…``/``prt_…`` are renumbered in order of first appearance
    (``ses_0001``, …) and ISO timestamps / epoch-millisecond fields become fixed values.
    """
    ordered = sorted(replacements.items(), key=lambda kv: len(kv[0]), reverse=True)
    ids: dict[str, str] = {}
    counters: dict[str, int] = {}

    def renumber(m: re.Match[str]) -> str:
        tok = m.group(0)
        if tok not in ids:
            prefix = m.group(1)
            counters[prefix] = counters.get(prefix, 0) + 1
            ids[tok] = f"{prefix}_{counters[prefix]:04d}"
        return ids[tok]

    lines = []
    for rec in records:
        text = json.dumps(rec, separators=(",", ":"), ensure_ascii=False)
        for old, new in ordered:
            # Paths appear verbatim in JSON strings (no escaping for '/'), so replace as text.
            text = text.replace(old, new)
        if stable_ids:
            text = _ID_RE.sub(renumber, text)
            text = re.sub(
                r'"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(\.\d+)?Z"', '"2000-01-01T00:00:00Z"', text
            )
            text = re.sub(
                r'"(updatedAt|createdAt|time|created|completed|start|end)":\d{12,}',
                r'"\1":946684800000',
                text,
            )
        lines.append(text)
    return lines


def write_trace(
    path: str | os.PathLike[str],
    records: Iterable[Message],
    replacements: Mapping[str, str],
    *,
    stable_ids: bool = True,
) -> Path:
    """Write :func:`normalize_trace` output to ``path`` (parents created)."""
    out = Path(path)
    out.parent.mkdir(parents=True, exist_ok=True)
    lines = normalize_trace(records, replacements, stable_ids=stable_ids)
    out.write_text("".join(line + "\n" for line in lines), encoding="utf-8")
    return out
