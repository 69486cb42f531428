"""A team flow with roles on two worker hosts (issue 16 item 5), in the namespace tier.

``baton up --until-idle`` runs on the head host as the coordinator (a Ray driver)
over the PostgreSQL store on the db host; PM, QA and OPS run in role actors spread
over w1 and w2 (each ``baton worker``); the human approves the review with
``baton answer`` from the head host, and a second ``baton up`` applies it.

The role tools reach the agents through the coordinator's hub socket: the tier's
hosts share one filesystem, so a unix socket crosses their network namespaces.
Across real machines the hub's HTTP front needs a cluster address (docs/cluster.md).
"""

from __future__ import annotations

import pytest

from tests.cluster.faults import Workers, team_flow
from tests.cluster.tier import Tier

pytestmark = [pytest.mark.cluster, pytest.mark.slow]


def test_the_team_runs_on_two_workers(tier: Tier) -> None:
    t = tier
    pg = t.start_postgres()
    head = t.start_ray_head(runs_roles=False)
    workers = Workers(t, head)
    try:
        workers.add("w1")
        workers.add("w2")
        seen = team_flow(t, head, pg)
    finally:
        workers.close()
    assert {host for _, host, _ in seen["placements"]} == {"w1", "w2"}, seen  # spread by load
    assert {state for _, _, state in seen["placements"]} == {"released"}, seen
    assert seen["holder_hosts"] == ["w1", "w2"], seen
    for name in ("w1", "w2"):
        left = [p for p in t[name].processes() if "RoleHolder" in p or "agents.builtin" in p]
        assert not left, (name, left)
