"""Role actors under faults, in the multi-host tier (issue 16 items 4 and 5).

Hosts (network + PID namespaces, :mod:`tests.cluster.tier`): ``db`` (PostgreSQL over
TCP), ``head`` (Ray head, tuned health checks, and the coordinator:
:mod:`tests.cluster.tier_driver`), ``w1`` and ``w2`` (each ``baton worker``; both
hold the slot's checkout). Slot ``dev`` runs the fake agent's ``permission``
scenario: a turn waits on a human's answer, so each fault hits a turn in flight.

* **kill -9 of w1**: the driver sees the holder lost, records the host's failure,
  places ``dev`` on w2 under epoch 2 and runs the turn again in a fresh session
  with the task's context (the fake agent cannot load sessions); the dead holder's
  open request is cancelled (the inbox stays right).
* **partition of w1 from the head** (w1 still reaches the store: the split-brain
  case): Ray declares w1 dead, the slot moves to w2 under epoch 2, and the stale
  copy, still running, is refused at its next act (its lease renewal):
  ``cluster.fenced_out`` with epoch 1, its agent stopped; then the link comes back.
* **w1 cut off entirely** (link down): its holder cannot reach the store, and its
  watchdog stops the agent before the lease ends; the slot moves to w2; link up.

Each time: the task completes exactly once (only epoch 2's run has
``turn.completed``, epoch 1's request never answered), and nothing of the slot is
left on any host after release. Detection and recovery times are printed as a table.
"""

from __future__ import annotations

import os
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.cluster.conftest import report
from tests.cluster.faults import Driver
from tests.cluster.tier import VENV_BIN, Tier, _ip

pytestmark = [pytest.mark.cluster, pytest.mark.slow]

REPO = Path(__file__).resolve().parents[2]
LEASE_S = 6.0
DETECTION_TARGET_S = 10.0
FAKE_AGENT = "baton.testing.fake_agent"


def _boot(t: Tier, *, redis: str | None = None) -> tuple[str, str]:
    """PostgreSQL on db, the Ray head on head (GCS fault tolerance with ``redis``), and
    ``baton worker`` on w1 and w2; the store's DSN and the head's address."""
    assert t.root is not None
    (t.root / "work" / "state").mkdir(parents=True)
    os.chmod(t.root / "work", 0o777)
    pg = t.start_postgres()
    head = t.start_ray_head(runs_roles=False, redis=redis)
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
            env={"PYTHONPATH": str(REPO), **t.ray_env(redis=redis)},
            log="worker",
        )
    return pg.tcp_dsn(), head


@pytest.fixture
def cluster(tier: Tier) -> Iterator[tuple[Tier, Driver]]:
    dsn, head = _boot(tier)
    driver = Driver(tier, head, dsn)
    try:
        yield tier, driver
    finally:
        driver.close()


def _agents(t: Tier, host: str) -> list[str]:
    return [p for p in t[host].processes() if FAKE_AGENT in p]


def _until(predicate: Any, bound: float) -> float | None:
    """Seconds until ``predicate()`` held, or None past ``bound`` (another host's processes:
    nothing to wait on but their table)."""
    start = time.monotonic()
    while time.monotonic() - start < bound:
        if predicate():
            return time.monotonic() - start
        time.sleep(0.1)
    return None


def _start_turn(d: Driver) -> dict[str, Any]:
    d.send(op="place", slot="dev", scenario="permission", lease_s=LEASE_S)
    placed = d.expect("placed")
    assert (placed["host"], placed["epoch"]) == ("w1", 1), placed
    d.send(op="prompt", slot="dev", text="run the test suite and report")
    d.send(op="wait_pending", slot="dev", epoch=1)
    d.expect("pending")
    return placed


def _finish_on_w2(d: Driver, fault_at: float) -> dict[str, float]:
    replaced = d.expect("replaced")
    assert (replaced["host"], replaced["epoch"]) == ("w2", 2), replaced
    d.send(op="wait_pending", slot="dev", epoch=2)
    pending = d.expect("pending")
    d.send(op="answer", request_id=pending["request_id"])
    done = d.expect("prompt_done")
    assert (done["status"], done["epoch"]) == ("completed", 2), done
    return {
        "detected_s": round(replaced["lost_seen_at"] - fault_at, 2),
        "replaced_s": round(replaced["at"] - fault_at, 2),
        "resumed_ask_s": round(pending["at"] - fault_at, 2),
    }


def _invariants(d: Driver) -> dict[str, Any]:
    d.send(op="report", slot="dev")
    seen = d.expect("report")
    first, second = seen["runs"]
    assert first["run_id"].endswith(".e1") and second["run_id"].endswith(".e2")
    assert "turn.completed" not in first["types"], first["types"]
    assert second["types"].count("turn.completed") == 1, second["types"]
    assert "request.answered" not in first["types"], "the stale copy's ask was never answered"
    assert all(state != "pending" for state in first["requests"]), first["requests"]
    return {"first": first, "second": second, "placements": seen["placements"]}


def _release_and_check(t: Tier, d: Driver) -> None:
    d.send(op="release", slot="dev")
    d.expect("released")
    gone = _until(lambda: not any(_agents(t, h) for h in ("w1", "w2") if t[h].up), 60)
    assert gone is not None, {h: _agents(t, h) for h in ("w1", "w2")}


def test_worker_kill_moves_the_slot_and_resumes_the_task(cluster: tuple[Tier, Driver]) -> None:
    t, d = cluster
    _start_turn(d)
    assert _agents(t, "w1"), "the agent runs in the actor, on w1"
    killed = t["w1"].crash()
    times = _finish_on_w2(d, killed)
    seen = _invariants(d)
    assert seen["first"]["requests"] == ["cancelled"], seen["first"]
    _release_and_check(t, d)
    assert times["detected_s"] < DETECTION_TARGET_S, times
    report("role-fault-kill", [{"fault": "kill -9 w1", **times}])


def _ray_partition(t: Tier, host: str, up: bool) -> None:
    """Cut (or restore) ``host`` from the Ray head only: it still reaches the store."""
    verb = "del" if up else "add"
    _ip("-n", t[host].netns, "route", verb, "blackhole", f"{t['head'].address}/32")
    _ip("-n", t["head"].netns, "route", verb, "blackhole", f"{t[host].address}/32")


def test_a_partitioned_copy_is_fenced_out(cluster: tuple[Tier, Driver]) -> None:
    t, d = cluster
    _start_turn(d)
    _ray_partition(t, "w1", up=False)
    cut = time.monotonic()
    times = _finish_on_w2(d, cut)
    # The stale copy still runs on w1 (Ray cannot reach it) and still reaches the store:
    # its next act is refused and it stops its agent.
    looked = time.monotonic()
    stopped = _until(lambda: not _agents(t, "w1"), 3 * LEASE_S)
    seen = _invariants(d)
    fenced = seen["first"]["fenced"]
    assert fenced and fenced[0]["epoch"] == 1, seen["first"]
    assert stopped is not None, "the fenced copy must stop its agent"
    _ray_partition(t, "w1", up=True)
    back = time.monotonic()
    gone = _until(lambda: not [p for p in t["w1"].processes() if "RoleHolder" in p], 90)
    _release_and_check(t, d)
    assert times["detected_s"] < DETECTION_TARGET_S, times
    report(
        "role-fault-partition",
        [
            {
                "fault": "w1 cut from the head (reaches the store)",
                **times,
                "stale_act_refused": fenced[0]["act"],
                "stale_agent_stopped_by_s": round(looked - cut + stopped, 2),
                "stale_actor_gone_after_link_up_s": None
                if gone is None
                else round(time.monotonic() - back, 2),
            }
        ],
    )


def test_the_watchdog_stops_an_agent_cut_off_from_the_store(
    cluster: tuple[Tier, Driver],
) -> None:
    t, d = cluster
    _start_turn(d)
    t["w1"].link(False)
    cut = time.monotonic()
    stopped = _until(lambda: not _agents(t, "w1"), 2 * LEASE_S)
    assert stopped is not None, "the watchdog must stop the agent of a holder cut off"
    assert stopped < LEASE_S, (stopped, "the agent must be stopped before its lease ends")
    times = _finish_on_w2(d, cut)
    t["w1"].link(True)
    _invariants(d)
    _release_and_check(t, d)
    report(
        "role-fault-watchdog",
        [{"fault": "w1 link down", "agent_stopped_by_watchdog_s": round(stopped, 2), **times}],
    )


def test_a_coordinator_and_head_restart_lose_no_live_session(tier: Tier) -> None:
    """Coordinator kill -9, then the head's kill -9 and restart with GCS fault tolerance:
    the holder and its agent live on; a new coordinator re-attaches from the store alone
    and the human's answer reaches the same agent, whose turn completes once."""
    t = tier
    redis = t.start_redis()
    dsn, head = _boot(t, redis=redis)
    first = Driver(t, head, dsn)
    try:
        placed = _start_turn(first)
        first.send(op="wait_pending", slot="dev", epoch=1)
        pending = first.expect("pending")
        first.proc.kill()  # the coordinator dies mid-turn
    finally:
        first.proc.kill()
        first.close()
    killed = t["head"].crash()
    t["head"].reboot()
    t.start_ray_head(runs_roles=False, redis=redis)
    second = Driver(t, head, dsn)
    try:
        second.send(op="attach", slot="dev")
        attached = second.expect("attached")
        back = attached["at"] - killed
        assert attached["attached"] is True and attached["epoch"] == 1, attached
        info = attached["info"]
        assert (info["actor_pid"], info["agent_pid"]) == (
            placed["info"]["actor_pid"],
            placed["info"]["agent_pid"],
        )
        assert info["agent_alive"] is True and info["stopped"] is None
        second.send(op="answer", request_id=pending["request_id"])
        second.expect("answered")
        second.send(op="wait_event", run_id=info["run_id"], type="turn.completed")
        done = second.expect("event")
        second.send(op="report", slot="dev")
        seen = second.expect("report")
        (run,) = seen["runs"]
        assert run["types"].count("turn.completed") == 1 and not run["fenced"], run
        assert [p["epoch"] for p in seen["placements"] if p["slot"] == "dev"] == [1]
        _release_and_check(t, second)
        report(
            "role-fault-restart",
            [
                {
                    "fault": "coordinator kill -9 + head kill -9 (GCS FT)",
                    "reattached_s": round(back, 2),
                    "turn_completed_after_answer_s": round(done["at"] - attached["at"], 2),
                    "same_actor_and_agent": True,
                }
            ],
        )
    finally:
        second.close()
