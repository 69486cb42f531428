"""The turns running now, and whether their agent has gone silent (``turn.stalled``).

``baton status``, ``baton sessions`` and the dashboard show a running turn whose agent
has said nothing past its stall threshold, and stop showing it once ``turn.resumed``
(or the turn's end) is stored. The facts are the turn's own events: a turn is running
while its ``turn.submitted`` has no terminal event, and stalled while its last
``turn.stalled`` has no later ``turn.resumed``. Only runs still ``running`` are read,
through a partial index over those few event types (``core.0004_turn_marks``), so
the read does not grow with a flooding turn's transcript.
Read-only: safe from any process while others write.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from baton.store.migrations import TURN_MARKS_SQL
from baton.store.store import Store
from baton.store.tx import Tx

__all__ = ["LiveTurn", "live_turns"]

_SQL = (
    "SELECT run_id, session_id, turn_id, type, ts, json FROM events"  # noqa: S608
    " WHERE run_id IN (SELECT run_id FROM runs WHERE status = 'running')"
    f" AND type IN ({TURN_MARKS_SQL}) ORDER BY run_id, seq"
)


@dataclass(frozen=True, slots=True)
class LiveTurn:
    """One running turn, as its events tell it."""

    run_id: str
    session_id: str | None
    turn_id: str
    started_at: str
    stalled_at: str | None = None
    """When the current stall was stored; ``None`` while the agent is talking."""
    silent_ms: int = 0
    """The silence when the stall was reported."""
    timeout_in_ms: int | None = None
    """The turn timeout's distance when the stall was reported."""

    @property
    def stalled(self) -> bool:
        return self.stalled_at is not None

    def silence_ms(self, now: datetime) -> int:
        """How long the agent has said nothing by ``now`` (0 unless stalled)."""
        return self.silent_ms + self._since_stall(now) if self.stalled else 0

    def timeout_in(self, now: datetime) -> int | None:
        """How far off the turn timeout is by ``now``, when known."""
        if not self.stalled or self.timeout_in_ms is None:
            return None
        return max(0, self.timeout_in_ms - self._since_stall(now))

    # Any: JSON out (``status --json``, the dashboard's API).
    def to_json(self, now: datetime) -> dict[str, Any]:
        """The turn as ``status --json`` and the dashboard's API give it, as of ``now``."""
        return {
            "run_id": self.run_id,
            "session_id": self.session_id,
            "turn_id": self.turn_id,
            "started_at": self.started_at,
            "stalled": self.stalled,
            "stalled_at": self.stalled_at,
            "silent_ms": self.silence_ms(now),
            "timeout_in_ms": self.timeout_in(now),
        }

    def _since_stall(self, now: datetime) -> int:
        assert self.stalled_at is not None
        try:
            at = datetime.fromisoformat(self.stalled_at.replace("Z", "+00:00"))
        except ValueError:
            return 0
        if at.tzinfo is None:
            at = at.replace(tzinfo=UTC)
        return max(0, int((now - at).total_seconds() * 1000))


def _read(tx: Tx) -> list[LiveTurn]:
    turns: dict[tuple[str, str], LiveTurn] = {}
    for run_id, session_id, turn_id, kind, ts, raw in tx.all(_SQL):
        if turn_id is None:
            continue
        key = (run_id, turn_id)
        turn = turns.get(key)
        if kind == "turn.submitted":
            turns[key] = LiveTurn(run_id, session_id, turn_id, started_at=ts)
        elif turn is None:
            continue
        elif kind == "turn.stalled":
            payload = json.loads(raw).get("payload") or {}
            timeout_in = payload.get("timeout_in_ms")
            turns[key] = LiveTurn(
                run_id,
                turn.session_id,
                turn_id,
                started_at=turn.started_at,
                stalled_at=ts,
                silent_ms=int(payload.get("silent_ms") or 0),
                timeout_in_ms=int(timeout_in) if isinstance(timeout_in, int) else None,
            )
        elif kind == "turn.resumed":
            turns[key] = LiveTurn(run_id, turn.session_id, turn_id, started_at=turn.started_at)
        else:  # terminal
            del turns[key]
    return list(turns.values())


def live_turns(store: Store) -> list[LiveTurn]:
    """Every running turn of every running run, with its stall if it has one."""
    return store.read_tx(_read)
