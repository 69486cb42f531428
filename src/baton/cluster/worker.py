"""``baton worker``: a host joins the cluster, declaring the resources baton places by.

A worker is a Ray node started with ``ray start --address ADDR --block``, declaring
``baton-host-<NAME>`` (every role actor asks 0.01 of its host's resource, so it
runs there and nowhere else) and one ``baton-checkout-<SLOT>`` per role slot whose
checkout the host holds (none: the host may run any slot, checking out per task).
The command replaces itself with ``ray start`` (signals reach Ray directly) and
blocks while the node runs.
"""

from __future__ import annotations

import json
import shutil
import sys
from collections.abc import Sequence
from pathlib import Path

from baton.cluster.names import checkout_resource, host_resource
from baton.errors import ConfigError

__all__ = ["ray_executable", "worker_argv", "worker_resources"]


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
