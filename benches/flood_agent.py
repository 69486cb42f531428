"""The flood agent every ingest consumer reads: a minimal ACP agent on stdio.

``python -m benches.flood_agent --kind message|mixed --count N``. It answers
``initialize`` and ``session/new``; a ``session/prompt`` gets ``N``
``session/update`` notifications, written in multi-megabyte batches, then
``end_turn``. ``message`` sends ``agent_message_chunk`` only (one message, so a
client may coalesce it); ``mixed`` alternates the chunk with a
``tool_call_update`` (after one ``tool_call``), so nothing coalesces. Each
update is ~40 bytes of text in a ~230-byte line, the same for every consumer.
Other requests get ``-32601``; notifications are ignored; EOF ends it.
"""

from __future__ import annotations

import argparse
import json
import sys

KINDS = ("message", "mixed")
_BATCH = 16384


def _line(message: dict[str, object]) -> bytes:
    return json.dumps(message, separators=(",", ":")).encode() + b"\n"


def _templates(session: str) -> tuple[bytes, bytes]:
    sid = json.dumps(session)
    chunk = (
        '{"jsonrpc":"2.0","method":"session/update","params":{"sessionId":' + sid + ","
        '"update":{"sessionUpdate":"agent_message_chunk","messageId":"flood-msg",'
        '"content":{"type":"text","text":"flood chunk %07d of the benchmark load."}}}}\n'
    ).encode()
    tool = (
        '{"jsonrpc":"2.0","method":"session/update","params":{"sessionId":' + sid + ","
        '"update":{"sessionUpdate":"tool_call_update","toolCallId":"t1",'
        '"status":"in_progress","content":[{"type":"content","content":{"type":"text",'
        '"text":"flood output %07d of the benchmark load"}}]}}}\n'
    ).encode()
    return chunk, tool


def _flood(session: str, kind: str, count: int) -> None:
    write = sys.stdout.buffer.write
    chunk, tool = _templates(session)
    if kind == "mixed":
        update = {"sessionUpdate": "tool_call", "toolCallId": "t1", "title": "flood tool"}
        update |= {"kind": "other", "status": "in_progress"}
        params = {"sessionId": session, "update": update}
        write(_line({"jsonrpc": "2.0", "method": "session/update", "params": params}))
    for start in range(0, count, _BATCH):
        stop = min(count, start + _BATCH)
        if kind == "mixed":
            write(b"".join([(tool if i & 1 else chunk) % i for i in range(start, stop)]))
        else:
            write(b"".join([chunk % i for i in range(start, stop)]))
    sys.stdout.buffer.flush()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--kind", choices=KINDS, default="mixed")
    parser.add_argument("--count", type=int, default=200_000)
    args = parser.parse_args()
    out = sys.stdout.buffer
    session = "flood-session-1"
    for raw in sys.stdin.buffer:
        try:
            message = json.loads(raw)
        except ValueError:
            continue
        method, ident = message.get("method"), message.get("id")
        if ident is None or method is None:
            continue  # notifications (session/cancel) and replies
        if method == "initialize":
            result: object = {
                "protocolVersion": 1,
                "agentCapabilities": {"loadSession": False},
                "authMethods": [],
                "agentInfo": {"name": "baton-bench-flood", "version": "0"},
            }
        elif method == "session/new":
            result = {"sessionId": session}
        elif method == "session/prompt":
            _flood(session, args.kind, args.count)
            result = {"stopReason": "end_turn"}
        else:
            error = {"code": -32601, "message": f"method not found: {method}"}
            out.write(_line({"jsonrpc": "2.0", "id": ident, "error": error}))
            out.flush()
            continue
        out.write(_line({"jsonrpc": "2.0", "id": ident, "result": result}))
        out.flush()


if __name__ == "__main__":
    main()
