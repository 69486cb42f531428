"""The multi-host tier's fixtures: skipped, with the reason, only where it cannot run."""

from __future__ import annotations

import json
import os
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.cluster.local_ray import LocalRay, local_ray_unavailable
from tests.cluster.tier import Tier, tier_unavailable

BY_HAND = (
    "the multi-host tier runs by hand (./scripts/cluster-tier sets BATON_CLUSTER_TIER=1): "
    "its Ray runs take minutes on two cores, over the CI budget"
)


@pytest.fixture(scope="session")
def tier_reason() -> str | None:
    if os.environ.get("BATON_CLUSTER_TIER") != "1":
        return BY_HAND
    return tier_unavailable()


@pytest.fixture
def tier(tier_reason: str | None) -> Iterator[Tier]:
    """A fresh tier (db, head, w1, w2, w3); always torn down, also on failure."""
    if tier_reason is not None:
        if os.environ.get("BATON_REQUIRE_CLUSTER") == "1":
            pytest.fail(f"the cluster tier is required here but cannot run: {tier_reason}")
        pytest.skip(f"cluster tier unavailable: {tier_reason}")
    with Tier() as built:
        yield built


@pytest.fixture
def local_cluster() -> Iterator[LocalRay]:
    """A Ray cluster on localhost: a head and ``baton worker --host w1``; torn down after."""
    reason = BY_HAND if os.environ.get("BATON_CLUSTER_TIER") != "1" else local_ray_unavailable()
    if reason is not None:
        if os.environ.get("BATON_REQUIRE_CLUSTER") == "1":
            pytest.fail(f"the cluster tests are required here but cannot run: {reason}")
        pytest.skip(f"local Ray cluster unavailable: {reason}")
    with LocalRay() as built:
        built.worker("w1")
        yield built


def report(name: str, rows: list[dict[str, object]]) -> None:
    """Print a measured table and, when ``BATON_CLUSTER_REPORT`` names a dir, save it there."""
    print(f"\n{name}:")
    for row in rows:
        print("  " + "  ".join(f"{k}={v}" for k, v in row.items()))
    target = os.environ.get("BATON_CLUSTER_REPORT")
    if target:
        Path(target).mkdir(parents=True, exist_ok=True)
        (Path(target) / f"{name}.json").write_text(json.dumps(rows, indent=2))
