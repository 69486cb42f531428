"""The one ``/proc`` reader (:mod:`baton.lifeline`), against real processes."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from baton.lifeline import boot_id, proc_stat, process_start_ticks, processes
from baton.procgroup import group_alive, process_alive

pytestmark = pytest.mark.skipif(not Path("/proc/self/stat").exists(), reason="needs /proc")


def test_this_process_as_the_kernel_sees_it() -> None:
    stat = proc_stat(os.getpid())
    assert stat is not None and stat.live
    assert (stat.ppid, stat.pgrp, stat.session) == (os.getppid(), os.getpgrp(), os.getsid(0))
    assert process_start_ticks(os.getpid()) == stat.start_ticks > 0
    assert os.getpid() in dict(processes())
    assert group_alive(os.getpgrp())
    assert len(boot_id()) == 36  # a UUID


def test_a_name_with_spaces_and_parentheses_does_not_shift_the_fields(tmp_path: Path) -> None:
    odd = tmp_path / "a) b (c"
    odd.symlink_to(sys.executable)
    child = subprocess.Popen(
        [str(odd), "-c", "import sys; sys.stdin.read()"], stdin=subprocess.PIPE
    )
    try:
        stat = proc_stat(child.pid)
        assert stat is not None and stat.live and stat.ppid == os.getpid()
        assert stat.pgrp == os.getpgrp()
    finally:
        child.communicate(b"")


def test_a_zombie_is_gone_and_a_reaped_pid_is_absent() -> None:
    child = subprocess.Popen([sys.executable, "-c", "pass"])
    os.waitid(os.P_PID, child.pid, os.WEXITED | os.WNOWAIT)  # exited, not reaped
    stat = proc_stat(child.pid)
    assert stat is not None and stat.state == "Z" and not stat.live
    assert not process_alive(child.pid) and process_start_ticks(child.pid) is None
    child.wait()
    assert proc_stat(child.pid) is None and not process_alive(child.pid)
