"""Recorded NDJSON wire traces, played back as the agent's side, sans-I/O.

A trace is one ``{"dir": "client"|"agent", "msg": <JSON-RPC message>}`` per line (what
``tests/support/rawclient.py`` records, and what a :class:`~baton.acp.connection.FrameObserver`
sees). :class:`TraceReplay` answers a live client with the trace's agent messages: the fake
agent's ``replay`` scenario runs it in a process, :func:`baton.testing.replay` in memory.
"""

from __future__ import annotations

import json
from typing import Any

from baton.testing.scenarios import dumps

__all__ = ["TraceReplay"]

Message = dict[str, Any]


def _error(rid: Any, code: int, message: str) -> Message:
    return {"jsonrpc": "2.0", "id": rid, "error": {"code": code, "message": message}}


class TraceReplay:
    """Replays a recorded trace against a live client (scenario ``replay``), sans-I/O.

    :meth:`start` and :meth:`incoming` return the bytes to write, in order.
    """

    def __init__(self, records: list[Message]) -> None:
        for rec in records:
            if rec.get("dir") not in ("client", "agent") or not isinstance(rec.get("msg"), dict):
                raise ValueError(f"bad trace record {json.dumps(rec)[:200]!r}")
        self.records = records
        self.pos = 0  # the next record not yet sent (agent) or matched (client)
        self.consumed: set[int] = set()  # client records matched ahead of ``pos``
        self.id_map: dict[str, Any] = {}  # json of trace request id -> live id
        self.replacements: list[tuple[str, str]] = []

    @classmethod
    def from_ndjson(cls, text: str) -> TraceReplay:
        return cls([json.loads(line) for line in text.splitlines() if line.strip()])

    def start(self) -> list[bytes]:
        return self._advance()

    def _advance(self) -> list[bytes]:
        """Agent records up to the next client record that has not arrived yet."""
        out: list[bytes] = []
        while self.pos < len(self.records):
            rec = self.records[self.pos]
            if rec["dir"] == "client":
                if self.pos not in self.consumed:
                    break
                self.pos += 1
                continue
            self.pos += 1
            msg = rec["msg"]
            if "method" not in msg and "id" in msg:
                key = json.dumps(msg["id"])
                if key in self.id_map:
                    msg = {**msg, "id": self.id_map[key]}
            data = dumps(msg)
            if self.replacements:
                text = data.decode()
                for old, new in self.replacements:
                    text = text.replace(old, new)
                data = text.encode()
            out.append(data)
        return out

    def _find(self, live: Message) -> int | None:
        """The trace record the live client message stands for, if any.

        Requests are causal steps: a live request matches only the first pending client
        request of the trace. Replies and notifications may come earlier than recorded (say a
        permission reply before a cancel), so they match the first pending record like them.
        """
        is_request = "method" in live and "id" in live
        for i in range(self.pos, len(self.records)):
            rec = self.records[i]
            if rec["dir"] != "client" or i in self.consumed:
                continue
            expected = rec["msg"]
            if is_request:
                if "method" in expected and "id" in expected:
                    return i if expected["method"] == live["method"] else None
            elif "method" in live:
                if "id" not in expected and expected.get("method") == live["method"]:
                    return i
            elif "method" not in expected and expected.get("id") == live.get("id"):
                return i
        return None

    def incoming(self, live: Message) -> list[bytes]:
        index = self._find(live)
        if index is None:
            if "method" in live and "id" in live:
                message = f"replay: unexpected {live['method']} at record {self.pos}"
                return [dumps(_error(live["id"], -32601, message))]
            return []
        self.consumed.add(index)
        expected = self.records[index]["msg"]
        if "method" in expected and "id" in expected:
            self.id_map[json.dumps(expected["id"])] = live["id"]
        self._learn_cwd(expected, live)
        return self._advance()

    def _learn_cwd(self, expected: Message, live: Message) -> None:
        old = (expected.get("params") or {}).get("cwd")
        live_params = live.get("params")
        new = live_params.get("cwd") if isinstance(live_params, dict) else None
        if isinstance(old, str) and isinstance(new, str) and old and old != new:
            pair = (json.dumps(old)[1:-1], json.dumps(new)[1:-1])
            if pair not in self.replacements:
                self.replacements.append(pair)
                self.replacements.sort(key=lambda p: len(p[0]), reverse=True)
