"""The reaper ends the daemon's MCP shims (found by the socket on their command line)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from baton.team.reaper import Reaper

SLEEPER = "import time; time.sleep(120)"


def _fake_shim(socket: Path) -> subprocess.Popen[bytes]:
    """A process whose command line looks like a shim of ``socket``, in a session of its own."""
    return subprocess.Popen(
        [sys.executable, "-c", SLEEPER, "stdio_shim.py", "--socket", str(socket), "--slot", "QA"],
        start_new_session=True,
    )


async def test_the_reaper_kills_the_shims_of_its_daemons_socket(tmp_path: Path) -> None:
    mine, other = tmp_path / "a" / "hub.sock", tmp_path / "b" / "hub.sock"
    ours, theirs = _fake_shim(mine), _fake_shim(other)
    try:
        reaper = await Reaper.start(tmp_path / "baton.db", mine)
        await reaper.close()  # end of file on its pipe: what the daemon's death looks like
        assert ours.wait(timeout=10) == -9
        assert theirs.poll() is None  # another daemon's shim is left alone
    finally:
        for proc in (ours, theirs):
            if proc.poll() is None:
                proc.kill()
            proc.wait()
