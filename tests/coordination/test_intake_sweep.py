"""The sweep over every file Core reads, and quarantine with the reason beside the file."""

from __future__ import annotations

import json
import os
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from baton.fcop_port.port import FcopPort
from baton.intake.limits import IntakeLimits
from baton.intake.quarantine import quarantine, reason_path
from baton.intake.stability import FileFacts
from baton.intake.sweep import Sweeper, oversize
from baton.intake.worker import ParseWorker
from tests.support.hostile import alias_bomb, with_header
from tests.support.project import stock_fcop_validate


class Clock:
    """The wall clock plus an offset the test sets (ctime cannot be set back)."""

    def __init__(self, offset: float = 5.0) -> None:
        self.offset = offset

    def __call__(self) -> float:
        return time.time() + self.offset


@pytest.fixture
def worker() -> Iterator[ParseWorker]:
    with ParseWorker() as w:
        yield w


def test_sweep_finds_hostile_files_outside_the_inbox_and_remembers_verdicts(
    port: FcopPort, worker: ParseWorker
) -> None:
    task = port.create_task(sender="ADMIN", recipient="DEV", subject="real", body="b")
    port.claim(task.task_id, actor="DEV")
    template = port.read_task(task.task_id).path.read_text()
    (port.stage_dir("done") / "TASK-bomb.md").write_text(
        with_header(template, "TASK-bomb", alias_bomb())
    )
    (port.fcop_dir / "reports" / "REPORT-deep.md").write_text(
        "---\ntype: REPORT\nreport_id: REPORT-deep\nx: " + "[" * 3000 + "]" * 3000 + "\n---\n"
    )
    (port.fcop_dir / "operations" / "create-deep.json").write_text("[" * 50_000 + "]" * 50_000)
    os.symlink("/etc/passwd", port.fcop_dir / "reviews" / "REVIEW-link.md")
    clock = Clock(offset=5.0)  # every file is past the settle window
    sweeper = Sweeper(port.root, worker=worker, wall_clock=clock)
    first = sweeper.sweep()
    found = {f.origin: f.verdict.reason for f in first.refused}
    assert found == {
        "fcop/_lifecycle/done/TASK-bomb.md": "yaml_aliases",
        "fcop/reports/REPORT-deep.md": "yaml_too_deep",
        "fcop/operations/create-deep.json": "yaml_too_deep",
        "fcop/reviews/REVIEW-link.md": "symlink",
    }
    assert first.screened >= first.seen - 1  # all but the link were opened once
    again = sweeper.sweep()
    assert again.screened == 0 and {f.origin for f in again.refused} == set(found)


def test_a_changed_file_is_screened_again_and_a_fresh_one_waits(
    port: FcopPort, worker: ParseWorker
) -> None:
    task = port.create_task(sender="ADMIN", recipient="DEV", subject="real", body="b")
    port.claim(task.task_id, actor="DEV")
    active = port.read_task(task.task_id).path
    clock = Clock(offset=5.0)
    sweeper = Sweeper(port.root, worker=worker, wall_clock=clock)
    assert sweeper.sweep().refused == ()
    active.write_text(with_header(active.read_text(), task.task_id, "loop: &l [*l]"))
    clock.offset = 0.0
    fresh = sweeper.sweep()  # written just now: still settling, not judged yet
    assert fresh.refused == () and fresh.settling == (active.relative_to(port.root).as_posix(),)
    clock.offset = 5.0
    later = sweeper.sweep()
    assert [f.verdict.reason for f in later.refused] == ["yaml_recursive_alias"]


def test_oversize_is_lstat_only(port: FcopPort) -> None:
    with (port.stage_dir("archive") / "TASK-big.md").open("wb") as handle:
        handle.truncate(4 * 1024**3)
    found = oversize(port.root, limits=IntakeLimits())
    assert [(f.origin, f.verdict.reason) for f in found] == [
        ("fcop/_lifecycle/archive/TASK-big.md", "too_large")
    ]


def test_quarantine_moves_the_file_with_its_reason_and_keeps_fcop_valid(
    port: FcopPort, tmp_path: Path
) -> None:
    port.create_task(sender="ADMIN", recipient="DEV", subject="real", body="b")
    bad = port.stage_dir("inbox") / "TASK-bad.md"
    bad.write_text("---\nnot: [closed\n---\n")
    assert stock_fcop_validate(port.root)["valid"] is False
    facts = FileFacts.of(bad.lstat())
    moved = quarantine(
        bad,
        into=tmp_path / "q",
        reason="yaml_invalid",
        detail="unclosed flow sequence",
        origin="fcop/_lifecycle/inbox/TASK-bad.md",
        expected=facts,
    )
    assert moved is not None and not bad.exists() and moved.read_text().startswith("---\nnot")
    record = json.loads(reason_path(moved).read_text())
    assert record["reason"] == "yaml_invalid"
    assert record["origin"] == "fcop/_lifecycle/inbox/TASK-bad.md"
    assert record["facts"]["ino"] == facts.ino
    assert stock_fcop_validate(port.root)["valid"] is True


def test_a_file_replaced_since_the_verdict_is_not_moved(port: FcopPort, tmp_path: Path) -> None:
    path = port.stage_dir("inbox") / "TASK-x.md"
    path.write_text("old")
    facts = FileFacts.of(path.lstat())
    path.unlink()
    path.write_text("new and longer")
    assert (
        quarantine(path, into=tmp_path, reason="r", detail="d", origin="o", expected=facts) is None
    )
    assert path.read_text() == "new and longer"
