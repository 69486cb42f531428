"""The role MCP server's process entry: watch the team loop first, then serve.

``python -m baton.role_tools.slot_server --store DB --slot NAME``. The agent starts this
process, with ``BATON_DAEMON_PID`` and ``BATON_DAEMON_START`` (the owning ``baton up``'s
pid and kernel start time) in its environment. Before the server's slow imports, a pidfd
on that team loop is watched from a thread that ends the process the moment the team loop dies,
so a server can never outlive its team loop, even while it is still starting (a server
whose team loop is already gone does not start). Without those variables (tests, a server
started by hand) the server relies on its per-call check (``DAEMON_GONE``).
"""

from __future__ import annotations

import os
import select
import threading

__all__ = ["watch_team_loop"]


def watch_team_loop(environ: dict[str, str] | os._Environ[str] = os.environ) -> bool:
    """Exit this process when the team loop named in ``environ`` dies; False if none is named."""
    raw_pid = environ.get("BATON_DAEMON_PID")
    if not raw_pid:
        return False
    pid = int(raw_pid)
    expected = environ.get("BATON_DAEMON_START")
    from baton.lifeline import process_start_ticks

    if process_start_ticks(pid) is None or (expected and str(process_start_ticks(pid)) != expected):
        os._exit(3)  # the team loop is already gone: nothing to serve
    try:
        fd = os.pidfd_open(pid)
    except (AttributeError, OSError):
        return False

    def wait() -> None:
        select.select([fd], [], [])
        os._exit(3)

    threading.Thread(target=wait, name="daemon-watch", daemon=True).start()
    return True


if __name__ == "__main__":
    import sys

    watch_team_loop()
    from baton.role_tools.server import main

    sys.exit(main())
