"""``baton worker``: a host joins the cluster, declaring the resources baton places by.

A worker is a Ray node started with ``ray start --address ADDR --block``, declaring
``baton-host-<NAME>`` (every role actor asks 0.01 of its host's resource, so it
runs there and nowhere else) and one ``baton-checkout-<SLOT>`` per role slot whose
checkout the host holds (none: the host may run any slot, checking out per task).
The command runs ``ray start`` as its child and blocks while the node runs; when the
node exits on its own (the head declared it dead after a partition: its raylet exits
once the link is back; the head restarted; a crash), it joins again after a pause of 1 s,
doubling up to 30 s while the node keeps failing fast and back to 1 s once a node ran a
minute (:func:`restart_pause`): a worker reconnects by itself, no restart policy needed
around it. SIGTERM, SIGINT or SIGHUP stop the node and the command (``--once``: exit
with the node, as before).
"""

from __future__ import annotations

import json
import logging
import shutil
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Final

from baton.cluster.names import checkout_resource, host_resource
from baton.errors import ConfigError

__all__ = ["ray_executable", "restart_pause", "supervise", "worker_argv", "worker_resources"]

log = logging.getLogger(__name__)

PAUSES: Final = (1.0, 30.0)
"""The first pause before joining again, and the longest (doubling in between)."""
STEADY_S: Final = 60.0
"""A node that ran this long was healthy: the next failure starts the pauses over."""


def worker_resources(host: str, slots: Sequence[str]) -> dict[str, float]:
    resources = {host_resource(host): 1.0}
    resources.update({checkout_resource(s): 1.0 for s in slots})
    return resources


def ray_executable() -> str:
    """Ray's ``ray`` next to this Python (the venv that has ``baton[cluster]``)."""
    beside = Path(sys.executable).with_name("ray")
    if beside.exists():
        return str(beside)
    found = shutil.which("ray")
    if found is None:
        raise ConfigError("ray not found: pip install 'baton[cluster]'")
    return found


def worker_argv(
    address: str,
    host: str,
    *,
    slots: Sequence[str] = (),
    node_ip: str | None = None,
    num_cpus: int | None = None,
    temp_dir: Path | None = None,
    object_store_bytes: int | None = None,
    ray: str | None = None,
) -> list[str]:
    """The ``ray start`` command line of one worker host (blocking in the foreground)."""
    if not address or not host:
        raise ConfigError("baton worker needs --address and --host")
    argv = [
        ray or ray_executable(),
        "start",
        f"--address={address}",
        f"--resources={json.dumps(worker_resources(host, slots), sort_keys=True)}",
        "--disable-usage-stats",
        "--block",
    ]
    if node_ip is not None:
        argv.append(f"--node-ip-address={node_ip}")
    if num_cpus is not None:
        argv.append(f"--num-cpus={num_cpus}")
    if temp_dir is not None:
        argv.append(f"--temp-dir={temp_dir}")
    if object_store_bytes is not None:
        argv.append(f"--object-store-memory={object_store_bytes}")
    return argv


def restart_pause(previous: float | None, ran_s: float) -> float:
    """The pause before joining again, after a node that ran ``ran_s`` seconds exited."""
    if previous is None or ran_s >= STEADY_S:
        return PAUSES[0]
    return min(previous * 2, PAUSES[1])


def supervise(argv: Sequence[str], env: Mapping[str, str], *, once: bool = False) -> int:
    """Run the node (``argv``: :func:`worker_argv`) and join again whenever it exits on
    its own; a stop signal ends it (the node first). Returns the last node's exit code."""
    stop = threading.Event()
    current: list[subprocess.Popen[bytes]] = []

    def on_signal(signum: int, frame: object) -> None:
        stop.set()
        for proc in current:
            if proc.poll() is None:
                proc.send_signal(signal.SIGTERM)

    for sig in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP):
        signal.signal(sig, on_signal)
    pause: float | None = None
    while True:
        started = time.monotonic()
        proc = subprocess.Popen(list(argv), env=dict(env))
        current[:] = [proc]
        code = proc.wait()
        if once or stop.is_set():
            return code
        pause = restart_pause(pause, time.monotonic() - started)
        print(
            f"baton worker: the node exited (code {code}); joining again in {pause:g} s",
            file=sys.stderr,
            flush=True,
        )
        if stop.wait(pause):  # a stop signal while waiting ends it
            return code
