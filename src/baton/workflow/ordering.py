"""When a delegated task may start: the dependency-gating rule (pure).

A leader's checklist often has steps that need another role's output (QA's
``cat artifact.txt`` needs DEV to have written it). A delegated TASK declares
what it waits for in FCoP itself, so it is durable and visible to every tool:
its ``references`` that name *sibling* TASKs (same ``parent``) are its
prerequisites. The role MCP tool ``create_task(..., after=...)`` writes them;
the built-in agent's checklist is sequential by default (each ``- [ ] @ROLE``
item after the previous one) and takes an explicit ``after:`` line (see
:mod:`baton.agents.builtin.runbook`). References to anything else stay plain
references and gate nothing.

:func:`gate` decides, for one task, from its prerequisites' facts:

* every prerequisite finished with result ``done`` → :class:`Ready`;
* any prerequisite finished otherwise, or does not exist → :class:`Unmet`: the
  task can never get what it waits for, so it is not run; baton reports it
  ``blocked`` with the reason, and the leader's consolidation reflects it;
* otherwise → :class:`Waiting` (not claimed; looked at again when a sibling
  reports).

"Finished" depends on the team's child acceptance: with ``on_consolidation`` a
child is finished once it reported (``review``), because the leader accepts all
children together at the end; with ``explicit`` the leader reviews each report,
so a child is finished once accepted (``done``), and a rejected one is back at
work.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Literal

from baton.workflow.results import normalize_result

__all__ = [
    "Prerequisite",
    "Ready",
    "Unmet",
    "Waiting",
    "gate",
    "not_run_report",
    "prerequisite_ids",
]

Acceptance = Literal["on_consolidation", "explicit"]


@dataclass(frozen=True, slots=True)
class Prerequisite:
    task_id: str
    role: str = ""
    stage: str | None = None
    """Its FCoP stage now; None when no stage holds it."""
    result: str | None = None
    """Its current report head's result (None: no report)."""


@dataclass(frozen=True, slots=True)
class Ready:
    pass


@dataclass(frozen=True, slots=True)
class Waiting:
    waiting_for: tuple[str, ...]


@dataclass(frozen=True, slots=True)
class Unmet:
    reasons: tuple[str, ...]


def prerequisite_ids(references: Iterable[str], siblings: Iterable[str]) -> tuple[str, ...]:
    """The references that name sibling TASKs, in reference order."""
    sibling_set = set(siblings)
    return tuple(dict.fromkeys(r for r in references if r in sibling_set))


def gate(
    prerequisites: Sequence[Prerequisite], *, acceptance: Acceptance = "on_consolidation"
) -> Ready | Waiting | Unmet:
    """May the task start (see the module docstring)?"""
    finished = (
        ("review", "done", "archive") if acceptance == "on_consolidation" else ("done", "archive")
    )
    unmet: list[str] = []
    waiting: list[str] = []
    for p in prerequisites:
        who = f"{p.task_id} ({p.role})" if p.role else p.task_id
        if p.stage is None:
            unmet.append(f"{who} does not exist")
        elif p.stage not in finished:
            waiting.append(p.task_id)
        elif normalize_result(p.result) != "done":
            said = f"reported {p.result!r}" if p.result is not None else "finished without a report"
            unmet.append(f"{who} {said}")
    if unmet:
        return Unmet(tuple(unmet))
    if waiting:
        return Waiting(tuple(waiting))
    return Ready()


def not_run_report(unmet: Unmet) -> tuple[str, str]:
    """(result, body) of the report baton files for a task it did not run."""
    listed = "\n".join(f"- {reason}" for reason in unmet.reasons)
    return (
        "blocked",
        "Not run: this task waits for the output of tasks that did not finish.\n\n"
        f"{listed}\n\nbaton filed this report because the task could not start.\n",
    )
