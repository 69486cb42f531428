"""The multi-host test tier: several hosts on one machine, in network + PID namespaces.

Each host is a named network namespace with its own address on one switch
(a bridge inside its own namespace: nothing is added to the machine's root
namespace), and its own PID namespace and mount namespace (``unshare --pid
--fork --mount-proc``): Ray scans every process it can see, so two simulated
hosts must not see each other's processes. Every process of a host descends
from the host's init (pid 1 there), so

* killing a host (``Host.crash``) is one SIGKILL of its init: the kernel ends
  every process in that PID namespace, as a power cut would, and nothing can
  survive as an orphan;
* a partition is the host's link on the switch set down (then up again);
* the whole tier dies with the process that built it: each host's init is
  started with a parent-death signal, and :meth:`Tier.close` (always run, also
  on failure) then removes the namespaces.

Names: every namespace is ``baton-cluster-<run>-<host>``, the server user is
``baton-cluster``, PostgreSQL runs as cluster ``baton-cluster-pg``; nothing
without the prefix is touched (no ``ray stop``, no broad kills).

Addresses come from 198.18.0.0/24 (RFC 2544's benchmarking range): no host has
a default route, so no packet can leave the switch.
"""

from __future__ import annotations

import contextlib
import ctypes
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from tests.support.postgres import PostgresServer, ensure_user, postgres_unavailable

__all__ = [
    "PREFIX",
    "Host",
    "Tier",
    "cleanup_stale",
    "namespaces_unavailable",
    "pid_namespaces_unavailable",
    "services_unavailable",
    "tier_unavailable",
]

PREFIX = "baton-cluster-"
SUBNET = "198.18.0"
REDIS_PORT = 6380
RAY_PORT = 6379
RAY_NAMESPACE = "baton-cluster"
VENV_BIN = Path(sys.executable).parent

# Health checks tuned toward < 10 s node-death detection (Ray's defaults: a
# 3 s period, 10 s timeout and 5 misses, i.e. ~15-63 s). The GCS declares a
# raylet dead after ``failure_threshold`` missed checks, each ``period`` apart
# and each given ``timeout`` to answer: here 1 s x 3 + 1.5 s = ~4.5 s worst case.
HEALTH_CHECKS: Mapping[str, int] = {
    "health_check_initial_delay_ms": 1000,
    "health_check_period_ms": 1000,
    "health_check_timeout_ms": 1500,
    "health_check_failure_threshold": 3,
}

_INIT = r"""
import os, signal, sys
# pid 1 of a simulated host: reaps every orphan until SIGTERM (or SIGKILL from outside).
signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGCHLD, signal.SIGTERM, signal.SIGINT})
print("ready", flush=True)
while True:
    while True:
        try:
            pid, _ = os.waitpid(-1, os.WNOHANG)
        except ChildProcessError:
            break
        if pid == 0:
            break
    sig = signal.sigwaitinfo({signal.SIGCHLD, signal.SIGTERM, signal.SIGINT})
    if sig.si_signo != signal.SIGCHLD:
        sys.exit(0)
"""


def _pdeathsig() -> None:
    """preexec: SIGKILL this child when the tier's process dies (main thread only)."""
    libc = ctypes.CDLL(None, use_errno=True)
    libc.prctl(1, signal.SIGKILL)  # PR_SET_PDEATHSIG


def _ip(*args: str, check: bool = True) -> subprocess.CompletedProcess[str]:
    return subprocess.run(["ip", *args], check=check, capture_output=True, text=True, timeout=20)


def pid_namespaces_unavailable(prefix: Sequence[str] = ()) -> str | None:
    """Why ``unshare --pid --fork --mount-proc`` fails here (run under ``prefix``), or None."""
    unshared = subprocess.run(
        [*prefix, "unshare", "--pid", "--fork", "--mount-proc", "true"],
        capture_output=True,
        text=True,
        timeout=20,
        check=False,
    )
    if unshared.returncode != 0:
        return f"PID namespaces unavailable: {unshared.stderr.strip()[:200]}"
    return None


def namespaces_unavailable() -> str | None:
    """Why this machine cannot build hosts in network + PID namespaces, or ``None``."""
    if sys.platform != "linux":
        return "network namespaces need Linux"
    if os.geteuid() != 0:
        return "network namespaces need root (ip netns add)"
    for tool in ("ip", "unshare", "nsenter"):
        if shutil.which(tool) is None:
            return f"{tool} not found"
    probe = f"{PREFIX}probe-{os.getpid()}"
    made = _ip("netns", "add", probe, check=False)
    if made.returncode != 0:
        return f"network namespaces unavailable: {made.stderr.strip()[:200]}"
    try:
        unshared = pid_namespaces_unavailable(["ip", "netns", "exec", probe])
        if unshared is not None:
            return unshared
    finally:
        _ip("netns", "del", probe, check=False)
    return None


def services_unavailable() -> str | None:
    """Why the tier's services cannot start here (PostgreSQL, Redis, Ray missing), or ``None``."""
    reason = postgres_unavailable()
    if reason is not None:
        return reason
    if shutil.which("redis-server") is None:
        return "redis-server not found (apt-get install redis-server)"
    if not (VENV_BIN / "ray").exists():
        return "ray not installed (pip install 'baton[cluster]')"
    return None


def tier_unavailable() -> str | None:
    """Why the tier cannot run here (the skip reason), or ``None``."""
    return namespaces_unavailable() or services_unavailable()


def cleanup_stale() -> list[str]:
    """Remove tier namespaces left by a tier process that was killed outright.

    Only ``baton-cluster-*`` namespaces with no process left in them: a live
    tier (another xdist worker, another engineer's run) always has its inits.
    """
    removed: list[str] = []
    listing = _ip("netns", "list", check=False).stdout.split("\n")
    for line in listing:
        name = line.split(" ")[0]
        if not name.startswith(PREFIX):
            continue
        if _ip("netns", "pids", name, check=False).stdout.strip():
            continue
        if name.endswith("-sw"):
            # The switch has no process by design: stale only when no host of its run is left.
            run = name.removesuffix("-sw")
            if any(
                other.split(" ")[0].startswith(run + "-") and other.split(" ")[0] != name
                for other in listing
            ):
                continue
        _ip("netns", "del", name, check=False)
        removed.append(name)
    return removed


@dataclass
class Host:
    """One simulated machine: a network namespace, a PID+mount namespace, an address."""

    name: str
    netns: str
    address: str
    switch: str
    root: Path
    init: subprocess.Popen[bytes] | None = None
    logs: list[Path] = field(default_factory=list)

    @property
    def init_pid(self) -> int:
        """The init's pid as the machine sees it (the child of ``unshare``)."""
        assert self.init is not None
        children = Path(f"/proc/{self.init.pid}/task/{self.init.pid}/children").read_text().split()
        return int(children[0])

    def boot(self) -> None:
        self.root.mkdir(parents=True, exist_ok=True)
        script = self.root / "baton-cluster-init"
        script.write_text(_INIT)
        self.init = subprocess.Popen(
            [
                "ip",
                "netns",
                "exec",
                self.netns,
                "unshare",
                "--pid",
                "--fork",
                "--mount-proc",
                "--kill-child",
                sys.executable,
                str(script),
                self.name,
            ],
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,
            preexec_fn=_pdeathsig,
        )
        assert self.init.stdout is not None
        if self.init.stdout.readline().strip() != b"ready":
            raise RuntimeError(f"host {self.name}: init did not start")

    @property
    def up(self) -> bool:
        return self.init is not None and self.init.poll() is None

    def enter(self) -> list[str]:
        """The argv prefix that runs a command on this host."""
        return ["nsenter", "-t", str(self.init_pid), "-n", "-p", "-m", "--"]

    def spawn(
        self,
        argv: Sequence[str],
        *,
        env: Mapping[str, str] | None = None,
        log: str | None = None,
        stdout: int | None = None,
    ) -> subprocess.Popen[bytes]:
        """Start ``argv`` on this host; it dies with the host (and with the tier)."""
        out: object = stdout if stdout is not None else subprocess.DEVNULL
        if log is not None:
            path = self.root / f"{log}.log"
            self.logs.append(path)
            out = open(path, "ab")  # noqa: SIM115 - handed to the child
        return subprocess.Popen(
            [*self.enter(), *argv],
            env={**_base_env(), **(env or {})},
            stdin=subprocess.DEVNULL,
            stdout=out,
            stderr=subprocess.STDOUT if log else None,  # type: ignore[arg-type]
            preexec_fn=_pdeathsig,
        )

    def run(
        self, argv: Sequence[str], *, env: Mapping[str, str] | None = None, timeout: float = 120
    ) -> subprocess.CompletedProcess[str]:
        """Run ``argv`` on this host to completion (bounded by ``timeout``)."""
        return subprocess.run(
            [*self.enter(), *argv],
            env={**_base_env(), **(env or {})},
            capture_output=True,
            text=True,
            timeout=timeout,
            check=False,
        )

    def pids(self) -> list[int]:
        """Every process of this host (pids as the machine sees them), init included."""
        if not self.up:
            return []
        init = self.init_pid
        return [p for p in _ns_pids(self.netns) if p != init] + [init]

    def processes(self) -> list[str]:
        """``pid cmdline`` of every process on the host but its init (for orphan checks)."""
        if not self.up:
            return []
        init = self.init_pid
        own = os.readlink(f"/proc/{init}/ns/pid")
        lines = []
        for pid in _ns_pids(self.netns):
            try:
                if pid == init or os.readlink(f"/proc/{pid}/ns/pid") != own:
                    continue  # the init itself, or unshare/nsenter outside the host's PID ns
                cmd = Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode()
            except OSError:
                continue  # exited meanwhile
            lines.append(f"{pid} {cmd.strip()[:160]}")
        return lines

    def link(self, up: bool) -> None:
        """Connect or cut this host's cable on the switch (a partition)."""
        _ip("-n", self.switch, "link", "set", self.name, "up" if up else "down")

    def crash(self) -> float:
        """SIGKILL every process of the host at once; returns the time of the kill."""
        init = self.init_pid
        at = time.monotonic()
        os.kill(init, signal.SIGKILL)
        assert self.init is not None
        self.init.wait(timeout=30)
        return at

    def reboot(self) -> None:
        """A crashed host comes back (same address, fresh processes)."""
        self.boot()


def head_argv(host: str, address: str, temp: Path, *, runs_roles: bool) -> list[str]:
    """The tier's ``ray start --head`` (docs/cluster.md's guide gives the same flags:
    ``tests/cluster/test_operator_guide.py`` compares them)."""
    resources = {f"baton-host-{host}": 1} if runs_roles else {}
    return [
        str(VENV_BIN / "ray"),
        "start",
        "--head",
        f"--node-ip-address={address}",
        f"--port={RAY_PORT}",
        "--num-cpus=1",
        "--include-dashboard=false",
        "--disable-usage-stats",
        f"--temp-dir={temp}",
        "--object-store-memory=80000000",
        f"--resources={json.dumps(resources)}",
        f"--system-config={json.dumps(dict(HEALTH_CHECKS))}",
    ]


def _ns_pids(netns: str) -> list[int]:
    out = _ip("netns", "pids", netns, check=False).stdout.split()
    return [int(p) for p in out if p.isdigit()]


def _base_env() -> dict[str, str]:
    keep = ("PATH", "LANG", "LC_ALL", "HOME", "TMPDIR", "PYTHONPATH")
    env = {k: os.environ[k] for k in keep if k in os.environ}
    env["PATH"] = f"{VENV_BIN}:{env.get('PATH', '/usr/bin:/bin')}"
    env["RAY_USAGE_STATS_ENABLED"] = "0"
    env["PYTHONDONTWRITEBYTECODE"] = "1"
    return env


@dataclass
class Tier:
    """Hosts, a switch and the services on them; always :meth:`close` (a context manager)."""

    hosts: Sequence[str] = ("db", "head", "w1", "w2", "w3")
    root: Path | None = None
    run: str = field(default_factory=lambda: f"{os.getpid():x}{int(time.time()) % 100000:05d}")
    machines: dict[str, Host] = field(default_factory=dict, init=False)
    postgres: PostgresServer | None = field(default=None, init=False)
    _owned_root: bool = field(default=False, init=False)

    @property
    def switch(self) -> str:
        return f"{PREFIX}{self.run}-sw"

    def __getitem__(self, name: str) -> Host:
        return self.machines[name]

    def open(self) -> Tier:
        cleanup_stale()
        if self.root is None:
            # Short on purpose: Ray's unix sockets live under it (AF_UNIX paths <= 107 bytes).
            self.root = Path(tempfile.gettempdir()) / f"{PREFIX}{self.run}"
            self.root.mkdir(mode=0o755)
            self._owned_root = True
        os.chmod(self.root, 0o755)  # the server user traverses it
        ensure_user()
        _ip("netns", "add", self.switch)
        _ip("-n", self.switch, "link", "add", "br0", "type", "bridge")
        _ip("-n", self.switch, "link", "set", "br0", "up")
        for index, name in enumerate(self.hosts, start=10):
            netns = f"{PREFIX}{self.run}-{name}"
            _ip("netns", "add", netns)
            _ip(
                "link",
                "add",
                "eth0",
                "netns",
                netns,
                "type",
                "veth",
                "peer",
                "name",
                name,
                "netns",
                self.switch,
            )
            _ip("-n", self.switch, "link", "set", name, "master", "br0")
            _ip("-n", self.switch, "link", "set", name, "up")
            address = f"{SUBNET}.{index}"
            _ip("-n", netns, "addr", "add", f"{address}/24", "dev", "eth0")
            _ip("-n", netns, "link", "set", "eth0", "up")
            _ip("-n", netns, "link", "set", "lo", "up")
            host = Host(name, netns, address, self.switch, self.root / name)
            self.machines[name] = host
            host.boot()
        return self

    def close(self) -> None:
        """Stop everything the tier started and remove its namespaces; idempotent."""
        if self.postgres is not None:
            with contextlib.suppress(Exception):
                self.postgres.stop()
        for host in self.machines.values():
            if host.up:
                with contextlib.suppress(Exception):
                    host.crash()
        for host in self.machines.values():
            for pid in _ns_pids(host.netns):  # nothing should be left; never leave it running
                with contextlib.suppress(ProcessLookupError):
                    os.kill(pid, signal.SIGKILL)
            _ip("netns", "del", host.netns, check=False)
        _ip("netns", "del", self.switch, check=False)
        self.machines.clear()
        if self._owned_root and self.root is not None and not os.environ.get("BATON_CLUSTER_KEEP"):
            shutil.rmtree(self.root, ignore_errors=True)

    def __enter__(self) -> Tier:
        try:
            return self.open()
        except BaseException:
            self.close()
            raise

    def __exit__(self, *exc: object) -> None:
        self.close()

    # --- services --------------------------------------------------------

    def start_postgres(self, host: str = "db") -> PostgresServer:
        assert self.root is not None
        machine = self[host]
        self.postgres = PostgresServer(
            self.root / "pg",
            listen=machine.address,
            prefix=machine.enter(),
            trust=f"{SUBNET}.0/24",
        ).start()
        return self.postgres

    def start_redis(self, host: str = "db") -> str:
        machine = self[host]
        data = machine.root / "redis"
        data.mkdir(parents=True, exist_ok=True)
        proc = machine.spawn(
            [
                "redis-server",
                "--bind",
                machine.address,
                "--port",
                str(REDIS_PORT),
                "--save",
                "",
                "--appendonly",
                "no",
                "--protected-mode",
                "no",
                "--dir",
                str(data),
            ],
            log="redis",
        )
        address = f"{machine.address}:{REDIS_PORT}"
        _wait_for(
            lambda: (
                machine.run(
                    ["redis-cli", "-h", machine.address, "-p", str(REDIS_PORT), "ping"], timeout=5
                ).stdout.strip()
                == "PONG"
            ),
            what="redis",
            proc=proc,
        )
        return address

    def ray_env(self, *, redis: str | None) -> dict[str, str]:
        env = {"RAY_external_storage_namespace": f"{PREFIX}{self.run}"}
        if redis is not None:
            env["RAY_REDIS_ADDRESS"] = redis
        return env

    def start_ray_head(
        self, host: str = "head", *, redis: str | None = None, runs_roles: bool = True
    ) -> str:
        """``ray start --head`` (GCS fault tolerance when ``redis`` is given); returns its address.

        ``runs_roles=False``: the head declares no ``baton-host-*`` resource (a coordinator
        host that runs no role actor)."""
        machine = self[host]
        out = machine.run(
            head_argv(host, machine.address, machine.root / "r", runs_roles=runs_roles),
            env=self.ray_env(redis=redis),
            timeout=180,
        )
        if out.returncode != 0:
            raise RuntimeError(
                f"ray head on {host} failed: {out.stdout[-2000:]}{out.stderr[-2000:]}"
            )
        return f"{machine.address}:{RAY_PORT}"

    def start_ray_worker(self, host: str, head: str, *, redis: str | None = None) -> None:
        """``ray start`` joining ``head``, declaring the host's custom resource."""
        machine = self[host]
        temp = machine.root / "r"
        out = machine.run(
            [
                str(VENV_BIN / "ray"),
                "start",
                f"--address={head}",
                f"--node-ip-address={machine.address}",
                "--num-cpus=1",
                "--disable-usage-stats",
                f"--temp-dir={temp}",
                "--object-store-memory=80000000",
                f"--resources={json.dumps({f'baton-host-{host}': 1})}",
            ],
            env=self.ray_env(redis=redis),
            timeout=180,
        )
        if out.returncode != 0:
            raise RuntimeError(
                f"ray worker on {host} failed: {out.stdout[-2000:]}{out.stderr[-2000:]}"
            )

    def python(
        self,
        host: str,
        script: Path,
        *args: str,
        env: Mapping[str, str] | None = None,
        timeout: float = 300,
    ) -> dict[str, object]:
        """Run a Python script on a host; its last stdout line is a JSON object, returned."""
        done = self[host].run([sys.executable, str(script), *args], env=env, timeout=timeout)
        lines = [line for line in done.stdout.splitlines() if line.startswith("{")]
        if done.returncode != 0 or not lines:
            raise RuntimeError(
                f"{script.name} on {host} exited {done.returncode}:\n{done.stdout[-3000:]}\n{done.stderr[-3000:]}"
            )
        result: dict[str, object] = json.loads(lines[-1])
        return result


def _wait_for(
    check: object, *, what: str, proc: subprocess.Popen[bytes] | None = None, timeout: float = 30
) -> None:
    """Wait for an external service with a bounded back-off."""
    deadline = time.monotonic() + timeout
    pause = 0.05
    while time.monotonic() < deadline:
        if proc is not None and proc.poll() is not None:
            raise RuntimeError(f"{what} exited {proc.returncode}")
        with contextlib.suppress(Exception):
            if check():  # type: ignore[operator]
                return
        time.sleep(pause)
        pause = min(pause * 2, 1.0)
    raise RuntimeError(f"{what} not ready within {timeout} s")


@contextlib.contextmanager
def tier(**kwargs: object) -> Iterator[Tier]:
    """``with tier() as t:`` — build, yield, always tear down."""
    t = Tier(**kwargs)  # type: ignore[arg-type]
    with t:
        yield t


def next_json(proc: subprocess.Popen[bytes]) -> dict[str, object]:
    """The next JSON object a probe printed (Ray prints its own notices on stdout too)."""
    assert proc.stdout is not None
    for raw in proc.stdout:
        line = raw.decode("utf-8", "replace").strip()
        if line.startswith("{"):
            result: dict[str, object] = json.loads(line)
            return result
    raise RuntimeError(f"probe exited {proc.wait()} without a result")
