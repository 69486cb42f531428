"""A Ray cluster on localhost for one test: a head and ``baton worker`` nodes, each in its
own PID namespace, all torn down by the test (never ``ray stop``: it is machine-wide).

Each node runs under ``unshare --pid --fork --mount-proc --kill-child``: Ray's
processes are the namespace's, so killing the node's ``unshare`` (SIGKILL, with a
parent-death signal as the net) ends every process of that node and nothing else
on the machine. The network is the machine's loopback.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

from tests.cluster.tier import HEALTH_CHECKS, VENV_BIN, _pdeathsig, pid_namespaces_unavailable

__all__ = ["LocalRay", "local_ray_unavailable"]


def local_ray_unavailable() -> str | None:
    if sys.platform != "linux":
        return "PID namespaces need Linux"
    if os.geteuid() != 0:
        return "PID namespaces need root (unshare --pid)"
    if shutil.which("unshare") is None:
        return "unshare not found"
    if not (VENV_BIN / "ray").exists():
        return "ray not installed (pip install 'baton[cluster]')"
    return pid_namespaces_unavailable()


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
        return port


@dataclass
class LocalRay:
    """``with LocalRay() as ray_: ray_.worker("w1")`` — the head starts on enter."""

    root: Path = field(default_factory=lambda: Path(tempfile.mkdtemp(prefix="baton-ray-")))
    port: int = field(default_factory=_free_port)
    nodes: dict[str, subprocess.Popen[bytes]] = field(default_factory=dict)

    @property
    def address(self) -> str:
        return f"127.0.0.1:{self.port}"

    def _env(self) -> dict[str, str]:
        keep = ("PATH", "LANG", "LC_ALL", "HOME", "TMPDIR", "PYTHONPATH")
        env = {k: os.environ[k] for k in keep if k in os.environ}
        env["PATH"] = f"{VENV_BIN}:{env.get('PATH', '/usr/bin:/bin')}"
        env["RAY_USAGE_STATS_ENABLED"] = "0"
        return env

    def _node(self, name: str, argv: list[str]) -> subprocess.Popen[bytes]:
        log = open(self.root / f"{name}.log", "ab")  # noqa: SIM115 - handed to the child
        proc = subprocess.Popen(
            ["unshare", "--pid", "--fork", "--mount-proc", "--kill-child", *argv],
            env=self._env(),
            stdin=subprocess.DEVNULL,
            stdout=log,
            stderr=subprocess.STDOUT,
            preexec_fn=_pdeathsig,
        )
        log.close()
        self.nodes[name] = proc
        return proc

    def start_head(self) -> None:
        self._node(
            "head",
            [
                str(VENV_BIN / "ray"),
                "start",
                "--head",
                "--block",
                "--node-ip-address=127.0.0.1",
                f"--port={self.port}",
                "--num-cpus=1",
                "--include-dashboard=false",
                "--disable-usage-stats",
                f"--temp-dir={self.root / 'head'}",
                "--object-store-memory=80000000",
                f"--system-config={json.dumps(dict(HEALTH_CHECKS))}",
            ],
        )

    def worker(self, host: str, *slots: str) -> subprocess.Popen[bytes]:
        """``baton worker --address … --host HOST`` (the command under test) on its own node."""
        argv = [
            str(VENV_BIN / "baton"),
            "worker",
            f"--address={self.address}",
            f"--host={host}",
            "--node-ip=127.0.0.1",
            "--num-cpus=1",
            f"--temp-dir={self.root / host}",
        ]
        for slot in slots:
            argv.append(f"--slot={slot}")
        return self._node(host, argv)

    def kill(self, name: str) -> float:
        """SIGKILL one node (every process of its PID namespace); returns when, monotonic."""
        proc = self.nodes[name]
        at = time.monotonic()
        with contextlib.suppress(ProcessLookupError):
            proc.send_signal(signal.SIGKILL)
        proc.wait(timeout=30)
        return at

    def log(self, name: str) -> str:
        path = self.root / f"{name}.log"
        return path.read_text(errors="replace")[-3000:] if path.exists() else ""

    def close(self) -> None:
        for name in list(self.nodes):
            if self.nodes[name].poll() is None:
                self.kill(name)
        self.nodes.clear()
        if not os.environ.get("BATON_CLUSTER_KEEP"):
            shutil.rmtree(self.root, ignore_errors=True)

    def __enter__(self) -> LocalRay:
        try:
            self.start_head()
        except BaseException:
            self.close()
            raise
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


@contextlib.contextmanager
def local_ray() -> Iterator[LocalRay]:
    with LocalRay() as cluster:
        yield cluster
