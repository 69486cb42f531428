"""The document a human reviews: what was done, not what the agent was told (pure).

A review used to show the leader's report body, and the built-in leader's body
quoted its own consolidation prompt back (``review_report(...)`` instructions
included). The human needs the work instead: the task's subject, the result
(and any override), each delegated task's result with an excerpt of its report,
and the files changed. :func:`review_document` builds that Markdown from plain
facts; :func:`consolidation_draft` builds the same summary as the draft report
the consolidation prompt offers a leader (the built-in agent files it as is).

Every excerpt is bounded and quoted (``> ``), so a report can neither forge
headings nor be read as instructions; one-line fields (subjects, roles, result
words) are already display-safe by intake. Terminal and HTML surfaces still
pass the whole document through :mod:`baton.security.display`.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass, field

from baton.security.display import neutralize_terminal
from baton.workflow.results import OVERRIDE_HEADING, normalize_result

__all__ = [
    "DRAFT_HEADING",
    "ChildSummary",
    "ReviewFacts",
    "consolidation_draft",
    "excerpt",
    "review_document",
]

EXCERPT_CHARS = 600
MAX_FILES = 50
DRAFT_HEADING = "Consolidated from the delegated reports:"
"""First line of a draft; a leader report that starts with it adds nothing to show twice."""

_DIRECTIVE = re.compile(r"^\s*(?:baton-[a-z-]+|continue-on-error)\s*:", re.IGNORECASE)


@dataclass(frozen=True, slots=True)
class ChildSummary:
    task_id: str
    role: str
    subject: str
    result: str | None
    report_id: str | None
    body: str = ""
    files_changed: tuple[str, ...] = ()


@dataclass(frozen=True, slots=True)
class ReviewFacts:
    """Everything the review document says (all plain data)."""

    task_id: str
    subject: str
    role: str
    """Who reported (the leader for a delegated task)."""
    result: str
    report_id: str
    body: str
    children: tuple[ChildSummary, ...] = ()
    files_changed: tuple[str, ...] = ()
    notes: tuple[str, ...] = field(default_factory=tuple)
    cost: str | None = None
    """What the task tree spent, one line (``baton.budgets``); None: nothing was metered."""


def excerpt(text: str, limit: int = EXCERPT_CHARS) -> str:
    """The report text worth showing, bounded and ``> ``-quoted (never empty)."""
    text = neutralize_terminal(text)  # excerpts of agent text: inert in the document itself
    lines = [line.rstrip() for line in text.strip("\n").split("\n") if not _DIRECTIVE.match(line)]
    kept = "\n".join(lines).strip()
    if len(kept) > limit:
        kept = kept[:limit].rstrip() + f" … ({len(kept) - limit} more characters in the report)"
    if not kept:
        kept = "(empty report)"
    return "\n".join(f"> {line}" if line else ">" for line in kept.split("\n"))


def _result(word: str | None) -> str:
    if word is None:
        return "no report"
    normal = normalize_result(word)
    return word if normal == "other" else normal


def _child_lines(children: Sequence[ChildSummary]) -> list[str]:
    lines = ["| Task | Role | Result | Report |", "|---|---|---|---|"]
    for c in children:
        lines.append(
            f"| {c.task_id}: {_cell(c.subject)} | {_cell(c.role)} | {_cell(_result(c.result))} "
            f"| {c.report_id or '-'} |"
        )
    for c in children:
        lines += ["", f"### {c.role}: {c.subject} — {_result(c.result)}", "", excerpt(c.body)]
    return lines


def _cell(text: str) -> str:
    return text.replace("|", "\\|")


def _files(files: Sequence[str]) -> list[str]:
    shown = list(dict.fromkeys(files))
    if not shown:
        return ["Files changed: none reported by the agents."]
    lines = ["Files changed:"] + [f"- {path}" for path in shown[:MAX_FILES]]
    if len(shown) > MAX_FILES:
        lines.append(f"- … and {len(shown) - MAX_FILES} more")
    return lines


def _override(body: str) -> str | None:
    _, found, tail = body.partition(OVERRIDE_HEADING)
    if not found:
        return None
    return tail.strip()


def review_document(facts: ReviewFacts) -> str:
    """The Markdown a human approves or rejects."""
    all_files = list(facts.files_changed)
    for child in facts.children:
        all_files += child.files_changed
    lines = [
        f"# {facts.subject}",
        "",
        f"{facts.task_id} · reported by {facts.role} · result: **{_result(facts.result)}** "
        f"({facts.report_id})",
    ]
    if facts.cost is not None:
        lines += ["", f"Cost: {facts.cost}"]
    override = _override(facts.body)
    if override is not None:
        lines += ["", "The leader overrode unfinished delegated work:", "", excerpt(override)]
    lines += list(facts.notes)
    if facts.children:
        done = sum(1 for c in facts.children if normalize_result(c.result) == "done")
        lines += ["", f"## Delegated work ({done} of {len(facts.children)} done)", ""]
        lines += _child_lines(facts.children)
        own = facts.body.split(OVERRIDE_HEADING)[0]
        if own.strip() and not own.lstrip().startswith(DRAFT_HEADING):
            lines += ["", f"## {facts.role}'s report", "", excerpt(own)]
    else:
        lines += ["", "## Report", "", excerpt(facts.body)]
    lines += ["", *_files(all_files)]
    return "\n".join(lines).rstrip() + "\n"


def consolidation_draft(children: Sequence[ChildSummary]) -> str:
    """The report a leader may file as its consolidation (the built-in agent does)."""
    done = sum(1 for c in children if normalize_result(c.result) == "done")
    lines = [DRAFT_HEADING, "", f"{done} of {len(children)} delegated tasks done.", ""]
    lines += _child_lines(children)
    return "\n".join(lines).rstrip() + "\n"
