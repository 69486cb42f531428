"""The cluster mode's pure and in-process pieces: frame classification, the fenced wire,
the lease keeper, Ray's node table as hosts, the worker's command line."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

import pytest

from baton.acp.stderr_ring import StderrRing
from baton.cluster.driver import hosts_from_nodes, resume_text
from baton.cluster.fence_guard import PARSE_LIMIT, EpochGuard, FencedTransport, frame_act
from baton.cluster.lease import LeaseKeeper
from baton.cluster.names import actor_name, checkout_resource
from baton.cluster.placement import FencedOut, HostFacts, Watchdog
from baton.cluster.worker import worker_argv
from baton.errors import ConfigError, StoreError
from baton.events.model import ClusterFencedOut


def _line(message: dict[str, Any]) -> bytes:
    return json.dumps(message).encode()


def test_frames_are_classified_by_what_they_ask() -> None:
    assert frame_act(_line({"jsonrpc": "2.0", "id": 3, "method": "fs/write_text_file"})) == (
        "request fs/write_text_file"
    )
    assert frame_act(_line({"jsonrpc": "2.0", "id": 3, "result": {}})) == "answer 3"
    assert frame_act(_line({"jsonrpc": "2.0", "method": "session/update", "params": {}})) is None
    assert frame_act(b"{not json") == "frame (not JSON)"
    assert frame_act(b"[1, 2]") == "frame (not an object)"
    assert frame_act(b" " * (PARSE_LIMIT + 1)) == "frame (not parsed)"


class _Pipe:
    """An agent's output as chunks, and its input as what was written."""

    def __init__(self, chunks: list[bytes]) -> None:
        self.chunks = chunks
        self.written = bytearray()
        self.killed = False

    async def read(self, n: int = -1) -> bytes:
        return self.chunks.pop(0) if self.chunks else b""

    def write(self, data: bytes) -> None:
        self.written += data

    async def drain(self) -> None:
        return None

    def is_closing(self) -> bool:
        return False

    def close(self) -> None:
        return None


class _Transport:
    def __init__(self, pipe: _Pipe) -> None:
        self.pipe = pipe

    @property
    def reader(self) -> _Pipe:
        return self.pipe

    @property
    def writer(self) -> _Pipe:
        return self.pipe

    @property
    def stderr(self) -> StderrRing:
        return StderrRing()

    @property
    def returncode(self) -> int | None:
        return None

    @property
    def exit_grace(self) -> float:
        return 0.0

    async def wait_exited(self) -> int | None:
        return None

    async def wait(self, timeout: float | None = None) -> int | None:
        return None

    async def close(self) -> int | None:
        return None

    async def kill(self) -> int | None:
        self.pipe.killed = True
        return None


def _guard(allowed: list[bool]) -> tuple[EpochGuard, list[str], list[ClusterFencedOut]]:
    acts: list[str] = []
    recorded: list[ClusterFencedOut] = []

    async def fence(act: str) -> None:
        acts.append(act)
        if not allowed.pop(0):
            raise FencedOut("epoch 1 is stale")

    async def record(event: ClusterFencedOut) -> None:
        recorded.append(event)

    async def refused(reason: str) -> None:
        return None

    guard = EpochGuard(fence, slot="dev", epoch=1, record=record, on_refused=refused)
    return guard, acts, recorded


async def _drain(transport: FencedTransport) -> bytes:
    out = bytearray()
    while chunk := await transport.reader.read():
        out += chunk
    return bytes(out)


async def test_requests_pass_after_their_check_and_notifications_without_one() -> None:
    update = _line({"jsonrpc": "2.0", "method": "session/update", "params": {}}) + b"\n"
    ask = _line({"jsonrpc": "2.0", "id": 1, "method": "fs/write_text_file"}) + b"\n"
    reply = _line({"jsonrpc": "2.0", "id": 9, "result": {}}) + b"\n"  # to the client's request
    # The request split across reads: its newline only comes with the second chunk.
    pipe = _Pipe([update + ask[:10], ask[10:] + reply])
    guard, acts, _ = _guard([True])
    assert await _drain(FencedTransport(_Transport(pipe), guard)) == update + ask + reply
    assert acts == ["request fs/write_text_file"]


async def test_a_refused_request_never_reaches_the_client_and_recorded_once() -> None:
    ask = _line({"jsonrpc": "2.0", "id": 1, "method": "terminal/create"}) + b"\n"
    later = _line({"jsonrpc": "2.0", "id": 2, "method": "fs/write_text_file"}) + b"\n"
    pipe = _Pipe([ask[:5], ask[5:] + later])
    guard, acts, recorded = _guard([False])
    got = await _drain(FencedTransport(_Transport(pipe), guard))
    assert got == ask[:5] and b"\n" not in got, "no newline: the connection cannot act on it"
    assert [(r.epoch, r.act) for r in recorded] == [(1, "request terminal/create")]
    assert not await guard.check("request anything")  # stale for good, no second record
    assert len(acts) == 1 and len(recorded) == 1


async def test_an_overlong_line_is_checked_unparsed() -> None:
    long = b'{"x": "' + b"a" * (PARSE_LIMIT + 10) + b'"}\n'
    pipe = _Pipe([long[: PARSE_LIMIT // 2], long[PARSE_LIMIT // 2 :]])
    guard, acts, _ = _guard([True])
    assert await _drain(FencedTransport(_Transport(pipe), guard)) == long
    assert acts == ["frame (not parsed)"]


async def test_an_answer_is_written_only_after_its_check() -> None:
    pipe = _Pipe([])
    guard, acts, _ = _guard([True, False])
    transport = FencedTransport(_Transport(pipe), guard)
    prompt = _line({"jsonrpc": "2.0", "id": 5, "method": "session/prompt"}) + b"\n"
    transport.writer.write(prompt)
    await transport.writer.drain()
    allow = _line({"jsonrpc": "2.0", "id": 1, "result": {"outcome": "selected"}}) + b"\n"
    transport.writer.write(allow)
    await transport.writer.drain()
    deny = _line({"jsonrpc": "2.0", "id": 2, "result": {}}) + b"\n"
    transport.writer.write(deny)
    with pytest.raises(ConnectionResetError, match="fenced out"):
        await transport.writer.drain()
    assert bytes(pipe.written) == prompt + allow
    assert acts == ["answer 1", "answer 2"]


class _Clock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


async def test_the_keeper_renews_then_kills_when_the_store_stops_confirming() -> None:
    clock = _Clock()
    calls: list[float] = []
    hang = asyncio.Event()
    lost: list[str] = []

    async def renew() -> None:
        calls.append(clock.now)
        if len(calls) > 1:
            await hang.wait()  # the store's host is cut off: never answers

    async def on_lost(reason: str) -> None:
        lost.append(reason)

    keeper = LeaseKeeper(renew, lease_s=6.0, on_lost=on_lost, monotonic=clock)
    assert await keeper.step() is Watchdog.ACT and calls == []
    clock.now = 2.0
    assert await keeper.step() is Watchdog.RENEW
    await asyncio.sleep(0)  # the renewal task runs
    await asyncio.sleep(0)
    assert keeper.renewals == 1 and keeper.since_renewal() == 0.0
    clock.now = 4.5
    assert await keeper.step() is Watchdog.RENEW
    await asyncio.sleep(0)
    clock.now = 5.5
    assert await keeper.step() is Watchdog.RENEW  # still hanging: not started twice
    assert len(calls) == 2
    clock.now = 7.0  # 5 s since the confirmed renewal (sent at 2.0): kill before 8.0
    assert await keeper.step() is Watchdog.KILL
    assert lost and "unreachable" in lost[0]
    hang.set()


async def test_a_refused_renewal_stops_the_holder_at_once() -> None:
    clock = _Clock()
    lost: list[str] = []

    async def renew() -> None:
        raise FencedOut("epoch 1 is stale")

    async def on_lost(reason: str) -> None:
        lost.append(reason)

    keeper = LeaseKeeper(renew, lease_s=6.0, on_lost=on_lost, monotonic=clock)
    clock.now = 2.5
    await keeper.step()
    await asyncio.sleep(0)
    assert lost == ["the store refused the renewal: epoch 1 is stale"]
    assert await keeper.step() is Watchdog.KILL


async def test_a_failed_renewal_is_tried_again() -> None:
    clock = _Clock()
    outcomes = [StoreError("connection lost"), None]

    async def renew() -> None:
        outcome = outcomes.pop(0)
        if outcome is not None:
            raise outcome

    async def on_lost(reason: str) -> None:
        raise AssertionError(reason)

    keeper = LeaseKeeper(renew, lease_s=6.0, on_lost=on_lost, monotonic=clock)
    clock.now = 2.0
    await keeper.step()
    await asyncio.sleep(0)
    assert keeper.renewals == 0
    clock.now = 2.6
    await keeper.step()
    await asyncio.sleep(0)
    assert keeper.renewals == 1 and keeper.since_renewal() == 0.0


async def test_a_store_outage_pauses_the_agent_and_a_confirmed_epoch_lets_it_go_on() -> None:
    """Issue 30 item 3: a holder that cannot reach the store freezes its agent before its
    lease may lapse (nothing acts under a lapsed lease) instead of killing it; the store
    back and still naming the epoch, the agent goes on; the slot moved, it is stopped."""
    clock = _Clock()
    seen: list[str] = []
    store_up = False
    moved = False

    async def renew() -> None:
        raise StoreError("connection refused")

    async def resume() -> None:
        if moved:
            raise FencedOut("epoch 1 is stale")
        if not store_up:
            raise StoreError("connection refused")

    async def on_lost(reason: str) -> None:
        seen.append(f"lost: {reason}")

    async def on_pause(reason: str) -> None:
        seen.append("paused")

    async def on_resume() -> None:
        seen.append("resumed")

    keeper = LeaseKeeper(
        renew,
        lease_s=6.0,
        on_lost=on_lost,
        on_pause=on_pause,
        on_resume=on_resume,
        resume=resume,
        monotonic=clock,
    )
    clock.now = 5.5
    assert await keeper.step() is Watchdog.PAUSE and seen == ["paused"]
    await asyncio.sleep(0)
    clock.now = 20.0  # the store is still out, long past the lease: paused, not stopped
    assert await keeper.step() is Watchdog.PAUSE and seen == ["paused"]
    await asyncio.sleep(0)
    store_up = True
    clock.now = 20.5
    await keeper.step()
    await asyncio.sleep(0)
    await asyncio.sleep(0)
    assert seen == ["paused", "resumed"] and keeper.paused is None
    assert await keeper.step() is Watchdog.ACT
    store_up = False
    clock.now = 30.0
    assert await keeper.step() is Watchdog.PAUSE
    moved = True
    await asyncio.sleep(0)
    await asyncio.sleep(0)
    assert seen[-1].startswith("lost: the store refused the renewal")
    assert await keeper.step() is Watchdog.KILL


def test_ray_nodes_become_hosts() -> None:
    nodes = [
        {"Alive": True, "Resources": {"CPU": 1.0}},  # the head: runs no role
        {"Alive": True, "Resources": {"baton-host-w1": 1.0, "baton-checkout-dev": 1.0}},
        {"Alive": False, "Resources": {"baton-host-w2": 1.0}},  # dead, then restarted:
        {"Alive": True, "Resources": {"baton-host-w2": 1.0}},
        {"Alive": False, "Resources": {"baton-host-w3": 1.0}},
    ]
    assert hosts_from_nodes(nodes, ["dev", "qa"]) == [
        HostFacts("w1", True, frozenset({"dev"})),
        HostFacts("w2", True, frozenset({"dev", "qa"})),
        HostFacts("w3", False, frozenset({"dev", "qa"})),
    ]


def test_the_resumed_turn_carries_the_task() -> None:
    text = resume_text("Fix the build", epoch=2, reason="ActorDiedError on host w1")
    assert text.endswith("Fix the build") and "epoch 2" in text and "w1" in text


def test_the_worker_declares_its_host_and_checkouts() -> None:
    argv = worker_argv("10.0.0.1:6379", "gpu-1", slots=["dev", "QA 2"], ray="ray", num_cpus=2)
    assert argv[:3] == ["ray", "start", "--address=10.0.0.1:6379"]
    resources = json.loads(argv[3].removeprefix("--resources="))
    assert resources == {
        "baton-host-gpu-1": 1.0,
        "baton-checkout-dev": 1.0,
        checkout_resource("QA 2"): 1.0,
    }
    assert "--block" in argv and "--num-cpus=2" in argv
    nodes = [{"Alive": True, "Resources": resources}]
    assert hosts_from_nodes(nodes, ["dev", "QA 2", "ops"]) == [
        HostFacts("gpu-1", True, frozenset({"dev", "QA 2"}))
    ]
    with pytest.raises(ConfigError, match="host name"):
        worker_argv("10.0.0.1:6379", "gpu box", ray="ray")


def test_the_cluster_section() -> None:
    from baton.cluster.config import STORE_ENV, ClusterConfig, cluster_config

    assert cluster_config({}, {}) is None
    raw = {"cluster": {"address": "10.0.0.5:6379", "store": "dbname=baton"}}
    assert cluster_config(raw, {}) == ClusterConfig("10.0.0.5:6379", "dbname=baton", 15.0)
    env = {STORE_ENV: "host=db dbname=baton password=x"}
    assert cluster_config(raw, env).store == env[STORE_ENV]  # type: ignore[union-attr]
    assert cluster_config(raw, {}).git_remote is None  # type: ignore[union-attr]
    remote = {"cluster": {**raw["cluster"], "git_remote": " ssh://10.0.0.5/srv/project "}}
    assert cluster_config(remote, {}).git_remote == "ssh://10.0.0.5/srv/project"  # type: ignore[union-attr]
    for bad, words in [
        ({"cluster": "x"}, "must be a table"),
        ({"cluster": {"store": "d"}}, "address"),
        ({"cluster": {"address": "h:1"}}, "store"),
        ({"cluster": {"address": "h:1", "store": "d", "lease_seconds": 1}}, "lease_seconds"),
        ({"cluster": {"address": "h:1", "store": "d", "leases": 3}}, "unknown keys leases"),
        ({"cluster": {"address": "h:1", "store": "d", "git_remote": ""}}, "git_remote"),
        ({"cluster": {"address": "h:1", "store": "d", "git_remote": 5}}, "git_remote"),
        ({"cluster": {"address": "h:1", "store": "d", "git_remote": "--upload-pack=x"}}, "git_"),
        ({"cluster": {"address": "h:1", "store": "d", "git_remote": "a\nb"}}, "git_remote"),
    ]:
        with pytest.raises(ConfigError, match=words):
            cluster_config(bad, {})


def test_two_teams_slots_of_one_name_are_two_actors() -> None:
    """Actor names are unique in Ray's namespace: a team's project id is part of them."""
    a, b = actor_name("dev", 1, "urn:uuid:a"), actor_name("dev", 1, "urn:uuid:b")
    assert a != b and a.endswith("-dev-e1") and b.endswith("-dev-e1")
    assert actor_name("dev", 1) == "baton-role-dev-e1"  # no project: the name of before
    assert actor_name("dev", 2, "urn:uuid:a") != a


def test_a_restored_credential_table_goes_on_with_its_generations() -> None:
    from baton.role_tools.credentials import Credentials, SlotGrant

    before = Credentials()
    old, live = before.issue("QA"), before.issue("QA")
    after = Credentials()
    after.restore(before.facts("QA"))
    assert after.check("QA", live.token) == SlotGrant("QA", live.generation)
    assert getattr(after.check("QA", old.token), "code", None) == "CREDENTIAL_REPLACED"
    assert after.issue("QA").generation == live.generation + 1
    assert getattr(after.check("QA", live.token), "code", None) == "CREDENTIAL_REPLACED"


def test_a_worker_joins_again_with_growing_pauses_until_a_node_runs_a_minute() -> None:
    from baton.cluster.worker import PAUSES, STEADY_S, restart_pause

    pauses = [restart_pause(None, 0.0)]
    for _ in range(7):
        pauses.append(restart_pause(pauses[-1], 2.0))
    assert pauses == [1.0, 2.0, 4.0, 8.0, 16.0, 30.0, 30.0, 30.0]
    assert restart_pause(30.0, STEADY_S) == PAUSES[0]


NODE = """
import os, signal, sys, time
log = sys.argv[1]
with open(log, "a") as out:
    out.write(f"{os.getpid()}\\n")
starts = len(open(log).read().split())
if starts < 3:
    sys.exit(7)  # the node exits on its own (a partition, say)
signal.signal(signal.SIGTERM, lambda *a: sys.exit(0))
while True:
    time.sleep(1)
"""


def test_baton_worker_joins_again_after_its_node_exits_and_stops_on_sigterm(
    tmp_path: Path,
) -> None:
    """Issue 30 item 5: after a partition ``baton worker`` joined no more (it exited)."""
    import signal
    import subprocess
    import sys
    import time

    log = tmp_path / "starts"
    script = tmp_path / "node.py"
    script.write_text(NODE)
    supervisor = subprocess.Popen(
        [
            sys.executable,
            "-c",
            "import sys; from baton.cluster.worker import supervise; "
            "sys.exit(supervise(sys.argv[1:], {'PATH': '/usr/bin:/bin'}))",
            sys.executable,
            str(script),
            str(log),
        ],
        stderr=subprocess.PIPE,
    )
    try:
        deadline = time.monotonic() + 60
        while not (log.exists() and len(log.read_text().split()) >= 3):
            assert supervisor.poll() is None, supervisor.stderr
            assert time.monotonic() < deadline, "the node was not started three times"
            time.sleep(0.1)  # another process's progress: nothing to wait on but its file
        supervisor.send_signal(signal.SIGTERM)
        assert supervisor.wait(timeout=30) == 0
    finally:
        if supervisor.poll() is None:
            supervisor.kill()
    assert supervisor.stderr is not None
    said = supervisor.stderr.read().decode()
    assert said.count("joining again") == 2, said
    last = int(log.read_text().split()[-1])
    assert (
        not Path(f"/proc/{last}").exists()
        or "zombie" in Path(f"/proc/{last}/status").read_text().lower()
    )
