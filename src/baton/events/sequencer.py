"""Stamping payloads into envelopes: identity, a per-run sequence, a timestamp."""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable, Sequence
from contextvars import ContextVar
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

from baton.events.model import PAYLOAD_TYPES, CanonicalEvent, Payload, storable

if TYPE_CHECKING:
    from baton.events.acp_normalizer import Draft

RECEIVED_FLAGS: ContextVar[tuple[str, ...]] = ContextVar("baton_received_flags", default=())
"""Flags of the frame being handled (:attr:`baton.acp.framing.Frame.flags`).

Meant to be set while the connection dispatches a frame it had to repair; every event
stamped in that context (and in the tasks it starts, which copy the context) carries
them. Other tasks never see them. Nothing sets it yet (``framing.REPAIR_AT_FRAMING`` is
off; the store's repair flags the event itself): when something does, an update's
drafts must carry the flags themselves (:attr:`Draft.flags`), since a run's drafts are
stamped at the run's end, outside the frame's context.
"""


__all__ = [
    "RECEIVED_FLAGS",
    "Sequencer",
    "format_dt",
    "format_ts",
    "utc_now",
]


def format_dt(at: datetime) -> str:
    """RFC 3339 UTC with milliseconds, e.g. ``2026-11-29T20:31:02.123Z``: the one format of
    every timestamp baton stores or stamps (events, runs, requests, team records)."""
    return at.astimezone(UTC).isoformat(timespec="milliseconds").replace("+00:00", "Z")


def format_ts(epoch: float) -> str:
    """:func:`format_dt` of a Unix time."""
    return format_dt(datetime.fromtimestamp(epoch, UTC))


def utc_now() -> str:
    """Now, as :func:`format_dt` writes it."""
    return format_dt(datetime.now(UTC))


class Sequencer:
    """Assigns strictly increasing ``seq`` numbers within one run."""

    def __init__(
        self, run_id: str, *, start_seq: int = 0, clock: Callable[[], float] = time.time
    ) -> None:
        self.run_id = run_id
        self.seq = start_seq
        self._clock = clock
        self._last_second = -1
        self._prefix = ""
        self._last_ms = -1
        self._last_ts = ""

    def _ts(self) -> str:
        now = self._clock()
        second = int(now)
        ms = int((now - second) * 1000)
        if second != self._last_second:
            self._last_second = second
            self._prefix = datetime.fromtimestamp(second, UTC).strftime("%Y-%m-%dT%H:%M:%S")
        elif ms == self._last_ms:
            return self._last_ts  # a flood stamps many events per millisecond
        ts = f"{self._prefix}.{ms:03d}Z"
        self._last_ms, self._last_ts = ms, ts
        return ts

    # Any: ``raw`` is the agent's JSON message the event came from, kept as sent.
    def stamp(
        self,
        payload: Payload,
        *,
        session_id: str | None = None,
        turn_id: str | None = None,
        raw: Any = None,
        flags: Sequence[str] = (),
    ) -> CanonicalEvent:
        return self._envelope(
            payload, session_id, turn_id, raw, flags, self._ts(), RECEIVED_FLAGS.get()
        )

    def stamp_all(
        self, drafts: Iterable[Draft], *, session_id: str | None, turn_id: str | None
    ) -> list[CanonicalEvent]:
        """:meth:`stamp` of each draft (in its own turn, else ``turn_id``), at one moment:
        a run of streaming detail handled at once has one timestamp."""
        ts, received, envelope = self._ts(), RECEIVED_FLAGS.get(), self._envelope
        return [
            envelope(d.payload, session_id, d.turn_id or turn_id, d.raw, d.flags, ts, received)
            for d in drafts
        ]

    def _envelope(
        self,
        payload: Payload,
        session_id: str | None,
        turn_id: str | None,
        raw: Any,
        flags: Sequence[str],
        ts: str,
        received: tuple[str, ...],
    ) -> CanonicalEvent:
        self.seq += 1
        if received:
            flags = sorted({*flags, *received})
        trusted = (
            isinstance(payload, PAYLOAD_TYPES.get(payload.TYPE, ()))
            and (session_id is None or type(session_id) is str)
            and (turn_id is None or type(turn_id) is str)
        )
        listed = list(flags) if flags else []
        if trusted:
            return storable(
                CanonicalEvent.stamped(
                    payload.TYPE,
                    self.seq,
                    self.run_id,
                    session_id,
                    turn_id,
                    ts,
                    payload,
                    raw,
                    listed,
                )
            )
        return storable(
            CanonicalEvent(
                type=payload.TYPE,
                seq=self.seq,
                run_id=self.run_id,
                session_id=session_id,
                turn_id=turn_id,
                ts=ts,
                payload=payload,
                raw=raw,
                flags=listed,
            )
        )
