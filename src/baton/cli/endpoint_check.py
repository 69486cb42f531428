"""Is the model server a profile points at listening? One TCP connect, before a launch.

An agent whose model endpoint is down retries for a minute or more and then dies with
its own multi-line error dump. When the profile names the endpoint (``endpoint =`` in
``baton.toml``), baton can say it in one line before starting anything: a refused or
unresolvable address is certain; a connect that takes longer than the timeout is
reported as such (a slow server may still answer the agent).
"""

from __future__ import annotations

import socket
from typing import Final
from urllib.parse import urlsplit

__all__ = ["CONNECT_TIMEOUT_S", "unreachable"]

CONNECT_TIMEOUT_S: Final = 3.0


def unreachable(endpoint: str, *, timeout: float = CONNECT_TIMEOUT_S) -> str | None:
    """Why nothing answers at ``endpoint`` (``"connection refused"`` …), or None if it connects."""
    parts = urlsplit(endpoint)
    host = parts.hostname
    if not host:
        return "the URL names no host"
    try:
        port = parts.port or (443 if parts.scheme == "https" else 80)
    except ValueError:
        return "the URL's port is not a number"
    try:
        with socket.create_connection((host, port), timeout=timeout):
            return None
    except ConnectionRefusedError:
        return f"connection refused on {host}:{port}: no server listens there"
    except socket.gaierror:
        return f"the host name {host} does not resolve"
    except TimeoutError:
        return f"no answer from {host}:{port} within {timeout:g}s"
    except OSError as exc:
        return (exc.strerror or str(exc)).lower()
