"""The multi-host tier's fixtures: skipped, with the reason, only where it cannot run."""

from __future__ import annotations

import json
import os
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.cluster.local_ray import LocalRay, local_ray_unavailable
from tests.cluster.tier import Tier, namespaces_unavailable, tier_unavailable

BY_HAND = (
    "the multi-host tier runs in its own step, serially, after the main suite "
    "(./scripts/cluster-tier [--ci] sets BATON_CLUSTER_TIER=1; ./scripts/test runs --ci)"
)


@pytest.fixture(scope="session")
def tier_reason() -> str | None:
    if os.environ.get("BATON_CLUSTER_TIER") != "1":
        return BY_HAND
    return tier_unavailable()


def require_tier(reason: str | None) -> None:
    """Skip with ``reason`` (or fail under ``BATON_REQUIRE_CLUSTER=1``) when it is not None.

    CI (``./scripts/cluster-tier --ci``) requires the tier unless the machine has no
    network or PID namespaces (or no root to make them): missing services fail there,
    since ``scripts/install-cluster`` installs them."""
    if reason is None:
        return
    required = os.environ.get("BATON_REQUIRE_CLUSTER") == "1"
    if os.environ.get("BATON_CLUSTER_CI") == "1":
        required = namespaces_unavailable() is None
    if required:
        pytest.fail(f"the cluster tier is required here but cannot run: {reason}")
    pytest.skip(f"cluster tier unavailable: {reason}")


@pytest.fixture
def tier(tier_reason: str | None) -> Iterator[Tier]:
    """A fresh tier (db, head, w1, w2, w3); always torn down, also on failure."""
    require_tier(tier_reason)
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
