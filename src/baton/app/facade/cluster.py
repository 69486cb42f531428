"""What the CLI and the web use of cluster mode as the surfaces see it.

The surfaces import these names from here, never from the core's modules, so the
core can move behind them (tests/test_architecture.py holds the rule).
"""

from baton.cluster.worker import supervise, worker_argv

__all__ = [
    "supervise",
    "worker_argv",
]
