"""How a turn reports on itself: step outcomes, the closing message, the FCoP report (pure).

The wording is part of the agent's contract (users and tests read it), e.g.
``2 of 3 steps succeeded; step 3 (sh: make test) failed with exit code 2.``
"""

import re
from collections.abc import Sequence
from dataclasses import dataclass
from enum import StrEnum
from typing import Literal

__all__ = [
    "Status",
    "StepOutcome",
    "acknowledgement_body",
    "nothing_done_result",
    "report_body",
    "report_result",
    "summarize",
]

TAIL_LINES = 20
TAIL_CHARS = 2000


class Status(StrEnum):
    """What became of a step."""

    SUCCEEDED = "succeeded"
    FAILED = "failed"
    CANCELLED = "cancelled"
    NOT_RUN = "not run"


@dataclass(frozen=True, slots=True)
class StepOutcome:
    """One step's result, as the summary and the report tell it."""

    number: int
    label: str
    status: Status
    reason: str | None = None
    exit_code: int | None = None
    output: str = ""
    denied: bool = False

    def failure(self) -> str:
        """``failed with exit code 2`` / ``failed: permission denied``."""
        if self.reason is None and self.exit_code is not None:
            return f"failed with exit code {self.exit_code}"
        return f"failed: {self.reason or 'unknown error'}"


def summarize(
    outcomes: Sequence[StepOutcome],
    *,
    report: StepOutcome | None = None,
    cancelled: bool = False,
    notes: Sequence[str] = (),
    directive: str | None = None,
    filed: str | None = None,
) -> str:
    """The closing message of a turn (``filed``: the result the report was filed with,
    when it is not the steps' own, e.g. a turn that ran nothing)."""
    sentences: list[str] = []
    if outcomes:
        sentences.append(_steps_sentence(outcomes))
    elif cancelled:
        sentences.append("Cancelled before any step ran.")
    if cancelled and outcomes:
        sentences.insert(0, "Cancelled.")
    if report is not None:
        if report.status is Status.SUCCEEDED:
            result = filed or report_result(outcomes, directive)
            sentences.append(f"Report filed with write_report (result: {result}).")
        elif report.status is Status.CANCELLED:
            sentences.append("The report was cancelled.")
        else:
            sentences.append(f"The report could not be filed: {report.reason or 'unknown error'}.")
    sentences.extend(notes)
    return " ".join(sentences)


def _steps_sentence(outcomes: Sequence[StepOutcome]) -> str:
    succeeded = sum(1 for o in outcomes if o.status is Status.SUCCEEDED)
    noun = "step" if len(outcomes) == 1 else "steps"
    parts = [f"{succeeded} of {len(outcomes)} {noun} succeeded"]
    for outcome in outcomes:
        if outcome.status is Status.FAILED:
            parts.append(f"step {outcome.number} ({outcome.label}) {outcome.failure()}")
        elif outcome.status is Status.CANCELLED:
            parts.append(f"step {outcome.number} ({outcome.label}) was cancelled")
    not_run = [o.number for o in outcomes if o.status is Status.NOT_RUN]
    if len(not_run) == 1:
        parts.append(f"step {not_run[0]} was not run")
    elif not_run:
        parts.append(f"steps {_ranges(not_run)} were not run")
    return "; ".join(parts) + "."


def _ranges(numbers: Sequence[int]) -> str:
    """``3-5, 7`` for [3, 4, 5, 7]."""
    spans: list[list[int]] = []
    for n in numbers:
        if spans and n == spans[-1][1] + 1:
            spans[-1][1] = n
        else:
            spans.append([n, n])
    return ", ".join(str(a) if a == b else f"{a}-{b}" for a, b in spans)


def report_result(
    outcomes: Sequence[StepOutcome], directive: str | None = None
) -> Literal["done", "blocked", "failed"]:
    """``done`` only when every step succeeded; never better than the ``baton-result:`` directive.

    Without steps the result is the directive's (``done`` without one).
    """
    ok = not outcomes or all(o.status is Status.SUCCEEDED for o in outcomes)
    if directive == "failed":
        return "failed"
    if directive == "blocked" or not ok:
        return "blocked"
    return "done"


ACK_BODY_CHARS = 8000


def nothing_done_result(directive: str | None) -> Literal["blocked", "failed"]:
    """The result of a report on a turn that executed nothing: ``blocked`` (``failed`` when
    the prompt said so), never ``done``: the task asked for work and none was done."""
    return "failed" if directive == "failed" else "blocked"


def acknowledgement_body(narrative: Sequence[str]) -> str:
    """The report for a prompt with no steps: nothing ran; what was received, quoted."""
    received = "\n".join(narrative).strip()
    if len(received) > ACK_BODY_CHARS:
        received = received[:ACK_BODY_CHARS] + "\n… (cut)"
    quoted = "\n".join("> " + line for line in received.splitlines()) or "> (empty)"
    return (
        "Nothing was executed: the prompt held no runbook steps, so this turn did no work "
        "(reported blocked, not done). Received:\n\n" + quoted
    )


def report_body(outcomes: Sequence[StepOutcome]) -> str:
    """Markdown for ``write_report``: a table of steps, then the tail of each step's output."""
    lines = [
        f"Runbook: {_steps_sentence(outcomes)}",
        "",
        "| # | Step | Status | Exit code |",
        "|---|------|--------|-----------|",
    ]
    for o in outcomes:
        exit_code = "" if o.exit_code is None else str(o.exit_code)
        status = o.status.value if o.status is not Status.FAILED else o.failure()
        lines.append(f"| {o.number} | {_cell(o.label)} | {_cell(status)} | {exit_code} |")
    for o in outcomes:
        tail = _tail(o.output)
        if tail:
            fence = "`" * max(3, _longest_backtick_run(tail) + 1)
            lines += ["", f"### Step {o.number}: {o.label}", "", fence, tail, fence]
    return "\n".join(lines) + "\n"


def _cell(text: str) -> str:
    return text.replace("|", "\\|").replace("\n", " ")


def _tail(output: str) -> str:
    """The last lines of an output, bounded in lines and characters."""
    text = "\n".join(output.rstrip("\n").split("\n")[-TAIL_LINES:])
    return text[-TAIL_CHARS:]


def _longest_backtick_run(text: str) -> int:
    return max((len(run) for run in re.findall(r"`+", text)), default=0)
