"""The JSON-RPC connection over in-memory pipes: no process, the same code as over stdio."""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator
from typing import Any

import pytest

from baton.acp import jsonrpc
from baton.acp.connection import ConnectionClosed, JsonRpcConnection
from baton.acp.framing import FrameError
from baton.acp.jsonrpc import JsonRpcId, Request, RpcError
from baton.errors import (
    FrameHandlingError,
    LocalProtocolError,
    RemoteCallError,
    RemoteProtocolError,
)
from baton.testing import MemoryPipe


class Recorder:
    """An InboundHandler that keeps everything, in order."""

    def __init__(self) -> None:
        self.seen: list[Any] = []
        self.written: list[tuple[JsonRpcId, bool]] = []
        self.faults: list[FrameHandlingError] = []
        self.release = asyncio.Event()

    async def on_notification(self, method: str, params: Any) -> None:
        if method == "n/bug":
            raise KeyError("a bug in baton, on secret frame text")
        if method == "n/cancel":
            raise asyncio.CancelledError
        await asyncio.sleep(0)  # as the store does: a notification's handling yields
        self.seen.append(("notification", method, params))

    async def on_request(self, request: Request) -> Any:
        if request.method == "bug/admit":
            raise ValueError("admission failed")
        if request.method == "refuse":
            raise RpcError.invalid_params("no")
        await asyncio.sleep(0)
        self.seen.append(("request", request.method))
        if request.method == "slow":
            return self._slow()
        if request.method == "bug/answer":
            return self._fail()
        return self._echo(request.params)

    async def _slow(self) -> Any:
        await self.release.wait()
        self.seen.append(("answered", "slow"))
        return {"slow": True}

    async def _fail(self) -> Any:
        raise LookupError("answer failed")

    async def _echo(self, params: Any) -> Any:
        return {"echo": params}

    async def on_protocol_error(self, error: FrameError | jsonrpc.Invalid) -> None:
        self.seen.append(("protocol", getattr(error, "reason", getattr(error, "kind", None))))

    async def on_response_written(self, request_id: JsonRpcId, ok: bool) -> None:
        self.written.append((request_id, ok))

    async def on_run_end(self) -> None:
        pass

    async def on_batch_end(self) -> None:
        pass

    async def on_fault(self, error: FrameHandlingError) -> None:
        self.faults.append(error)


class Peer:
    """The agent's end: raw lines out, decoded messages in."""

    def __init__(self, to_client: MemoryPipe, from_client: MemoryPipe) -> None:
        self.to_client = to_client
        self.from_client = from_client
        self.buffer = b""

    async def send(self, message: Any) -> None:
        await self.raw(json.dumps(message).encode() + b"\n")

    async def raw(self, data: bytes) -> None:
        self.to_client.write(data)
        await self.to_client.drain()

    async def receive(self) -> dict[str, Any]:
        while b"\n" not in self.buffer:
            self.buffer += await self.from_client.read(65536)
        line, _, self.buffer = self.buffer.partition(b"\n")
        message: dict[str, Any] = json.loads(line)
        return message


@pytest.fixture
async def pair() -> AsyncIterator[tuple[JsonRpcConnection, Peer, Recorder]]:
    to_client, from_client = MemoryPipe(), MemoryPipe()
    handler = Recorder()
    conn = JsonRpcConnection(to_client, from_client, handler)
    reader = asyncio.create_task(conn.run())
    yield conn, Peer(to_client, from_client), handler
    to_client.close()
    await asyncio.wait_for(reader, 5)


async def test_requests_resolve_and_errors_come_back_typed(
    pair: tuple[JsonRpcConnection, Peer, Recorder],
) -> None:
    conn, peer, _ = pair
    ok = asyncio.create_task(conn.request("a/b", {"x": 1}))
    sent = await peer.receive()
    await peer.send({"jsonrpc": "2.0", "id": sent["id"], "result": {"fine": True}})
    assert await ok == {"fine": True}
    failing = asyncio.create_task(conn.request("c/d", {}))
    sent = await peer.receive()
    await peer.send({"jsonrpc": "2.0", "id": sent["id"], "error": {"code": -1, "message": "no"}})
    with pytest.raises(RemoteCallError) as info:
        await failing
    assert info.value.code == -1 and info.value.method == "c/d"


async def test_a_malformed_answer_fails_its_request_and_is_reported(
    pair: tuple[JsonRpcConnection, Peer, Recorder],
) -> None:
    conn, peer, handler = pair
    pending = asyncio.create_task(conn.request("a/b", {}))
    sent = await peer.receive()
    await peer.send({"jsonrpc": "2.0", "id": sent["id"], "error": {"code": "nope"}})
    with pytest.raises(RemoteProtocolError, match="a/b: the agent's answer is malformed"):
        await pending
    assert ("protocol", "error must be an object with an integer code") in handler.seen


async def test_an_error_for_an_unreadable_request_is_a_diagnostic_not_a_reply(
    pair: tuple[JsonRpcConnection, Peer, Recorder],
) -> None:
    conn, peer, handler = pair
    pending = asyncio.create_task(conn.request("a/b", {}))
    sent = await peer.receive()
    await peer.send({"jsonrpc": "2.0", "id": None, "error": {"code": -32700, "message": "parse"}})
    await peer.send({"jsonrpc": "2.0", "id": sent["id"], "result": 1})
    assert await pending == 1, "the pending request is not touched by an id-less error"
    assert any(kind == "protocol" and "could not read" in str(r) for kind, r in handler.seen[:1])


async def test_inbound_order_and_answers_that_never_block_the_stream(
    pair: tuple[JsonRpcConnection, Peer, Recorder],
) -> None:
    _, peer, handler = pair
    await peer.raw(
        b"".join(
            json.dumps(m).encode() + b"\n"
            for m in (
                {"jsonrpc": "2.0", "id": 1, "method": "slow"},
                {"jsonrpc": "2.0", "method": "n/one", "params": 1},
                {"jsonrpc": "2.0", "id": 2, "method": "refuse"},
                {"jsonrpc": "2.0", "id": 3, "method": "echo", "params": 3},
                {"jsonrpc": "2.0", "method": "n/two", "params": 2},
            )
        )
    )  # one read: the admissions must still run in arrival order
    refused = await peer.receive()
    assert refused["id"] == 2 and refused["error"]["code"] == jsonrpc.INVALID_PARAMS
    assert (await peer.receive()) == {"jsonrpc": "2.0", "id": 3, "result": {"echo": 3}}
    assert handler.seen == [
        ("request", "slow"),
        ("notification", "n/one", 1),
        ("request", "echo"),
        ("notification", "n/two", 2),
    ], "requests are admitted in arrival order; a waiting one does not hold the stream"
    handler.release.set()
    assert (await peer.receive()) == {"jsonrpc": "2.0", "id": 1, "result": {"slow": True}}
    assert handler.written == [(3, True), (1, True)], "delivery is reported after the write"


async def test_a_fault_handling_one_frame_is_that_frames_error_and_the_reader_goes_on(
    pair: tuple[JsonRpcConnection, Peer, Recorder],
) -> None:
    """Was: the exception escaped run(), whose finally failed every pending request with
    'agent closed its stdout' (untrue), and nothing after that frame was read."""
    conn, peer, handler = pair
    pending = asyncio.create_task(conn.request("a/b", {}))
    sent = await peer.receive()
    await peer.send({"jsonrpc": "2.0", "method": "n/bug", "params": {"token": "hunter2"}})
    await peer.send({"jsonrpc": "2.0", "id": 7, "method": "bug/admit"})
    await peer.send({"jsonrpc": "2.0", "id": 8, "method": "bug/answer"})
    await peer.send({"jsonrpc": "2.0", "method": "n/after", "params": 1})
    for rid in (7, 8):
        answer = await peer.receive()
        assert answer["id"] == rid and answer["error"]["code"] == jsonrpc.INTERNAL_ERROR
        assert "admission failed" not in answer["error"]["message"]
    await peer.send({"jsonrpc": "2.0", "id": sent["id"], "result": "still here"})
    assert await pending == "still here", "a pending request of ours survives the fault"
    assert ("notification", "n/after", 1) in handler.seen
    assert not conn.closed
    assert [(f.method, f.frame) for f in handler.faults] == [
        ("n/bug", 1),
        ("bug/admit", 2),
        ("bug/answer", 3),
    ]
    for fault in handler.faults:
        assert isinstance(fault, LocalProtocolError)
        assert "hunter2" not in str(fault) and "secret" not in str(fault)
    assert isinstance(handler.faults[0].cause, KeyError)
    assert conn.frames_in == 5 and conn.bytes_in > 0


async def test_cancellation_inside_a_handler_still_stops_the_reader() -> None:
    to_client, from_client = MemoryPipe(), MemoryPipe()
    handler = Recorder()
    conn = JsonRpcConnection(to_client, from_client, handler)
    reader = asyncio.create_task(conn.run())
    Peer(to_client, from_client).to_client.write(b'{"jsonrpc":"2.0","method":"n/cancel"}\n')
    with pytest.raises(asyncio.CancelledError):
        await asyncio.wait_for(reader, 5)
    assert handler.faults == [] and conn.closed


async def test_an_invalid_request_is_answered_and_a_bad_line_reported(
    pair: tuple[JsonRpcConnection, Peer, Recorder],
) -> None:
    _, peer, handler = pair
    await peer.send({"jsonrpc": "2.0", "id": 9, "method": ""})
    answer = await peer.receive()
    assert answer["id"] == 9 and answer["error"]["code"] == jsonrpc.INVALID_REQUEST
    await peer.raw(b"{not json\n")
    await peer.send({"jsonrpc": "2.0", "id": 10, "method": ""})
    await peer.receive()
    kinds = [seen[1] for seen in handler.seen if seen[0] == "protocol"]
    assert kinds == ["method must be a non-empty string", "invalid_json", kinds[0]]


async def test_eof_fails_what_is_pending() -> None:
    to_client, from_client = MemoryPipe(), MemoryPipe()
    conn = JsonRpcConnection(to_client, from_client, Recorder())
    reader = asyncio.create_task(conn.run())
    pending = asyncio.create_task(conn.request("a/b", {}))
    await asyncio.sleep(0)
    to_client.close()
    with pytest.raises(ConnectionClosed):
        await pending
    await asyncio.wait_for(reader, 5)
    assert conn.closed


class RunRecorder(Recorder):
    """A Recorder that also sees where each run of notifications and each read end."""

    async def on_run_end(self) -> None:
        self.seen.append(("run_end",))

    async def on_batch_end(self) -> None:
        self.seen.append(("batch_end",))


async def test_a_run_of_notifications_ends_before_the_next_request_response_or_bad_frame() -> None:
    """A handler may defer what notifications emit until ``on_run_end`` or
    ``on_batch_end``; the connection ends the run before anything else in the same
    read, so arrival order holds."""
    to_client, from_client = MemoryPipe(), MemoryPipe()
    handler = RunRecorder()
    conn = JsonRpcConnection(to_client, from_client, handler)
    reader = asyncio.create_task(conn.run())
    peer = Peer(to_client, from_client)
    pending = asyncio.create_task(conn.request("a/b", {}))
    sent = await peer.receive()
    lines = [
        {"jsonrpc": "2.0", "method": "n/one", "params": 1},
        {"jsonrpc": "2.0", "method": "n/two", "params": 2},
        {"jsonrpc": "2.0", "id": 4, "method": "echo", "params": 4},
        {"jsonrpc": "2.0", "id": 5, "method": "echo", "params": 5},
        {"jsonrpc": "2.0", "method": "n/three", "params": 3},
        {"jsonrpc": "2.0", "id": sent["id"], "result": "answered"},
        {"jsonrpc": "2.0", "method": "n/four", "params": 4},
    ]
    data = b"".join(json.dumps(m).encode() + b"\n" for m in lines)
    await peer.raw(data + b"{not json\n")  # one read
    assert await pending == "answered"
    for _ in range(2):
        await peer.receive()
    to_client.close()
    await asyncio.wait_for(reader, 5)
    assert handler.seen[:9] == [
        ("notification", "n/one", 1),
        ("notification", "n/two", 2),
        ("run_end",),
        ("request", "echo"),
        ("request", "echo"),  # no run between two requests: nothing to end
        ("notification", "n/three", 3),
        ("run_end",),  # before the response is resolved
        ("notification", "n/four", 4),
        ("run_end",),  # before the bad frame is reported
    ]
    assert handler.seen[9][0] == "protocol"
    assert handler.seen[10:] == [("batch_end",)], "and once at the end of the read"


async def test_a_fault_ending_a_run_is_reported_for_its_last_frame() -> None:
    class FailingRunEnd(RunRecorder):
        async def on_run_end(self) -> None:
            raise OSError("emitting the run failed")

    to_client, from_client = MemoryPipe(), MemoryPipe()
    handler = FailingRunEnd()
    conn = JsonRpcConnection(to_client, from_client, handler)
    reader = asyncio.create_task(conn.run())
    peer = Peer(to_client, from_client)
    lines = [
        {"jsonrpc": "2.0", "method": "n/one", "params": 1},
        {"jsonrpc": "2.0", "method": "n/two", "params": 2},
        {"jsonrpc": "2.0", "id": 4, "method": "echo", "params": 4},
    ]
    await peer.raw(b"".join(json.dumps(m).encode() + b"\n" for m in lines))
    assert (await peer.receive())["result"] == {"echo": 4}, "the request after it is handled"
    to_client.close()
    await asyncio.wait_for(reader, 5)
    assert [(f.method, f.frame) for f in handler.faults] == [("n/two", 2)]
    assert isinstance(handler.faults[0].cause, OSError)
