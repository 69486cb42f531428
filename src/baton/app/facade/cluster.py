"""What the CLI and the web use of cluster mode as the surfaces see it."""

from baton.cluster.worker import supervise, worker_argv

__all__ = [
    "supervise",
    "worker_argv",
]
