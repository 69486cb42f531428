"""A credential's window budget across hosts (issue 28 item 5): role holders (the actor's
logic without Ray, :class:`RoleHolder`) on PostgreSQL with the fake agent process.

Two holders, as on two worker hosts (each its own connection to the cluster's store),
both spending one API key: the ``[budget]`` the coordinator ships in the holder's spec is
what each holder's meter checks, in the charging transaction under the store's write
lock, so the window's last turn goes to exactly one of them, and both see the one quota
spent. Each turn is charged to the TASK, tree and role the driver names.
"""

from __future__ import annotations

import asyncio
import contextlib
from dataclasses import replace
from pathlib import Path

import pytest

from baton.agent_profile import CredentialBinding
from baton.budgets.limits import BudgetConfig, Limits, parse_window
from baton.budgets.rules import ScopeKey
from baton.cluster.actor import HolderSpec, RoleHolder
from baton.cluster.fencing import Placements
from baton.runner.budget_plan import credential_key
from baton.store import budget_sql
from tests.cluster.support import coordinator_run, holder_spec
from tests.support.pg_fixtures import pg_databases, pg_dsn

__all__ = ["pg_databases", "pg_dsn"]

KEY = "sk-shared-between-hosts"
WINDOW = BudgetConfig(per_window=Limits(turns=1), window=parse_window("5h"))


def on_host(spec: HolderSpec, host: str, epoch: int) -> HolderSpec:
    """The holder's spec on ``host``: its agent bound the shared API key (from the host's
    environment, under another profile name: the key is the quota, not the profile)."""
    binding = CredentialBinding("FAKE_API_KEY")
    profile = replace(spec.profile, name=f"fake-on-{host}", credentials=(binding,))
    environ = {**(spec.environ or {}), "FAKE_API_KEY": KEY}
    return replace(
        spec,
        host=host,
        epoch=epoch,
        slot=f"dev-{host}",
        profile=profile,
        environ=environ,
        extra={"role": "DEV"},
    )


@pytest.mark.parametrize("budget", [WINDOW, BudgetConfig()], ids=["shipped", "none"])
async def test_two_hosts_on_one_api_key_share_its_window(
    pg_dsn: str, tmp_path: Path, budget: BudgetConfig
) -> None:
    from baton.store.pg import PgStore

    store = PgStore.open(pg_dsn)
    holders: list[RoleHolder] = []
    try:
        emitter = coordinator_run(store)
        placements = Placements(store, emitter)
        base = holder_spec(pg_dsn, "dev", "ok", tmp_path, parent_run=emitter.run_id, lease_s=30)
        for host in ("w1", "w2"):
            placed = await placements.place(f"dev-{host}", host, lease_s=30)
            holder = RoleHolder(replace(on_host(base, host, placed.epoch), budget=budget))
            holders.append(holder)
            await holder.start()
        results = await asyncio.gather(
            *(h.prompt("go", "run-coordinator", (f"T-{n}", "T-1")) for n, h in enumerate(holders))
        )
        statuses = sorted(r.status for r in results)
        credential = credential_key("any", [KEY])
        window = store.read_tx(lambda tx: budget_sql.spend(tx, ScopeKey("window", credential)))
        if budget is not WINDOW:
            assert statuses == ["completed", "completed"], "no [budget] shipped: none held back"
            assert window.turns == 2, "both hosts charged one credential"
            return
        assert statuses == ["cancelled", "completed"], results
        [refused] = [r for r in results if r.status == "cancelled"]
        assert refused.error is not None and "per_window" in refused.error
        assert window.turns == 1, "the window's one turn, taken once across both hosts"
        tree = store.read_tx(lambda tx: budget_sql.spend(tx, ScopeKey("task", "T-1")))
        role = store.read_tx(lambda tx: budget_sql.spend(tx, ScopeKey("role", "DEV")))
        assert tree.turns == role.turns == 1, "charged to the TASK's tree and role named"
    finally:
        for holder in holders:
            with contextlib.suppress(Exception):
                await holder.close()
        store.close()
