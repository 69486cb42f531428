"""Stability decisions (pure) and the killable parse worker (a real subprocess)."""

from __future__ import annotations

import os
import sys
import textwrap
from collections.abc import Iterator
from dataclasses import replace
from pathlib import Path

import pytest

from baton.fcop_port.port import FcopPort
from baton.intake.limits import IntakeLimits
from baton.intake.screen import Refused, Screened
from baton.intake.stability import (
    FileFacts,
    Settling,
    Stable,
    Unstable,
    assess,
    recheck_delay,
)
from baton.intake.worker import ParseWorker, Proof
from tests.support.hostile import alias_bomb, with_header

LIMITS = IntakeLimits(settle_s=1.0, max_settle_s=30.0)


def facts(ctime: float, size: int = 10) -> FileFacts:
    return FileFacts(size=size, mtime_ns=int(ctime * 1e9), ctime_ns=int(ctime * 1e9), ino=1, dev=1)


# ------------------------------------------------------------------- stability


def test_a_file_unchanged_for_the_window_is_settled() -> None:
    assert assess(facts(100.0), now_wall=101.5, limits=LIMITS) == Stable("settled")


def test_a_fresh_file_settles_after_the_rest_of_the_window() -> None:
    verdict = assess(facts(100.0), now_wall=100.25, limits=LIMITS)
    assert isinstance(verdict, Settling) and 0.7 < verdict.after <= 0.75


def test_a_proven_file_is_stable_at_once() -> None:
    assert assess(facts(100.0), now_wall=100.0, limits=LIMITS, proven=True) == Stable("proven")


def test_clock_step_falls_back_to_observed_stillness() -> None:
    future = facts(5000.0)  # ctime far ahead of the wall clock
    first = (future, 10.0)
    waiting = assess(future, now_wall=100.0, limits=LIMITS, first_seen=first, now_mono=10.5)
    assert isinstance(waiting, Settling)
    still = assess(future, now_wall=100.0, limits=LIMITS, first_seen=first, now_mono=11.1)
    assert still == Stable("observed")


def test_a_file_that_never_stops_changing_becomes_unstable() -> None:
    first = (facts(1.0), 0.0)
    for second in (5.0, 20.0):
        changing = facts(100.0 + second, size=int(second))
        verdict = assess(
            changing, now_wall=100.0 + second, limits=LIMITS, first_seen=first, now_mono=second
        )
        assert isinstance(verdict, Settling)
    late = facts(131.0, size=31)
    verdict = assess(late, now_wall=131.0, limits=LIMITS, first_seen=first, now_mono=31.0)
    assert isinstance(verdict, Unstable) and verdict.seconds == 31.0


def test_recheck_backs_off_only_for_files_core_may_prove() -> None:
    settle = Settling(0.8)
    assert recheck_delay(0, settle, can_be_proven=True) == 0.005
    assert recheck_delay(3, settle, can_be_proven=True) == 0.04
    assert recheck_delay(20, settle, can_be_proven=True) == 0.8
    assert recheck_delay(0, settle, can_be_proven=False) == 0.8


# ---------------------------------------------------------------------- worker


@pytest.fixture
def worker() -> Iterator[ParseWorker]:
    with ParseWorker() as w:
        yield w


def test_worker_screens_and_reports_the_files_facts(port: FcopPort, worker: ParseWorker) -> None:
    created = port.create_task(sender="ADMIN", recipient="DEV", subject="hello", body="b")
    result = worker.screen_envelope(
        created.path,
        expect_id=created.task_id,
        proof=Proof(port.root, port.workspace_id),
    )
    assert isinstance(result.verdict, Screened) and result.verdict.subject == "hello"
    assert result.still and result.before == FileFacts.of(created.path.stat())
    assert result.proven  # Core's create fact holds exactly these bytes


def test_a_copy_of_a_task_is_not_proven(port: FcopPort, worker: ParseWorker) -> None:
    created = port.create_task(sender="ADMIN", recipient="DEV", subject="hello", body="b")
    text = created.path.read_text().replace("\nb\n", "\nrm -rf /\n")
    forged = created.path.with_name("TASK-forged.md")
    forged.write_text(text.replace(created.task_id, "TASK-forged"))
    result = worker.screen_envelope(
        forged, expect_id="TASK-forged", proof=Proof(port.root, port.workspace_id)
    )
    assert isinstance(result.verdict, Screened) and not result.proven


def test_prove_reads_only_the_fact_and_holds_it_to_the_screened_bytes(
    port: FcopPort, worker: ParseWorker
) -> None:
    """The doorbell's re-check of a TASK screened before its fact: the fact alone decides."""
    created = port.create_task(sender="ADMIN", recipient="DEV", subject="hello", body="b")
    proof = Proof(port.root, port.workspace_id)
    verdict = worker.screen_envelope(created.path, expect_id=created.task_id).verdict
    assert isinstance(verdict, Screened) and verdict.operation_id is not None
    assert worker.prove(proof, verdict)
    created.path.unlink()  # the TASK itself is not read again
    assert worker.prove(proof, verdict)
    for wrong in (
        replace(verdict, digest="0" * 64),  # other bytes than Core published
        replace(verdict, envelope_id="TASK-other"),  # the fact names another TASK
        replace(verdict, operation_id="op-nobody-ran"),  # no such fact
        replace(verdict, kind="REPORT"),  # only a TASK has a create fact
    ):
        assert not worker.prove(proof, wrong), wrong
    assert not worker.prove(Proof(port.root, "another-workspace"), verdict)


def test_same_bytes_ignores_only_the_ctime() -> None:
    """Core unlinks its temporary's name after linking the TASK: the ctime moves once."""
    seen = facts(100.0)
    assert seen.same_bytes(replace(seen, ctime_ns=seen.ctime_ns + 5_000_000))
    for changed in (
        replace(seen, size=seen.size + 1),
        replace(seen, mtime_ns=seen.mtime_ns + 1),
        replace(seen, ino=2),
        replace(seen, dev=2),
    ):
        assert not seen.same_bytes(changed), changed


def test_worker_refuses_unread_what_it_must_not_open(tmp_path: Path, worker: ParseWorker) -> None:
    fifo = tmp_path / "TASK-fifo.md"
    os.mkfifo(fifo)
    link = tmp_path / "TASK-link.md"
    os.symlink("/dev/zero", link)
    sparse = tmp_path / "TASK-huge.md"
    with sparse.open("wb") as handle:
        handle.truncate(5 * 1024**3)
    for path, reason in ((fifo, "not_a_file"), (link, "unreadable"), (sparse, "too_large")):
        verdict = worker.screen_envelope(path).verdict
        assert isinstance(verdict, Refused) and verdict.reason == reason, (path, verdict)
    assert worker.kills == 0


def test_worker_runs_under_its_resource_limits(worker: ParseWorker) -> None:
    worker.start()
    limits = Path(f"/proc/{worker.pid}/limits").read_text()
    space = next(line for line in limits.splitlines() if line.startswith("Max address space"))
    assert str(worker.limits.worker_address_space) in space
    files = next(line for line in limits.splitlines() if line.startswith("Max file size"))
    assert files.split()[3] == "0"


def test_an_overrunning_parse_is_killed_and_the_next_gets_a_fresh_worker(
    tmp_path: Path, port: FcopPort
) -> None:
    template = port.create_task(sender="ADMIN", recipient="DEV", subject="t", body="b").path
    slow = tmp_path / "TASK-slow.md"
    # As many nodes as the front-matter limit allows: ~0.2 s of pure-Python YAML on a fast
    # core, 20x the CPU budget below, so the first look at the worker's CPU (every 50 ms)
    # already finds it over (2,500 keys and a 0.05 s budget raced on a fast machine).
    keys = "\n".join(f"k{i}: v" for i in range(3500))
    slow.write_text(with_header(template.read_text(), "TASK-slow", keys))
    assert len(slow.read_bytes()) < IntakeLimits().max_frontmatter_bytes
    with ParseWorker(IntakeLimits(parse_deadline_s=0.01)) as quick:  # CPU seconds
        quick.start()
        first_pid = quick.pid
        assert first_pid is not None
        verdict = quick.screen_envelope(slow).verdict
        assert isinstance(verdict, Refused) and verdict.reason == "parse_timeout"
        assert quick.kills == 1 and quick.pid is None
        assert not Path(f"/proc/{first_pid}").exists() or _is_zombie_free(first_pid)
    with ParseWorker() as patient:
        ok = patient.screen_envelope(template)
        assert isinstance(ok.verdict, Screened)


def _is_zombie_free(pid: int) -> bool:
    try:
        return "Z" not in Path(f"/proc/{pid}/stat").read_text().split()[2]
    except FileNotFoundError:
        return True


def test_a_worker_that_dies_or_hangs_is_a_refusal_not_a_hang(tmp_path: Path) -> None:
    script = tmp_path / "fake_worker.py"
    script.write_text(
        textwrap.dedent(
            """
            import sys, time
            print('{"ready": true}', flush=True)
            line = sys.stdin.readline()
            if "TASK-die" in line:
                sys.exit(3)
            time.sleep(60)
            """
        )
    )
    launcher = tmp_path / "python"
    launcher.write_text(f"#!/bin/sh\nexec {sys.executable} {script}\n")
    launcher.chmod(0o755)
    with ParseWorker(IntakeLimits(parse_wall_s=0.5), python=str(launcher)) as fake:
        hung = fake.screen_envelope(tmp_path / "TASK-hang.md").verdict
        assert isinstance(hung, Refused) and hung.reason == "parse_timeout"
        died = fake.screen_envelope(tmp_path / "TASK-die.md").verdict
        assert isinstance(died, Refused) and died.reason == "parse_crashed"
        assert "exit code 3" in died.detail


def test_a_bomb_is_refused_by_counting_not_by_a_kill(tmp_path: Path, worker: ParseWorker) -> None:
    bomb = tmp_path / "TASK-bomb.md"
    bomb.write_text("---\ntype: TASK\ntask_id: TASK-bomb\n" + alias_bomb() + "\n---\n")
    result = worker.screen_envelope(bomb, expect_id="TASK-bomb")
    assert isinstance(result.verdict, Refused) and result.verdict.reason == "yaml_aliases"
    assert worker.kills == 0


def test_the_worker_dies_with_its_parent(tmp_path: Path) -> None:
    """No orphan: a SIGKILLed baton takes its parse worker with it (PR_SET_PDEATHSIG)."""
    import signal
    import subprocess
    import time

    script = (
        "import sys, time\n"
        "from baton.intake.worker import ParseWorker\n"
        "w = ParseWorker(); w.start(); print(w.pid, flush=True); time.sleep(600)\n"
    )
    parent = subprocess.Popen([sys.executable, "-c", script], stdout=subprocess.PIPE, text=True)
    try:
        assert parent.stdout is not None
        child = int(parent.stdout.readline())
        assert Path(f"/proc/{child}").exists()
    finally:
        parent.send_signal(signal.SIGKILL)
        parent.wait()
    deadline = time.monotonic() + 30
    while _alive(child) and time.monotonic() < deadline:
        time.sleep(0.02)
    assert not _alive(child)


def _alive(pid: int) -> bool:
    return Path(f"/proc/{pid}").exists() and _is_zombie_free(pid)
