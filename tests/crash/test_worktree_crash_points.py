"""The crash-point harness on task trees with their own branch (issue 26), CI share.

Two shards (``pytest -n`` runs them side by side): a tree approved and merged, killed
before and after each of its git steps (create, checkpoint, merge, remove), and a tree
dropped, killed before and after each step of its salvage (checkpoint, save, remove);
two random kills among each. Each asserts zero invariant breaks and that every git
boundary was met, and prints its table; ``python -m tests.crash.worktree_flows --long``
(or ``python -m tests.crash.harness --long``) runs more.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.crash.worktree_flows import DROP_POINTS, MERGE_POINTS, FlowKind, campaign

pytestmark = pytest.mark.slow


@pytest.mark.parametrize("kind", ["merge", "drop"])
def test_no_invariant_breaks_across_git_step_kills(
    tmp_path: Path, kind: FlowKind, capsys: pytest.CaptureFixture[str]
) -> None:
    tally, unfired = campaign(kind, base=tmp_path, seed={"merge": 26, "drop": 27}[kind])
    with capsys.disabled():
        print(f"\n## crash harness, worktree {kind} flow\n{tally.table()}")
    assert tally.breaks == [], tally.breaks
    assert unfired == [], f"git boundaries the flow never met: {unfired}"
    points = MERGE_POINTS if kind == "merge" else DROP_POINTS
    assert all(tally.kills[p] == 1 for p in points), tally.table()
