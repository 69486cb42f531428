"""The team flow's side-effect counters and what they must show after a fault (issue 30 item 7).

:func:`counted_task` is the tier's PM → QA/OPS task whose steps append a timestamp to
``counters/<ROLE>.log`` in the project (one line per time the step ran, on whichever
worker). :func:`check_flow` then reads the project and the store after the flow:

* **no report content lost**: QA and OPS each filed exactly one REPORT, ``done``, whose
  body is their runbook's real result (the step, succeeded), never a "nothing was
  executed" stand-in; PM's consolidation lists both children as done;
* **no step completed twice after a report was accepted**: per child task, one
  ``write_report`` delivered (``cluster_tool_calls``), and no counter line later than
  that delivery (a step re-run before its report was accepted is legitimate and counted);
* **FCoP valid**: ``fcop``'s ``validate_workspace`` on the project.

The orphan check (no role actor or agent left on any host) is the caller's: it knows the
hosts.
"""

from __future__ import annotations

import datetime
import random
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

ROLES = ("QA", "OPS")
NOTHING_DONE = ("nothing was executed", "held no runbook steps")


def counted_task(qa_first: str = "") -> str:
    """The release task with counted steps (``qa_first``: a command QA runs before its count)."""
    return f"""Release check.

- [ ] @QA Run the smoke tests
  ```sh
  {qa_first}date +%s.%N >> counters/QA.log; echo smoke-ok
  ```
- [ ] @OPS Check the environment
  ```sh
  date +%s.%N >> counters/OPS.log; echo env-ok
  ```
"""


@dataclass(frozen=True)
class Kill:
    """One coordinator kill: ``after`` seconds into the run, or (``filing``) right after a
    counter grew, that is while the role whose step just ran files its report."""

    after: float
    filing: bool = False


def kill_plan(count: int, rng: random.Random) -> list[Kill]:
    """``count`` kills, every other one aimed at the report-filing window."""
    return [
        Kill(rng.uniform(0.0, 1.0), filing=True) if i % 2 else Kill(rng.uniform(0.5, 12.0))
        for i in range(count)
    ]


def counters(repo: Path) -> dict[str, list[float]]:
    found = {}
    for role in ROLES:
        path = repo / "counters" / f"{role}.log"
        lines = path.read_text().split() if path.exists() else []
        found[role] = [float(x) for x in lines]
    return found


def _reports(repo: Path) -> Iterator[tuple[dict[str, Any], str]]:
    for path in sorted((repo / "fcop" / "reports").glob("REPORT-*.md")):
        _, head, body = path.read_text().split("---", 2)
        yield yaml.safe_load(head), body


def _epoch(iso: str) -> float:
    return datetime.datetime.fromisoformat(iso).timestamp()


def check_flow(repo: Path, calls: list[tuple[str, str, str, str]]) -> dict[str, Any]:
    """The invariants above; ``calls``: the project's ``(task_id, tool, state, updated_at)``
    rows of ``cluster_tool_calls``. Returns the counts for the table."""
    from baton.fcop_port.recovery import validate_workspace

    reports = list(_reports(repo))
    by_role = {role: [(m, b) for m, b in reports if m["sender"] == role] for role in ROLES}
    for role, filed in by_role.items():
        assert len(filed) == 1, (role, [m["report_id"] for m, _ in filed])
        meta, body = filed[0]
        assert meta["result"] == "done", (role, meta)
        assert "1 of 1 step succeeded" in body and f"counters/{role}.log" in body, body
    for meta, body in reports:
        assert not any(n in body.lower() for n in NOTHING_DONE), (meta["sender"], body)
    (pm,) = [b for m, b in reports if m["sender"] == "PM"]
    assert "2 of 2 delegated tasks done" in pm, pm
    runs = counters(repo)
    reruns = {}
    for role, (meta, _) in ((r, by_role[r][0]) for r in ROLES):
        task = meta["subject_ref"]
        delivered = [
            _epoch(at)
            for t, tool, state, at in calls
            if t == task and tool == "write_report" and state == "delivered"
        ]
        assert len(delivered) == 1, (role, task, calls)
        late = [x for x in runs[role] if x > delivered[0]]
        assert not late, f"{role}'s step ran again after its report was accepted: {late}"
        assert runs[role], f"{role}'s step never ran, yet its report says done"
        reruns[role] = len(runs[role]) - 1
    verdict = validate_workspace(repo)
    assert verdict["valid"], verdict["errors"][:3]
    refused = sum(1 for _, tool, state, _ in calls if state == "refused")
    return {"step_runs": {r: len(runs[r]) for r in ROLES}, "reruns": reruns, "refused": refused}
