"""The crash-point harness, CI share: every boundary kind, plus ≥ 50 random kills.

Three shards (so ``pytest -n`` runs them side by side), each a campaign of
``tests/crash/harness.py`` over fresh projects: the boundary shard kills ``baton up`` at
the first and last occurrence of every kind of durable write an undisturbed flow makes;
the random shards kill at random delays and at the Nth write of any kind (with the
boundary shard's own random plans, at least 50 random kills in all). Each shard
asserts zero invariant breaks and prints its table; ``python -m tests.crash.harness
--long`` is the ≥ 500-kill run.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.crash.harness import campaign

pytestmark = pytest.mark.slow


@pytest.mark.parametrize(
    ("shard", "kills", "boundaries"),
    [("boundaries", 20, True), ("random-a", 24, False), ("random-b", 24, False)],
)
def test_no_invariant_breaks_across_kills(
    tmp_path: Path, shard: str, kills: int, boundaries: bool, capsys: pytest.CaptureFixture[str]
) -> None:
    seed = {"boundaries": 1, "random-a": 2, "random-b": 3}[shard]
    tally = campaign(kills, seed=seed, base=tmp_path, boundaries=boundaries)
    with capsys.disabled():
        print(f"\n## crash harness, shard {shard}\n{tally.table()}")
    assert tally.breaks == [], tally.breaks
    assert tally.total_kills >= kills, tally.table()
