"""``baton up`` with a ``[cluster]`` section: the README's team flow, each role in a role actor.

A Ray cluster on this machine (a head and one ``baton worker``, PID namespaces,
torn down by the test), PostgreSQL as the store. ``baton init`` and ``baton task
new`` make the project; ``baton.toml`` gains ``[cluster]``; ``baton up --until-idle``
then runs the coordinator as a Ray driver: PM, QA and OPS each get a role actor on
the worker (the built-in agent runs inside it), file their reports through the
role tools, and the leader's review waits in the PostgreSQL ledger.

Role tools reach the agents through the hub's unix socket: this is one machine.
Across hosts the hub's HTTP front would need a cluster address (docs/cluster.md).
"""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest

from tests.cli.test_team_loop import TASK
from tests.cluster.local_ray import LocalRay
from tests.cluster.ray_join import wait_for_host
from tests.support.pg_fixtures import pg_databases, pg_dsn
from tests.support.project import baton_in, commit_all, git_repo, without_isolation

__all__ = ["pg_databases", "pg_dsn"]

pytestmark = [pytest.mark.cluster, pytest.mark.slow]


def test_baton_up_runs_the_team_in_role_actors(
    local_cluster: LocalRay, pg_dsn: str, tmp_path: Path
) -> None:
    from baton.store.pg import PgStore

    repo = git_repo(tmp_path)
    assert baton_in(repo, "init").returncode == 0
    without_isolation(repo)  # a worker's worktrees: docs/cluster.md
    with (repo / "baton.toml").open("a") as toml:
        toml.write(f'\n[cluster]\naddress = "{local_cluster.address}"\nlease_seconds = 15\n')
    env = {"BATON_CLUSTER_STORE": pg_dsn}
    wait_for_host(local_cluster.address, "w1")  # else PM finds no host and its turn fails
    (repo / "TASK.md").write_text(TASK)
    created = baton_in(
        repo,
        "task",
        "new",
        "--to",
        "PM",
        "--subject",
        "Release",
        "--body-file",
        "TASK.md",
        extra_env=env,
    )
    assert created.returncode == 0, created.stderr
    up = baton_in(repo, "up", "--until-idle", "--json", timeout=600, extra_env=env)
    assert up.returncode == 0, (up.stdout[-3000:], up.stderr[-3000:])
    reports = sorted((repo / "fcop" / "reports").glob("REPORT-*.md"))
    assert len(reports) == 3, "PM, QA and OPS each filed a report through the role tools"
    store = PgStore.open(pg_dsn)
    try:
        holders = [r for r in store.list_runs(limit=50) if r.kind == "role-holder"]
        roles = sorted(str(r.meta.get("role")) for r in holders)
        assert roles == ["OPS", "PM", "QA"], roles
        for run in holders:
            types = [e.type for e in store.iter_events(run.run_id)]
            assert "session.started" in types and "turn.completed" in types, (run.meta, types)
            assert "cluster.fenced_out" not in types
        outputs = " ".join(
            str(e.payload.model_dump())
            for run in holders
            for e in store.iter_events(run.run_id)
            if e.type == "tool.execution.completed"
        )
        assert "smoke-ok" in outputs and "env-ok" in outputs
        placements = store.read_tx(
            lambda tx: tx.all("SELECT slot, host, epoch, state FROM cluster_placements")
        )
        assert {(host, state) for _, host, _, state in placements} == {("w1", "released")}
        assert len(placements) == 3
        reviews = [
            e.payload
            for e in store.iter_events(up_run(store))
            if e.type == "request.created" and e.payload.kind == "review"
        ]
    finally:
        store.close()
    status = json.loads(baton_in(repo, "status", "--json", extra_env=env).stdout)
    assert status["board"]["counts"]["done"] == 2 and status["board"]["counts"]["review"] == 1
    # The human approves from another process (the PostgreSQL ledger); the next up applies it.
    assert len(reviews) == 1
    answer = baton_in(
        repo, "answer", reviews[0].request_id, "--accept", "--reason", "ship it", extra_env=env
    )
    assert answer.returncode == 0, answer.stderr
    again = baton_in(repo, "up", "--until-idle", timeout=600, extra_env=env)
    assert again.returncode == 0, again.stderr[-3000:]
    status = json.loads(baton_in(repo, "status", "--json", extra_env=env).stdout)
    assert status["board"]["counts"]["done"] == 3 and status["board"]["counts"]["review"] == 0


def up_run(store: object) -> str:
    runs = [r for r in store.list_runs(limit=50) if r.kind == "up"]  # type: ignore[attr-defined]
    assert len(runs) == 1
    return str(runs[0].run_id)


def test_baton_up_on_a_cluster_works_the_tree_on_the_worker_and_merges_it_here(
    local_cluster: LocalRay, pg_dsn: str, tmp_path: Path
) -> None:
    """Issue 26 item 7 end to end: ``[team] isolation = "worktree"`` (``baton init``'s) with
    ``[cluster]``. The coordinator makes the tree's branch only; each role's holder on w1
    works in its own copy of the tree (w1 shares this filesystem: the same repository, the
    branch compare-and-set in place) and pushes every turn; approving merges here."""
    repo = git_repo(tmp_path)
    assert baton_in(repo, "init").returncode == 0
    commit_all(repo)  # the tree branches from it
    with (repo / "baton.toml").open("a") as toml:
        toml.write(f'\n[cluster]\naddress = "{local_cluster.address}"\nlease_seconds = 15\n')
    env = {"BATON_CLUSTER_STORE": pg_dsn}
    wait_for_host(local_cluster.address, "w1")
    (repo / "TASK.md").write_text(TASK.replace("echo smoke-ok", "echo smoke-ok | tee smoke.txt"))
    created = baton_in(
        repo,
        "task",
        "new",
        "--to",
        "PM",
        "--subject",
        "Release",
        "--body-file",
        "TASK.md",
        extra_env=env,
    )
    assert created.returncode == 0, created.stderr
    up = baton_in(repo, "up", "--until-idle", "--json", timeout=600, extra_env=env)
    assert up.returncode == 0, (up.stdout[-3000:], up.stderr[-3000:])
    assert len(sorted((repo / "fcop" / "reports").glob("REPORT-*.md"))) == 3
    assert not (repo / "smoke.txt").exists()  # the checkout was never written
    branches = _git(repo, "branch", "--list", "baton/*", "--format=%(refname:short)").split()
    assert len(branches) == 1
    assert _git(repo, "show", f"{branches[0]}:smoke.txt") == "smoke-ok"  # pushed from w1
    assert "baton: " in _git(repo, "log", "-1", "--format=%s", branches[0])
    listed = _git(repo, "worktree", "list", "--porcelain")
    assert listed.count("worktree ") == 1, listed  # released holders removed their copies

    status = json.loads(baton_in(repo, "status", "--json", extra_env=env).stdout)
    [review] = [r for r in status["pending_reviews"] if r["status"] == "pending"]
    answer = baton_in(
        repo, "answer", review["request_id"], "--accept", "--reason", "ok", extra_env=env
    )
    assert answer.returncode == 0, answer.stderr
    again = baton_in(repo, "up", "--until-idle", timeout=600, extra_env=env)
    assert again.returncode == 0, again.stderr[-3000:]
    assert (repo / "smoke.txt").read_text() == "smoke-ok\n"  # merged into main here
    assert _git(repo, "branch", "--list", "baton/*") == ""


def _git(repo: Path, *args: str) -> str:
    done = subprocess.run(["git", *args], cwd=repo, capture_output=True, text=True, check=True)
    return done.stdout.strip()
