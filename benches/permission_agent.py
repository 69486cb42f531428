"""A minimal ACP agent for the answer round-trip benchmark (stdlib only).

On ``session/prompt`` it asks ``session/request_permission`` ``--count`` times, one
after the other, and for each reply writes ``reply <n> <monotonic_ns>`` to stderr
the moment the reply line is read from stdin.
"""

from __future__ import annotations

import argparse
import json
import sys
import time


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--count", type=int, default=100)
    args = parser.parse_args()
    out = sys.stdout.buffer
    inp = sys.stdin.buffer

    def send(msg: dict[str, object]) -> None:
        out.write(json.dumps(msg).encode() + b"\n")
        out.flush()

    def read() -> dict[str, object]:
        line = inp.readline()
        if not line:
            sys.exit(0)
        return json.loads(line)  # type: ignore[no-any-return]

    while True:
        msg = read()
        method = msg.get("method")
        if method == "initialize":
            send(
                {
                    "jsonrpc": "2.0",
                    "id": msg["id"],
                    "result": {"protocolVersion": 1, "agentCapabilities": {}, "authMethods": []},
                }
            )
        elif method == "session/new":
            send({"jsonrpc": "2.0", "id": msg["id"], "result": {"sessionId": "bench"}})
        elif method == "session/prompt":
            for n in range(args.count):
                call_id = f"t{n}"
                send(
                    {
                        "jsonrpc": "2.0",
                        "method": "session/update",
                        "params": {
                            "sessionId": "bench",
                            "update": {
                                "sessionUpdate": "tool_call",
                                "toolCallId": call_id,
                                "title": f"step {n}",
                                "kind": "execute",
                                "status": "pending",
                            },
                        },
                    }
                )
                send(
                    {
                        "jsonrpc": "2.0",
                        "id": 1000 + n,
                        "method": "session/request_permission",
                        "params": {
                            "sessionId": "bench",
                            "toolCall": {
                                "toolCallId": call_id,
                                "title": f"step {n}",
                                "kind": "execute",
                                "rawInput": {"command": "true"},
                            },
                            "options": [
                                {"optionId": "allow", "name": "Allow", "kind": "allow_once"},
                                {"optionId": "reject", "name": "Reject", "kind": "reject_once"},
                            ],
                        },
                    }
                )
                while True:
                    reply = read()
                    if reply.get("id") == 1000 + n:
                        sys.stderr.write(f"reply {n} {time.monotonic_ns()}\n")
                        sys.stderr.flush()
                        break
            send({"jsonrpc": "2.0", "id": msg["id"], "result": {"stopReason": "end_turn"}})


if __name__ == "__main__":
    main()
