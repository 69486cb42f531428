"""What a finished turn's tool calls recorded: the event log read back for one team turn.

A team turn row knows its coordinator run, its slot and the SHA-256 of the prompt it
sent (``team_turns.prompt_sha256``); the runner's ``turn.submitted`` event carries the
same digest and the turn's id, and every ``tool.execution.completed`` of that turn
carries that id. The agent's session writes into the coordinator's run on one machine
and into the holder's run ``<run>.<slot>.e<epoch>`` on a cluster, so both are looked in.

A reminder turn hands these to the agent (:mod:`baton.workflow.header`): an agent that
keeps no memory (baton's built-in one) files the real result of the work it did, not
"nothing was done".
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Final

from baton.store.tx import Tx

__all__ = ["RecordedCall", "recorded_calls"]

MAX_CALLS: Final = 40
"""The most recorded calls handed back (the latest ones: a long turn is cut at the front)."""
OUTPUT_CHARS: Final = 1200
"""The tail of each call's output kept."""


@dataclass(frozen=True, slots=True)
class RecordedCall:
    """One tool call of the turn, as the runner recorded its end."""

    title: str
    kind: str
    status: str
    """``completed``, ``failed`` or ``cancelled``."""
    output: str
    """The tail of its output (bounded), ``""`` when none was recorded."""


def _escape_like(text: str) -> str:
    return text.replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_")


def recorded_calls(tx: Tx, run_id: str, slot: str, prompt_sha256: str) -> list[RecordedCall]:
    """The tool calls of the last turn whose prompt had ``prompt_sha256``, in order."""
    holder_runs = f"{_escape_like(run_id)}.{_escape_like(slot)}.e%"
    needle = f'%"prompt_sha256":"{_escape_like(prompt_sha256)}"%'
    submitted = tx.all(
        "SELECT run_id, turn_id FROM events"
        " WHERE (run_id = ? OR run_id LIKE ? ESCAPE '\\')"
        " AND type = 'turn.submitted' AND json LIKE ? ESCAPE '\\'"
        " ORDER BY ts DESC, seq DESC LIMIT 1",
        (run_id, holder_runs, needle),
    )
    if not submitted or submitted[0][1] is None:
        return []
    turn_run, turn_id = str(submitted[0][0]), str(submitted[0][1])
    rows = tx.all(
        "SELECT json FROM events WHERE run_id = ? AND turn_id = ?"
        " AND type = 'tool.execution.completed' ORDER BY seq DESC LIMIT ?",
        (turn_run, turn_id, MAX_CALLS),
    )
    calls = [_call(str(row[0])) for row in reversed(rows)]
    return [c for c in calls if c is not None]


def _call(line: str) -> RecordedCall | None:
    try:
        event = json.loads(line)
    except ValueError:
        return None
    payload = event.get("payload") if isinstance(event, dict) else None
    if not isinstance(payload, dict):
        return None
    output = payload.get("output")
    tail = output.get("tail") if isinstance(output, dict) else None
    return RecordedCall(
        title=str(payload.get("title") or ""),
        kind=str(payload.get("kind") or ""),
        status=str(payload.get("status") or ""),
        output=str(tail or "")[-OUTPUT_CHARS:],
    )
