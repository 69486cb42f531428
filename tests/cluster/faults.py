"""What the fault tests share: the coordinator process on the head host, and worker hosts
kept joined by a supervisor (a worker that died or was declared dead is started again).

:class:`Driver` speaks JSON lines with :mod:`tests.cluster.tier_driver` (a Ray driver over
the PostgreSQL store). :class:`Workers` runs ``baton worker`` on each worker host and,
like an init system's restart policy, starts it again whenever it exits while its host is
up and not under a fault: a raylet that timed out at start-up (under load its dashboard
agent can miss the port-file deadline and the node never joins), a node the GCS declared
dead after a partition (its raylet exits once the link is back), a host rebooted after a
kill. Every start is logged on the host (``worker.log``) and counted.
"""

from __future__ import annotations

import contextlib
import json
import os
import queue
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from tests.cluster.flow_checks import Kill, counters
from tests.cluster.tier import VENV_BIN, Tier, _pdeathsig

__all__ = ["DRIVER", "REPO", "Driver", "Workers", "until"]

REPO = Path(__file__).resolve().parents[2]
DRIVER = Path(__file__).with_name("tier_driver.py")


class Driver:
    """The coordinator process on the head host, spoken to in JSON lines."""

    def __init__(self, t: Tier, head: str, dsn: str) -> None:
        assert t.root is not None
        env = {
            "PATH": f"{VENV_BIN}:/usr/bin:/bin",
            "PYTHONPATH": str(REPO),
            "RAY_USAGE_STATS_ENABLED": "0",
            "HOME": os.environ.get("HOME", "/root"),
        }
        self.log = open(t.root / "driver.log", "ab")  # noqa: SIM115 - closed in close()
        self.proc = subprocess.Popen(
            [*t["head"].enter(), sys.executable, str(DRIVER), head, dsn, str(t.root / "work")],
            env=env,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=self.log,
            preexec_fn=_pdeathsig,
        )
        self.seen: list[dict[str, Any]] = []
        self.lines: queue.Queue[dict[str, Any] | None] = queue.Queue()
        threading.Thread(target=self._read, daemon=True).start()
        self.expect("ready", timeout=180)

    def _read(self) -> None:
        assert self.proc.stdout is not None
        for raw in self.proc.stdout:
            text = raw.decode("utf-8", "replace").strip()
            if text.startswith("{"):
                self.lines.put(json.loads(text))
        self.lines.put(None)

    def send(self, **command: Any) -> None:
        assert self.proc.stdin is not None
        self.proc.stdin.write((json.dumps(command) + "\n").encode())
        self.proc.stdin.flush()

    def expect(self, op: str, timeout: float = 240) -> dict[str, Any]:
        """The next line with ``op`` (earlier lines are kept in ``seen``)."""
        for line in self.seen:
            if line["op"] == op:
                self.seen.remove(line)
                return line
        deadline = time.monotonic() + timeout
        while (left := deadline - time.monotonic()) > 0:
            try:
                message = self.lines.get(timeout=left)
            except queue.Empty:
                break
            if message is None:
                break
            if message["op"] == op:
                return message
            self.seen.append(message)
        self.log.flush()
        tail = Path(self.log.name).read_bytes()[-4000:].decode("utf-8", "replace")
        raise AssertionError(
            f"driver: no {op!r} (exit {self.proc.poll()}); seen {self.seen}\n"
            f"driver.log ends:\n{tail}"
        )

    def close(self) -> None:
        if self.proc.poll() is None:
            try:
                self.send(op="quit")
                self.proc.wait(timeout=60)
            except (OSError, subprocess.TimeoutExpired):
                self.proc.kill()
                self.proc.wait()
        self.log.close()


def worker_command(
    head: str, host: str, address: str, temp: Path, slots: Sequence[str] = ()
) -> list[str]:
    """The tier's ``baton worker`` (the options docs/cluster.md's guide uses, and the
    sizing ones: ``tests/cluster/test_operator_guide.py`` checks both against the CLI)."""
    return [
        str(VENV_BIN / "baton"),
        "worker",
        f"--address={head}",
        f"--host={host}",
        f"--node-ip={address}",
        "--num-cpus=1",
        f"--temp-dir={temp}",
        "--object-store-bytes=80000000",
        *(f"--slot={s}" for s in slots),
    ]


@dataclass
class _Worker:
    host: str
    slots: Sequence[str]
    proc: subprocess.Popen[bytes] | None = None
    paused: bool = False
    starts: int = 0


@dataclass
class Workers:
    """``baton worker`` on each worker host, started again whenever it exits (see above)."""

    tier: Tier
    head: str
    redis: str | None = None
    period: float = 0.5
    _workers: dict[str, _Worker] = field(default_factory=dict)
    _lock: threading.Lock = field(default_factory=threading.Lock)
    _stop: threading.Event = field(default_factory=threading.Event)
    _thread: threading.Thread | None = None

    def add(self, host: str, *slots: str) -> None:
        with self._lock:
            worker = self._workers[host] = _Worker(host, slots)
            self._start(worker)
        if self._thread is None:
            self._thread = threading.Thread(target=self._watch, daemon=True, name="workers")
            self._thread.start()

    def _start(self, worker: _Worker) -> None:
        t = self.tier[worker.host]
        worker.starts += 1
        worker.proc = t.spawn(
            worker_command(self.head, worker.host, t.address, t.root / "r", worker.slots),
            env={
                "PYTHONPATH": str(REPO),
                "HOME": str(t.root / "home"),
                **self.tier.ray_env(redis=self.redis),
            },
            log="worker",
        )

    def _watch(self) -> None:
        while not self._stop.wait(self.period):
            with self._lock:
                for worker in self._workers.values():
                    if worker.paused or not self.tier[worker.host].up:
                        continue
                    if worker.proc is None or worker.proc.poll() is not None:
                        self._start(worker)

    def pause(self, host: str) -> None:
        """A fault is under way on ``host``: leave its worker alone."""
        with self._lock:
            self._workers[host].paused = True

    def resume(self, host: str) -> None:
        """The fault is over: a worker that exited meanwhile is started again."""
        with self._lock:
            self._workers[host].paused = False

    def starts(self) -> dict[str, int]:
        with self._lock:
            return {w.host: w.starts for w in self._workers.values()}

    def close(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=5)
        for worker in self._workers.values():
            if worker.proc is not None and worker.proc.poll() is None:
                with contextlib.suppress(OSError):
                    worker.proc.kill()


def until(predicate: Any, bound: float, pause: float = 0.1) -> float | None:
    """Seconds until ``predicate()`` held, or None past ``bound`` (another host's processes:
    nothing to wait on but their table)."""
    start = time.monotonic()
    while time.monotonic() - start < bound:
        if predicate():
            return time.monotonic() - start
        time.sleep(pause)
    return None


def team_flow(
    t: Tier,
    head: str,
    pg: Any,
    *,
    hub_on: str | None = None,
    workers: Sequence[str] = (),
    name: str = "repo",
    task: str | None = None,
    during: Callable[[Path], dict[str, Any]] | None = None,
    kills: Sequence[Kill] = (),
    hub_address: str | None = None,
) -> dict[str, Any]:
    """The README's team flow with ``baton up`` on the head host as the coordinator and
    the roles in role actors on the workers: PM delegates to QA and OPS, their reports come
    back through the role tools, the review is answered with ``baton answer`` and the next
    ``baton up`` applies it. Returns the roles' placements (slot, host, state).

    ``hub_on``: the host whose address is ``[cluster] hub_address`` (the role tools over
    HTTP); the hub's unix socket is then hidden on ``workers`` (an empty tmpfs over the
    project's ``.baton/mcp`` in their mount namespaces), as on machines that share no
    filesystem with the coordinator, so a report filed there came over HTTP.

    ``during(repo)`` runs while the first ``baton up`` does (a fault in mid-flow); what it
    returns is in the result as ``during``. ``kills``: the coordinator (the first
    ``baton up``) is SIGKILLed at each of these moments in turn and started again 2 s
    later (:func:`kill_coordinator`). ``hub_address`` overrides ``hub_on``'s address (an
    address of the head host that a Ray partition leaves reachable)."""
    from baton.cluster.team_factory import project_id
    from baton.store.pg import PgStore
    from tests.cli.test_team_loop import TASK
    from tests.support.project import baton_in, project_env, without_isolation

    assert t.root is not None
    work = t.root / "work"
    work.mkdir(exist_ok=True)
    os.chmod(work, 0o777)
    repo = work / name
    repo.mkdir()
    subprocess.run(["git", "init", "-q", str(repo)], check=True)

    def baton(*args: str, timeout: float = 600) -> subprocess.CompletedProcess[str]:
        return t["head"].run(
            [str(VENV_BIN / "baton"), "-C", str(repo), *args],
            env={**project_env(repo), "PATH": f"{VENV_BIN}:/usr/bin:/bin"},
            timeout=timeout,
        )

    assert baton_in(repo, "init").returncode == 0
    without_isolation(repo)  # a worker's worktrees: docs/cluster.md
    (repo / "counters").mkdir(mode=0o777)  # flow_checks.counted_task's side-effect counters
    hub_at = hub_address or (t[hub_on].address if hub_on is not None else None)
    hub = f'hub_address = "{hub_at}"\n' if hub_at is not None else ""
    with (repo / "baton.toml").open("a") as toml:
        toml.write(
            f'\n[cluster]\naddress = "{head}"\nstore = "{pg.tcp_dsn()}"\nlease_seconds = 15\n' + hub
        )
    if hub_on is not None:
        hidden = repo / ".baton" / "mcp"
        hidden.mkdir(mode=0o700, exist_ok=True)
        for name in workers:
            mounted = t[name].run(["mount", "-t", "tmpfs", "-o", "size=64k", "tmpfs", str(hidden)])
            assert mounted.returncode == 0, mounted.stderr
    (repo / "TASK.md").write_text(task or TASK)
    made = baton_in(
        repo, "task", "new", "--to", "PM", "--subject", "Release", "--body-file", "TASK.md"
    )
    assert made.returncode == 0, made.stderr
    seen_during: dict[str, Any] = {}
    up_argv = [str(VENV_BIN / "baton"), "-C", str(repo), "up", "--until-idle"]
    up_env = {**project_env(repo), "PATH": f"{VENV_BIN}:/usr/bin:/bin"}
    for n, kill in enumerate(kills):
        running = t["head"].spawn(up_argv, env=up_env, log=f"up-{name}-k{n}")
        try:
            seen_during.setdefault("kills", []).append(kill_coordinator(t, repo, running, kill))
        finally:
            if running.poll() is None:
                running.kill()
            running.wait(timeout=60)
        time.sleep(2)  # an operator's restart policy: up again 2 s later
    if during is None:
        up = baton("up", "--until-idle", "--json")
    else:
        running = t["head"].spawn(up_argv, env=up_env, log=f"up-{name}")
        try:
            seen_during = during(repo)
            code = running.wait(timeout=600)
        finally:
            if running.poll() is None:
                running.kill()
        log = (t["head"].root / f"up-{name}.log").read_text(errors="replace")
        up = subprocess.CompletedProcess(running.args, code, log, log)
    assert up.returncode == 0, (up.stdout[-3000:], up.stderr[-3000:])
    assert len(list((repo / "fcop" / "reports").glob("REPORT-*.md"))) == 3
    store = PgStore.open(pg.socket_dsn())
    try:
        holders = [r for r in store.list_runs(limit=200) if r.kind == "role-holder"]
        team = [r for r in holders if r.meta.get("role") is not None and Path(r.cwd) == repo]
        turns = {r.run_id: [e.type for e in store.iter_events(r.run_id)] for r in team}
        slots = sorted({str(r.meta.get("slot")) for r in team})
        project = project_id(repo)  # this flow's rows only: every flow shares the store
        placements = store.read_tx(
            lambda tx: tx.all(
                "SELECT slot, host, state, epoch FROM cluster_placements WHERE project = ?"
                " ORDER BY slot",
                (project,),
            )
        )
        calls = store.read_tx(
            lambda tx: tx.all(
                "SELECT task_id, tool, state, updated_at FROM cluster_tool_calls"
                " WHERE project = ? ORDER BY created_at",
                (project,),
            )
        )
    finally:
        store.close()
    assert {str(r.meta.get("role")) for r in team} == {"OPS", "PM", "QA"}
    status = json.loads(baton("status", "--json").stdout)
    assert status["board"]["counts"]["done"] == 2 and status["board"]["counts"]["review"] == 1
    reviews = [r for r in status["pending_reviews"] if r["status"] == "pending"]
    assert len(reviews) == 1, status["pending_reviews"]
    answer = baton("answer", reviews[0]["request_id"], "--accept", "--reason", "ship it")
    assert answer.returncode == 0, answer.stderr
    again = baton("up", "--until-idle")
    assert again.returncode == 0, again.stderr[-3000:]
    status = json.loads(baton("status", "--json").stdout)
    assert status["board"]["counts"]["done"] == 3 and status["board"]["counts"]["review"] == 0
    return {
        "repo": repo,
        "placements": [tuple(p[:3]) for p in placements if p[0] in slots],
        "epochs": {p[0]: p[3] for p in placements if p[0] in slots},
        "holders": [
            {k: r.meta.get(k) for k in ("role", "slot", "host", "epoch")}
            | {"run_id": r.run_id, "turns": turns[r.run_id].count("turn.completed")}
            for r in team
        ],
        "holder_hosts": sorted({str(r.meta.get("host")) for r in team}),
        "during": seen_during,
        "calls": [tuple(c) for c in calls],
    }


def cmdline(pid: int) -> bytes:
    """A process's argv, NUL-separated (empty once it exited)."""
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes()
    except OSError:
        return b""  # exited meanwhile


def kill_coordinator(
    t: Tier, repo: Path, running: subprocess.Popen[bytes], kill: Kill
) -> dict[str, Any]:
    """SIGKILL the ``baton up`` of ``repo`` on the head at ``kill``'s moment (if it still
    runs then): ``kill.after`` seconds after its start, or, for a ``filing`` kill, that long
    after a side-effect counter grew (a step just ran: its report is being filed)."""
    start = time.monotonic()
    if kill.filing:
        before = sum(len(v) for v in counters(repo).values())
        grew = until(
            lambda: (
                running.poll() is not None or sum(len(v) for v in counters(repo).values()) > before
            ),
            120,
            pause=0.05,
        )
        assert grew is not None, "no step ran within 120 s"
    moment = time.monotonic() + kill.after
    while time.monotonic() < moment and running.poll() is None:
        time.sleep(0.02)
    if running.poll() is not None:
        return {"at_s": None, "filing": kill.filing, "killed": False}
    marker = f"\0-C\0{repo}\0up\0".encode()
    pids = [p for p in t["head"].pids() if marker in cmdline(p)]
    for pid in pids:
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGKILL)
    running.wait(timeout=60)
    return {"at_s": round(time.monotonic() - start, 2), "filing": kill.filing, "killed": bool(pids)}
