"""Wait for a ``baton worker`` to join a Ray cluster (it takes seconds: a test that places
a role right after starting the worker would find no host)."""

from __future__ import annotations

import subprocess
import sys

__all__ = ["wait_for_host"]


def wait_for_host(address: str, host: str, timeout: float = 120) -> None:
    """Block until worker ``host`` has joined the Ray cluster at ``address`` (its own driver,
    in a child process: the test process stays out of Ray)."""
    probe = (
        "import sys, time, ray\n"
        "ray.init(address=sys.argv[1], logging_level='ERROR', log_to_driver=False)\n"
        "deadline = time.monotonic() + float(sys.argv[3])\n"
        "key = 'baton-host-' + sys.argv[2]\n"
        "while not any(n.get('Alive') and key in (n.get('Resources') or {}) for n in ray.nodes()):\n"
        "    if time.monotonic() > deadline: sys.exit(1)\n"
        "    time.sleep(0.5)\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", probe, address, host, str(timeout)],
        capture_output=True,
        text=True,
        timeout=timeout + 60,
        check=False,
    )
    assert done.returncode == 0, f"worker {host} never joined: {done.stderr[-2000:]}"
