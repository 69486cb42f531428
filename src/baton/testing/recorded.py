"""The replay transport: a recorded NDJSON wire trace plays the agent, in memory.

``AgentSession.open(profile, ..., transport=replay("trace.ndjson"))`` answers the
session with the trace's agent messages (see :class:`~baton.testing.trace.TraceReplay`
for how live messages are matched, ids rewritten and the recorded ``cwd`` replaced).
Record a trace with a :data:`~baton.acp.connection.FrameObserver` or
``tests/support/rawclient.py``; replay it in a test to pin how baton handles what a
real agent once sent, without the agent.
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterable
from pathlib import Path

from baton.acp.transport import TransportFactory
from baton.jsontypes import JsonMapping, JsonObject
from baton.testing.memory import AgentEnd, in_memory
from baton.testing.trace import TraceReplay

__all__ = ["ReplayAgent", "load_trace", "replay"]


def load_trace(path: str | os.PathLike[str]) -> list[JsonObject]:
    """The records of an NDJSON trace file."""
    text = Path(path).read_text(encoding="utf-8")
    return [json.loads(line) for line in text.splitlines() if line.strip()]


class ReplayAgent:
    """An in-memory agent that is a trace."""

    def __init__(self, records: Iterable[JsonMapping]) -> None:
        self.records = [dict(r) for r in records]

    async def serve(self, end: AgentEnd) -> int | None:
        player = TraceReplay([dict(r) for r in self.records])
        for data in player.start():
            await end.write(data)
        while (line := await end.receive_line()) is not None:
            try:
                message = json.loads(line)
            except ValueError:
                continue
            if isinstance(message, dict):
                for data in player.incoming(message):
                    await end.write(data)
        return 0


def replay(
    trace: str | os.PathLike[str] | Iterable[JsonMapping], *, close_grace: float = 0.5
) -> TransportFactory:
    """A transport factory that replays ``trace`` (a file path or its records) per launch."""
    records = load_trace(trace) if isinstance(trace, str | os.PathLike) else list(trace)
    TraceReplay([dict(r) for r in records])  # refuse a bad trace now, not at the first launch
    return in_memory(lambda: ReplayAgent(records), close_grace=close_grace)
