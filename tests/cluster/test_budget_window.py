"""A credential's window budget across hosts (issue 28 item 5), on PostgreSQL, no Ray.

Two role holders open as on two worker hosts (``open_holder_root``: each its own
connection to the cluster's store), both spending one API key: the ``[budget]`` the
coordinator ships in the holder's spec is what each holder's meter checks, in the
charging transaction under the store's write lock, so the window's last turn goes to
exactly one of them, and both see the one quota spent.
"""

from __future__ import annotations

import asyncio
import contextlib
from dataclasses import replace
from pathlib import Path

import pytest

from baton.budgets.limits import BudgetConfig, Limits, parse_window
from baton.budgets.rules import ScopeKey
from baton.cluster.actor import HolderSpec, holder_meta
from baton.errors import BudgetRefused
from baton.providers.profile import CredentialBinding
from baton.runner.budget_plan import credential_key
from baton.store import budget_sql
from baton.team.role_sessions import role_policy
from tests.cluster.support import holder_spec
from tests.support.pg_fixtures import pg_databases, pg_dsn

__all__ = ["pg_databases", "pg_dsn"]

KEY = "sk-shared-between-hosts"


def on_host(spec: HolderSpec, host: str) -> HolderSpec:
    """The holder's spec on ``host``, its agent bound the shared API key (from the host's
    environment, under another profile name: the key is the quota, not the profile)."""
    binding = CredentialBinding("FAKE_API_KEY")
    profile = replace(spec.profile, name=f"fake-on-{host}", credentials=(binding,))
    environ = {**(spec.environ or {}), "FAKE_API_KEY": KEY}
    return replace(spec, host=host, slot=f"dev-{host}", profile=profile, environ=environ)


@pytest.mark.parametrize("limited", [True, False])
async def test_two_hosts_on_one_api_key_share_its_window(
    pg_dsn: str, tmp_path: Path, limited: bool
) -> None:
    budget = BudgetConfig(per_window=Limits(turns=1), window=parse_window("5h"))
    base = holder_spec(pg_dsn, "dev", "ok", tmp_path, parent_run="run-coordinator", lease_s=30)
    base = replace(base, budget=budget if limited else BudgetConfig())
    specs = [on_host(base, host) for host in ("w1", "w2")]
    async with contextlib.AsyncExitStack() as stack:
        sessions = []
        for n, spec in enumerate(specs):
            root = await stack.enter_async_context(
                spec.root(spec, f"run-holder-{n}", holder_meta(spec))
            )
            broker = root.broker(role_policy("all"), wait_timeout=5)
            session = await root.open_session(
                spec.profile, requests=broker, workspace=Path(spec.workspace)
            )
            stack.push_async_callback(session.close)
            sessions.append((root, session))
        credentials = {s.budget.ledger.charge.credential for _, s in sessions if s.budget}
        assert credentials == {credential_key("any", [KEY])}, "one key, one window"
        outcomes = await asyncio.gather(
            *(s.prompt("go") for _, s in sessions), return_exceptions=True
        )
        refused = [o for o in outcomes if isinstance(o, BudgetRefused)]
        completed = [o for o in outcomes if not isinstance(o, BaseException)]
        if not limited:
            assert len(completed) == 2, "no [budget] shipped: nothing is held back"
            return
        assert len(refused) == 1 and len(completed) == 1, outcomes
        assert "per_window" in str(refused[0])
        [credential] = credentials
        for root, _ in sessions:
            spend = root.store.read_tx(
                lambda tx: budget_sql.spend(tx, ScopeKey("window", credential))
            )
            assert spend.turns == 1, "every host reads the one quota"
