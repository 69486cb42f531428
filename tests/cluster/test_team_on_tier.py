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

import json
import os
import subprocess
from pathlib import Path

import pytest

from tests.cli.test_team_loop import TASK
from tests.cluster.tier import VENV_BIN, Tier
from tests.support.project import baton_in, project_env

pytestmark = [pytest.mark.cluster, pytest.mark.slow]

REPO = Path(__file__).resolve().parents[2]


def _baton(
    t: Tier, repo: Path, *args: str, timeout: float = 600
) -> subprocess.CompletedProcess[str]:
    """``baton ARGS`` on the head host, in the project (PostgreSQL and Ray reachable there)."""
    return t["head"].run(
        [str(VENV_BIN / "baton"), "-C", str(repo), *args],
        env={**project_env(repo), "PATH": f"{VENV_BIN}:/usr/bin:/bin"},
        timeout=timeout,
    )


def test_the_team_runs_on_two_workers(tier: Tier) -> None:
    from baton.store.pg import PgStore

    t = tier
    assert t.root is not None
    work = t.root / "work"
    work.mkdir()
    os.chmod(work, 0o777)
    repo = work / "repo"
    repo.mkdir()
    subprocess.run(["git", "init", "-q", str(repo)], check=True)
    pg = t.start_postgres()
    head = t.start_ray_head(runs_roles=False)
    for name in ("w1", "w2"):
        t[name].spawn(
            [
                str(VENV_BIN / "baton"),
                "worker",
                f"--address={head}",
                f"--host={name}",
                f"--node-ip={t[name].address}",
                "--num-cpus=1",
                f"--temp-dir={t[name].root / 'r'}",
                "--object-store-bytes=80000000",
            ],
            env={"PYTHONPATH": str(REPO), "HOME": str(t[name].root / "home")},
            log="worker",
        )
    assert baton_in(repo, "init").returncode == 0
    with (repo / "baton.toml").open("a") as toml:
        toml.write(
            f'\n[cluster]\naddress = "{head}"\nstore = "{pg.tcp_dsn()}"\nlease_seconds = 15\n'
        )
    (repo / "TASK.md").write_text(TASK)
    made = baton_in(
        repo, "task", "new", "--to", "PM", "--subject", "Release", "--body-file", "TASK.md"
    )
    assert made.returncode == 0, made.stderr
    up = _baton(t, repo, "up", "--until-idle", "--json")
    assert up.returncode == 0, (up.stdout[-3000:], up.stderr[-3000:])
    assert len(list((repo / "fcop" / "reports").glob("REPORT-*.md"))) == 3
    store = PgStore.open(pg.socket_dsn())
    try:
        placements = store.read_tx(
            lambda tx: tx.all("SELECT slot, host, state FROM cluster_placements ORDER BY slot")
        )
        hosts = {host for _, host, _ in placements}
        assert hosts == {"w1", "w2"}, placements  # spread by load over both workers
        assert {state for _, _, state in placements} == {"released"}
        holders = [r for r in store.list_runs(limit=50) if r.kind == "role-holder"]
        assert sorted(str(r.meta.get("role")) for r in holders) == ["OPS", "PM", "QA"]
        assert {str(r.meta.get("host")) for r in holders} == {"w1", "w2"}
    finally:
        store.close()
    status = json.loads(_baton(t, repo, "status", "--json").stdout)
    assert status["board"]["counts"]["done"] == 2 and status["board"]["counts"]["review"] == 1
    reviews = [r for r in status["pending_reviews"] if r["status"] == "pending"]
    assert len(reviews) == 1, status["pending_reviews"]
    answer = _baton(t, repo, "answer", reviews[0]["request_id"], "--accept", "--reason", "ship it")
    assert answer.returncode == 0, answer.stderr
    again = _baton(t, repo, "up", "--until-idle")
    assert again.returncode == 0, again.stderr[-3000:]
    status = json.loads(_baton(t, repo, "status", "--json").stdout)
    assert status["board"]["counts"]["done"] == 3 and status["board"]["counts"]["review"] == 0
    for name in ("w1", "w2"):
        left = [p for p in t[name].processes() if "RoleHolder" in p or "agents.builtin" in p]
        assert not left, (name, left)
