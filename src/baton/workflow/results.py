"""What a report's result word means, and when a leader may call its work done (pure).

FCoP's ``result`` is a free string ("DONE" and "blocked" are both legal); baton's
tools ask for ``done``, ``blocked`` or ``failed``. :func:`normalize_result` reads
any word conservatively: only ``done`` (any case) is done.

:func:`consolidation_verdict` is the rule a leader's consolidated report must
follow: when any delegated task reported anything but done (blocked, failed, no
report, an unknown word), the leader's result is not ``done`` — unless the
leader states an override with a reason, which then travels in the report
(:func:`override_section`) so every reader sees it. The rule is enforced where
the leader files its report (the role MCP tool ``write_report``) and written into
the consolidation prompt (:func:`~baton.workflow.header.consolidation_prompt`),
so an agent is told before it is refused.

:func:`nothing_done` is the other half of an honest ``done``: a report that says its
turn did nothing (an empty body, or a body that opens by saying nothing was executed or
done, as baton's built-in agent's report on a prompt without steps does) cannot be
``done``: the task asked for work. ``write_report`` refuses it with the reason.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Final, Literal

__all__ = [
    "OVERRIDE_HEADING",
    "ChildOutcome",
    "ConsolidationVerdict",
    "Result",
    "consolidation_verdict",
    "normalize_result",
    "nothing_done",
    "override_section",
]

Result = Literal["done", "blocked", "failed", "other"]

_WORDS: dict[str, Result] = {
    "done": "done",
    "blocked": "blocked",
    "failed": "failed",
    "fail": "failed",
    "failure": "failed",
    "error": "failed",
}

OVERRIDE_HEADING = "## Override"
"""Heading of the section that records a leader's override in its report body."""


def normalize_result(word: str | None) -> Result:
    """``done``/``blocked``/``failed`` (any case), everything else ``other``."""
    if word is None:
        return "other"
    return _WORDS.get(word.strip().casefold(), "other")


@dataclass(frozen=True, slots=True)
class ChildOutcome:
    """A delegated task as the rule sees it."""

    task_id: str
    role: str
    result: str | None
    """The current report head's result; None when it has no report."""

    @property
    def done(self) -> bool:
        return normalize_result(self.result) == "done"

    def describe(self) -> str:
        said = f"reported {self.result!r}" if self.result is not None else "has no report"
        return f"{self.task_id} ({self.role}) {said}"


@dataclass(frozen=True, slots=True)
class ConsolidationVerdict:
    allowed: bool
    not_done: tuple[ChildOutcome, ...]
    """Children that did not report done."""
    suggested: Literal["done", "blocked", "failed"]
    """The honest result: ``failed`` if a child failed, ``blocked`` if one did not finish."""
    overridden: bool = False
    message: str = ""

    @property
    def needs_attention(self) -> bool:
        return bool(self.not_done)


def consolidation_verdict(
    result: str, children: Sequence[ChildOutcome], override: str | None = None
) -> ConsolidationVerdict:
    """May a leader report ``result`` over these children (with this override)?"""
    not_done = tuple(c for c in children if not c.done)
    suggested: Literal["done", "blocked", "failed"] = "done"
    if any(normalize_result(c.result) == "failed" for c in not_done):
        suggested = "failed"
    elif not_done:
        suggested = "blocked"
    if not not_done or normalize_result(result) != "done":
        return ConsolidationVerdict(True, not_done, suggested)
    reason = (override or "").strip()
    if reason:
        return ConsolidationVerdict(True, not_done, suggested, overridden=True)
    listed = "; ".join(c.describe() for c in not_done)
    return ConsolidationVerdict(
        False,
        not_done,
        suggested,
        message=(
            f"not every delegated task is done ({listed}): report result {suggested!r}, "
            "or keep 'done' by stating an override with its reason (the override argument)"
        ),
    )


def override_section(verdict: ConsolidationVerdict, reason: str) -> str:
    """The text appended to a report that overrides: what was overridden, and why."""
    listed = "\n".join(f"- {c.describe()}" for c in verdict.not_done)
    return (
        f"\n\n{OVERRIDE_HEADING}\n\nReported done although:\n{listed}\n\n"
        f"Reason given: {reason.strip()}\n"
    )


_NOTHING_DONE: Final = re.compile(
    r"\W*(?:nothing (?:was|has been|got) (?:executed|done|run|performed|changed)"
    r"|no (?:steps?|work|commands?|tools?) (?:was|were|has been|have been) "
    r"(?:executed|done|run|performed)"
    r"|(?:i|this turn|the turn) did (?:nothing|no work|not do anything))\b",
    re.IGNORECASE,
)


def nothing_done(body: str) -> bool:
    """The report says its turn did nothing: an empty body, or one that *opens* by saying
    so (a report that mentions later that, say, nothing was run twice is not one)."""
    text = body.strip()
    return not text or _NOTHING_DONE.match(text) is not None
