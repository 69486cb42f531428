"""The coordinator (``baton up`` with ``[cluster]``) is killed mid-turn and started again.

A Ray cluster on this machine (a head and one ``baton worker``, PID namespaces, torn down
by the test), PostgreSQL as the store, the built-in agent in QA's role actor with
``permissions = "ask"`` and its role tools over the hub's HTTP front at a fixed address.
In order:

* ``baton up`` places QA's holder and dispatches the TASK; the agent asks permission for
  its one step; the coordinator is killed (SIGKILL: nothing closes, nothing is revoked);
* ``baton up --until-idle`` starts: it re-attaches to the live holder (same actor, same
  agent), keeps the agent's credential (the hub's table is in the store) and adopts the
  open turn instead of interrupting it (the turn row's prompt digest is the holder's);
* the permission is answered from the store's side; the agent runs its step and files its
  report through the *new* hub with the credential the *old* one issued;
* the turn ran once (one ``turn.submitted`` and one ``turn.completed`` in the holder's
  run, one turn row), one REPORT; the clean stop then revokes the credential.
"""

from __future__ import annotations

import asyncio
import json
import os
import signal
import socket
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from tests.cluster.local_ray import LocalRay
from tests.cluster.ray_join import wait_for_host
from tests.cluster.support import until
from tests.support.pg_fixtures import pg_databases, pg_dsn
from tests.support.project import baton_in, git_repo, project_env, without_isolation

__all__ = ["pg_databases", "pg_dsn"]

pytestmark = [pytest.mark.cluster, pytest.mark.slow]

BODY = """Smoke check.

```sh
echo smoke-ok
```
"""


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
        return port


def _up(repo: Path, env: dict[str, str], *args: str) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [sys.executable, "-m", "baton", "up", *args],
        cwd=repo,
        env={**project_env(repo), **env},
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,
    )


async def test_a_restarted_coordinator_adopts_the_turn_and_keeps_the_credential(
    local_cluster: LocalRay, pg_dsn: str, tmp_path: Path
) -> None:
    from baton.request_model.documents import PermissionAnswer
    from baton.requests.ledger import Ledger
    from baton.store.pg import PgStore

    repo = git_repo(tmp_path)
    assert baton_in(repo, "init").returncode == 0
    without_isolation(repo)  # a worker's worktrees: docs/cluster.md
    toml = (repo / "baton.toml").read_text()
    qa = toml.index("[team.roles.QA]")
    toml = toml[:qa] + toml[qa:].replace('permissions = "all"', 'permissions = "ask"', 1)
    port = _free_port()
    toml += (
        f'\n[cluster]\naddress = "{local_cluster.address}"\nlease_seconds = 15\n'
        f'hub_address = "127.0.0.1:{port}"\n'
    )
    (repo / "baton.toml").write_text(toml)
    (repo / "TASK.md").write_text(BODY)
    env = {"BATON_CLUSTER_STORE": pg_dsn}
    created = baton_in(
        repo,
        "task",
        "new",
        "--to",
        "QA",
        "--subject",
        "Smoke",
        "--body-file",
        "TASK.md",
        extra_env=env,
    )
    assert created.returncode == 0, created.stderr
    wait_for_host(local_cluster.address, "w1")

    store = PgStore.open(pg_dsn)
    ledger = Ledger(store)  # type: ignore[arg-type]  # the Store face, on PostgreSQL
    first = _up(repo, env)
    second: subprocess.Popen[str] | None = None
    try:
        pending = await until(
            lambda: ledger.pending(kinds=("permission",)), timeout=240, what="QA's permission ask"
        )
        holders = _holders(store)
        assert len(holders) == 1
        os.killpg(first.pid, signal.SIGKILL)  # the coordinator dies; the actor lives on
        first.wait(timeout=30)
        live = _credentials(store)
        assert [(slot, live_) for slot, _, live_ in live] == [("QA", 1)], live

        second = _up(repo, env, "--until-idle", "--json")
        # The new coordinator adopted the turn: nothing is re-dispatched while it waits.
        await asyncio.sleep(10)
        assert second.poll() is None, second.communicate()[1][-3000:]
        await ledger.answer(
            pending[0].request_id, PermissionAnswer(decision="allow"), decided_by="human"
        )
        out, err = await asyncio.to_thread(second.communicate, timeout=300)
        assert second.returncode == 0, (out[-3000:], err[-3000:])
    finally:
        for proc in (first, second):
            if proc is not None and proc.poll() is None:
                os.killpg(proc.pid, signal.SIGKILL)
                proc.wait(timeout=30)
        await ledger.aclose()

    try:
        reports = sorted((repo / "fcop" / "reports").glob("REPORT-*.md"))
        turns = store.read_tx(
            lambda tx: tx.all("SELECT slot, kind, state, outcome, error FROM team_turns")
        )
        assert len(reports) == 1, ("one report, through the new hub", turns, _tool_lines(store))
        assert "smoke-ok" in reports[0].read_text(), (turns, _tool_lines(store))
        holders_after = _holders(store)
        assert [h.run_id for h in holders_after] == [holders[0].run_id], holders_after
        types = [e.type for e in store.iter_events(holders[0].run_id)]
        assert types.count("turn.submitted") == 1 and types.count("turn.completed") == 1, types
        assert "cluster.fenced_out" not in types
        assert [tuple(t[:4]) for t in turns] == [("QA", "work", "finished", "completed")], turns
        refused = _refusals(store)
        assert refused == [], refused
        # The clean stop retired the credential: a later hub refuses it.
        assert [(slot, live_) for slot, _, live_ in _credentials(store)] == [("QA", 0)]
    finally:
        store.close()
    status = json.loads(baton_in(repo, "status", "--json", extra_env=env).stdout)
    assert status["board"]["counts"]["review"] == 1, status["board"]


def _holders(store: Any) -> list[Any]:
    return [r for r in store.list_runs(limit=50) if r.kind == "role-holder"]


def _credentials(store: Any) -> list[tuple[str, int, int]]:
    rows = store.read_tx(
        lambda tx: tx.all("SELECT slot, generation, live FROM cluster_credentials ORDER BY 2")
    )
    return [(str(s), int(g), int(live)) for s, g, live in rows]


def _tool_lines(store: Any) -> list[str]:
    return [
        f"{e.type} {json.dumps(e.payload.model_dump())[-1500:]}"
        for run in _holders(store)
        for e in store.iter_events(run.run_id)
        if e.type.startswith(("tool.", "turn."))
    ]


def _refusals(store: Any) -> list[str]:
    """Role-tool calls the agent saw fail (a refused credential shows up there)."""
    out = []
    for run in _holders(store):
        for e in store.iter_events(run.run_id):
            text = json.dumps(e.payload.model_dump())
            if e.type.startswith("tool.") and ("CREDENTIAL" in text or "UNKNOWN_SLOT" in text):
                out.append(text[:300])
    return out
