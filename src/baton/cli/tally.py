"""What a run's exit code depends on beyond the turn's outcome, and what still waits.

Fed every canonical event by a renderer (:mod:`baton.cli.render`); ``baton run`` and
``baton up`` read it when the turn ends: denied or expired requests and failed steps
make exit 6, requests still open are listed, and the heartbeat reads ``last_event``.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from typing import Any

from baton.app.facade.runs import (
    CanonicalEvent,
    RequestAnswered,
    RequestCancelled,
    RequestCreated,
    RequestExpired,
    RequestRejected,
    ToolExecutionCompleted,
    _ToolExecution,
)

__all__ = ["DEFERRED_CODES", "Tally", "refusal_code"]

DEFERRED_CODES = frozenset({"CHILDREN_OPEN"})
"""Tool refusals that mean "not yet" in a healthy flow, not a failure: a leader's report
while its delegated tasks still run (``role_tools.server`` ``write_report``)."""


def refusal_code(payload: _ToolExecution) -> str | None:
    """The ``{"error": {"code": …}}`` of a refused MCP tool call, if its output is one."""
    text = payload.output.tail if payload.output else ""
    if not text.lstrip().startswith("{") or len(text) > 8192:
        return None
    try:
        data = json.loads(text)
    except ValueError:
        return None
    error = data.get("error") if isinstance(data, dict) else None
    code = error.get("code") if isinstance(error, dict) else None
    return code if isinstance(code, str) else None


class Tally:
    """What a run's exit code depends on beyond the turn's outcome, and what still waits."""

    def __init__(self) -> None:
        self.denied = 0
        self.expired = 0
        self.failed_steps = 0
        self.waiting: dict[str, RequestCreated] = {}
        self.last_event = time.monotonic()

    def __call__(self, event: CanonicalEvent) -> None:
        self.last_event = time.monotonic()
        count = _COUNTS.get(event.type)
        if count is not None:  # most events of a run (streaming detail) count nothing
            count(self, event.payload)

    def _created(self, payload: RequestCreated) -> None:
        self.waiting[payload.request_id] = payload

    def _answered(self, payload: RequestAnswered) -> None:
        self.waiting.pop(payload.request_id, None)
        answer = payload.answer if isinstance(payload.answer, dict) else {}
        if answer.get("decision") in ("deny", "reject") or answer.get("outcome") in (
            "cancelled",
            "deny",
        ):
            self.denied += 1

    def _expired(self, payload: RequestExpired) -> None:
        self.waiting.pop(payload.request_id, None)
        self.expired += 1

    def _closed(self, payload: RequestCancelled | RequestRejected) -> None:
        self.waiting.pop(payload.request_id, None)

    def _completed(self, payload: ToolExecutionCompleted) -> None:
        if payload.status == "failed" and refusal_code(payload) not in DEFERRED_CODES:
            self.failed_steps += 1

    @property
    def clean(self) -> bool:
        return self.denied == 0 and self.expired == 0 and self.failed_steps == 0

    def describe(self) -> str:
        """``1 request denied, 1 step failed``: what kept the turn from running every step."""
        parts = []
        for count, what in (
            (self.denied, "request denied"),
            (self.expired, "request expired unanswered"),
            (self.failed_steps, "step failed"),
        ):
            if count:
                noun, _, rest = what.partition(" ")
                parts.append(f"{count} {noun}{'' if count == 1 else 's'} {rest}")
        return ", ".join(parts)


_COUNTS: dict[str, Callable[[Tally, Any], None]] = {
    RequestCreated.TYPE: Tally._created,
    RequestAnswered.TYPE: Tally._answered,
    RequestExpired.TYPE: Tally._expired,
    RequestCancelled.TYPE: Tally._closed,
    RequestRejected.TYPE: Tally._closed,
    ToolExecutionCompleted.TYPE: Tally._completed,
}
"""What :class:`Tally` counts, by event type (the payload is of that type's model)."""
