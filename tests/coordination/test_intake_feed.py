"""The sweeper's change feed: O(changes) passes with the verdicts of a full pass.

Real inotify on tmp_path; nothing waits on a sleep (the feed is read without
blocking inside the pass, so a change made before ``sweep()`` is in it).
"""

from __future__ import annotations

import os
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from baton.fcop_port.port import FcopPort
from baton.intake.sweep import Sweeper, SweepReport
from baton.intake.worker import ParseWorker

pytestmark = pytest.mark.skipif(sys.platform != "linux", reason="inotify is Linux's")

DEEP = "x: " + "[" * 3000 + "]" * 3000 + "\n"


def report(name: str, extra: str = "") -> str:
    return f"---\ntype: REPORT\nreport_id: {name}\n{extra}---\nbody\n"


@pytest.fixture
def worker() -> Iterator[ParseWorker]:
    with ParseWorker() as w:
        yield w


@pytest.fixture
def workspace(port: FcopPort) -> FcopPort:
    """A few tasks in several stages and a few REPORTs: a small settled history."""
    for n in range(3):
        task = port.create_task(sender="ADMIN", recipient="DEV", subject=f"t{n}", body="b")
        port.claim(task.task_id, actor="DEV")
    for n in range(3):
        (port.fcop_dir / "reports" / f"REPORT-r{n}.md").write_text(report(f"REPORT-r{n}"))
    return port


@pytest.fixture
def watched(workspace: FcopPort, worker: ParseWorker) -> Iterator[Sweeper]:
    sweeper = Sweeper(workspace.root, worker=worker, watch=True)
    first = sweeper.sweep(require_stable=False)
    assert first.full and first.refused == ()
    yield sweeper
    sweeper.close()


def verdicts(report_: SweepReport) -> dict[str, str]:
    return {f.origin: f.verdict.reason for f in report_.refused}


def full_verdicts(root: Path, worker: ParseWorker) -> dict[str, str]:
    """What a fresh sweeper's full pass says now (the oracle)."""
    fresh = Sweeper(root, worker=worker)
    result = fresh.sweep(require_stable=False)
    assert result.full
    return verdicts(result)


def _replace(path: Path, text: str) -> None:
    tmp = path.with_name(".tmp-" + path.name)
    tmp.write_text(text)
    os.replace(tmp, path)


def _grow(path: Path, text: str) -> None:
    with path.open("r+") as handle:  # in place: same inode, the front matter grows
        body = handle.read()
        handle.seek(0)
        handle.write(body.replace("---\n", "---\n" + text, 1))


def _rewrite_same_size(path: Path, text: str) -> None:
    size = path.stat().st_size
    data = text.encode()[:size].ljust(size, b" ")
    fd = os.open(path, os.O_WRONLY)  # in place, same size, no truncate
    try:
        os.pwrite(fd, data, 0)
    finally:
        os.close(fd)


MUTATIONS: dict[str, Callable[[Path], str]] = {}


def mutation(fn: Callable[[Path], str]) -> Callable[[Path], str]:
    MUTATIONS[fn.__name__] = fn
    return fn


@mutation
def created(fcop: Path) -> str:
    (fcop / "reports" / "REPORT-new.md").write_text(report("REPORT-new", DEEP))
    return "fcop/reports/REPORT-new.md"


@mutation
def replaced(fcop: Path) -> str:
    _replace(fcop / "reports" / "REPORT-r1.md", report("REPORT-r1", "a: &a [*a]\n"))
    return "fcop/reports/REPORT-r1.md"


@mutation
def grown_in_place(fcop: Path) -> str:
    _grow(fcop / "reports" / "REPORT-r2.md", DEEP)
    return "fcop/reports/REPORT-r2.md"


@mutation
def rewritten_in_place(fcop: Path) -> str:
    path = fcop / "reports" / "REPORT-r0.md"
    _rewrite_same_size(path, "---\nnot: [closed\n")
    return "fcop/reports/REPORT-r0.md"


@mutation
def task_rewritten_in_place(fcop: Path) -> str:
    path = next((fcop / "_lifecycle" / "active").glob("TASK-*.md"))
    _grow(path, "loop: &l [*l]\n")
    return path.relative_to(fcop.parent).as_posix()


@mutation
def operation_replaced(fcop: Path) -> str:
    path = sorted((fcop / "operations").glob("*.json"))[0]
    _replace(path, "[" * 50_000 + "]" * 50_000)
    return path.relative_to(fcop.parent).as_posix()


@mutation
def symlinked(fcop: Path) -> str:
    os.symlink("/etc/passwd", fcop / "reviews" / "REVIEW-link.md")
    return "fcop/reviews/REVIEW-link.md"


@mutation
def directory_named_like_a_report(fcop: Path) -> str:
    (fcop / "issues" / "ISSUE-dir.md").mkdir()
    return "fcop/issues/ISSUE-dir.md"


@pytest.mark.parametrize("name", sorted(MUTATIONS))
def test_a_feed_pass_gives_the_verdicts_of_a_full_pass(
    name: str, workspace: FcopPort, watched: Sweeper, worker: ParseWorker
) -> None:
    origin = MUTATIONS[name](workspace.fcop_dir)
    result = watched.sweep(require_stable=False)
    assert not result.full, "a change inside the screened directories needs no listing"
    assert origin in verdicts(result)
    assert verdicts(result) == full_verdicts(workspace.root, worker)
    assert result.seen <= 2  # the changed entry (and a replace's temporary name)


def test_a_deleted_file_is_forgotten_and_a_later_good_one_passes(
    workspace: FcopPort, watched: Sweeper, worker: ParseWorker
) -> None:
    bad = workspace.fcop_dir / "reports" / "REPORT-bad.md"
    bad.write_text(report("REPORT-bad", DEEP))
    assert "fcop/reports/REPORT-bad.md" in verdicts(watched.sweep(require_stable=False))
    bad.unlink()
    gone = watched.sweep(require_stable=False)
    assert not gone.full and verdicts(gone) == {} == full_verdicts(workspace.root, worker)
    bad.write_text(report("REPORT-bad"))
    back = watched.sweep(require_stable=False)
    assert not back.full and back.screened == 1 and verdicts(back) == {}
    assert watched.passed_facts("fcop/reports/REPORT-bad.md") is not None


def test_a_pass_with_no_changes_lists_no_directory_and_stats_nothing(
    workspace: FcopPort, watched: Sweeper, monkeypatch: pytest.MonkeyPatch
) -> None:
    bad = workspace.fcop_dir / "reports" / "REPORT-bad.md"
    bad.write_text(report("REPORT-bad", DEEP))
    assert verdicts(watched.sweep(require_stable=False)) == {
        "fcop/reports/REPORT-bad.md": "yaml_too_deep"
    }
    calls = {"scandir": 0, "lstat": 0}
    real_scandir, real_lstat, real_stat = os.scandir, os.lstat, os.stat

    def scandir(*args: Any) -> Any:
        calls["scandir"] += 1
        return real_scandir(*args)

    def lstat(path: Any, *args: Any, **kwargs: Any) -> os.stat_result:
        calls["lstat"] += 1
        return real_lstat(path, *args, **kwargs)

    def stat(path: Any, *args: Any, **kwargs: Any) -> os.stat_result:
        calls["lstat"] += 1  # pathlib's lstat() is os.stat(follow_symlinks=False)
        return real_stat(path, *args, **kwargs)

    monkeypatch.setattr(os, "scandir", scandir)
    monkeypatch.setattr(os, "lstat", lstat)
    monkeypatch.setattr(os, "stat", stat)
    quiet = watched.sweep()
    assert calls == {"scandir": 0, "lstat": 0}
    assert (quiet.full, quiet.seen, quiet.screened) == (False, 0, 0)
    # The remembered refusal is still reported (the loop says it once; Core must not read it).
    assert verdicts(quiet) == {"fcop/reports/REPORT-bad.md": "yaml_too_deep"}
    (workspace.fcop_dir / "reports" / "REPORT-r0.md").write_text(report("REPORT-r0", "a: 1\n"))
    one = watched.sweep(require_stable=False)
    assert calls == {"scandir": 0, "lstat": 1} and one.screened == 1


def test_a_write_just_before_the_after_turn_pass_is_judged_by_it(
    workspace: FcopPort, watched: Sweeper
) -> None:
    """The after-turn race: the kernel has queued the event, nobody delivered it yet.

    The pass reads the inotify instance itself, so the write is in it, every time."""
    path = workspace.fcop_dir / "reports" / "REPORT-r2.md"
    good = path.read_text()
    for attempt in range(30):
        _grow(path, DEEP) if attempt % 2 else _rewrite_same_size(path, "---\nnot: [closed\n")
        after_turn = watched.sweep(require_stable=False)  # no wait of any kind
        assert not after_turn.full
        assert "fcop/reports/REPORT-r2.md" in verdicts(after_turn), attempt
        path.write_text(good)
        assert verdicts(watched.sweep(require_stable=False)) == {}, attempt


def test_a_file_linked_in_from_elsewhere_is_looked_at_every_pass(
    workspace: FcopPort, watched: Sweeper
) -> None:
    """inotify reports a write only to the directory of the name it went through."""
    outside = workspace.root / "elsewhere.md"
    outside.write_text(report("REPORT-linked"))
    os.link(outside, workspace.fcop_dir / "reports" / "REPORT-linked.md")
    assert verdicts(watched.sweep(require_stable=False)) == {}
    _grow(outside, DEEP)  # no event on fcop/reports
    later = watched.sweep(require_stable=False)
    assert not later.full
    assert verdicts(later) == {"fcop/reports/REPORT-linked.md": "yaml_too_deep"}


def test_a_settling_file_is_judged_on_a_later_pass_without_a_new_event(
    workspace: FcopPort, worker: ParseWorker
) -> None:
    offset = [5.0]  # the workspace's files are past the settle window
    sweeper = Sweeper(
        workspace.root, worker=worker, watch=True, wall_clock=lambda: time.time() + offset[0]
    )
    try:
        assert sweeper.sweep().settling == ()
        path = workspace.fcop_dir / "reports" / "REPORT-slow.md"
        path.write_text(report("REPORT-slow", "a: &a [*a]\n"))
        offset[0] = 0.0
        fresh = sweeper.sweep()
        assert not fresh.full and fresh.settling == ("fcop/reports/REPORT-slow.md",)
        offset[0] = 5.0  # the settle window has passed; the kernel says nothing new
        later = sweeper.sweep()
        assert not later.full and verdicts(later) == {
            "fcop/reports/REPORT-slow.md": "yaml_recursive_alias"
        }
    finally:
        sweeper.close()


def test_a_kernel_queue_overflow_makes_the_next_pass_full(
    workspace: FcopPort, watched: Sweeper
) -> None:
    limit = int(Path("/proc/sys/fs/inotify/max_queued_events").read_text())
    if limit > 200_000:
        pytest.skip(f"max_queued_events is {limit}: too many events to overflow it here")
    a = workspace.fcop_dir / "reports" / "REPORT-r0.md"
    b = workspace.fcop_dir / "reports" / "REPORT-r1.md"
    for n in range(limit // 2 + 10):  # alternate, or the kernel merges equal events
        os.utime(a, ns=(n, n))
        os.utime(b, ns=(n, n))
    hidden = workspace.fcop_dir / "reviews" / "REVIEW-late.md"
    hidden.write_text(report("REVIEW-late", DEEP))  # its event is lost in the overflow
    result = watched.sweep(require_stable=False)
    assert result.full
    assert "fcop/reviews/REVIEW-late.md" in verdicts(result)
    assert not watched.sweep(require_stable=False).full  # re-armed: back to the feed


def test_a_replaced_directory_rearms_with_a_full_pass(
    workspace: FcopPort, watched: Sweeper
) -> None:
    reports = workspace.fcop_dir / "reports"
    arms = watched.feed.arms if watched.feed else 0
    reports.rename(workspace.root / "old-reports")
    reports.mkdir()
    (reports / "REPORT-inside.md").write_text(report("REPORT-inside", DEEP))
    result = watched.sweep(require_stable=False)
    assert result.full and verdicts(result) == {"fcop/reports/REPORT-inside.md": "yaml_too_deep"}
    assert watched.feed is not None and watched.feed.arms == arms + 1
    # The new directory is watched: a change in it is seen by a feed pass.
    (reports / "REPORT-next.md").write_text(report("REPORT-next", "a: &a [*a]\n"))
    after = watched.sweep(require_stable=False)
    assert not after.full and "fcop/reports/REPORT-next.md" in verdicts(after)


def test_a_screened_directory_created_later_is_watched(port: FcopPort, worker: ParseWorker) -> None:
    issues = port.fcop_dir / "issues"
    if issues.exists():
        os.rmdir(issues)
    sweeper = Sweeper(port.root, worker=worker, watch=True)
    try:
        assert sweeper.sweep().full
        assert not sweeper.sweep().full
        issues.mkdir()
        (issues / "ISSUE-x.md").write_text(report("ISSUE-x", DEEP))
        result = sweeper.sweep(require_stable=False)
        assert result.full and "fcop/issues/ISSUE-x.md" in verdicts(result)
        (issues / "ISSUE-y.md").write_text(report("ISSUE-y", DEEP))
        after = sweeper.sweep(require_stable=False)
        assert not after.full and "fcop/issues/ISSUE-y.md" in verdicts(after)
    finally:
        sweeper.close()


def test_a_read_error_or_restart_falls_back_to_a_full_pass(
    workspace: FcopPort, watched: Sweeper, monkeypatch: pytest.MonkeyPatch
) -> None:
    feed = watched.feed
    assert feed is not None and not watched.sweep().full

    def broken(*args: Any, **kwargs: Any) -> Any:
        raise OSError(5, "Input/output error")

    assert feed._inotify is not None
    monkeypatch.setattr(feed._inotify, "read", broken)
    assert watched.sweep().full  # and it re-armed a fresh instance
    assert not watched.sweep().full
    feed.close()  # the watcher went away (e.g. closed under us): it re-arms, full
    assert watched.sweep().full
    assert not watched.sweep().full


def test_a_pass_that_failed_half_way_is_followed_by_a_full_one(
    workspace: FcopPort, watched: Sweeper, monkeypatch: pytest.MonkeyPatch
) -> None:
    (workspace.fcop_dir / "reports" / "REPORT-x.md").write_text(report("REPORT-x", DEEP))
    real = watched._judge

    def fail(*args: Any) -> Any:
        raise RuntimeError("boom")

    monkeypatch.setattr(watched, "_judge", fail)
    with pytest.raises(RuntimeError):
        watched.sweep(require_stable=False)
    monkeypatch.setattr(watched, "_judge", real)
    result = watched.sweep(require_stable=False)  # the feed's event was consumed: list all
    assert result.full and "fcop/reports/REPORT-x.md" in verdicts(result)


def test_the_backstop_makes_a_full_pass(workspace: FcopPort, worker: ParseWorker) -> None:
    now = [1000.0]
    sweeper = Sweeper(
        workspace.root, worker=worker, watch=True, backstop_s=300.0, clock=lambda: now[0]
    )
    try:
        assert sweeper.sweep().full
        now[0] += 299.0
        assert not sweeper.sweep().full
        now[0] += 1.0
        assert sweeper.sweep().full
        assert not sweeper.sweep().full
    finally:
        sweeper.close()


def test_without_a_watcher_every_pass_is_full(
    workspace: FcopPort, worker: ParseWorker, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr("baton.intake.sweep.open_feed", lambda *a: None)
    sweeper = Sweeper(workspace.root, worker=worker, watch=True)
    assert sweeper.feed is None
    assert sweeper.sweep().full and sweeper.sweep().full


def test_a_screened_directory_that_cannot_be_watched_means_full_passes(
    workspace: FcopPort, worker: ParseWorker, tmp_path: Path
) -> None:
    reviews = workspace.fcop_dir / "reviews"
    os.rmdir(reviews) if reviews.exists() else None
    target = tmp_path / "real-reviews"
    target.mkdir()
    os.symlink(target, reviews)  # inotify with IN_DONT_FOLLOW|IN_ONLYDIR refuses it
    sweeper = Sweeper(workspace.root, worker=worker, watch=True)
    try:
        assert all(sweeper.sweep().full for _ in range(3))
        assert sweeper.feed is not None and not sweeper.feed.armed
    finally:
        sweeper.close()


def test_on_change_names_every_file_judged_anew_or_gone_in_both_passes(
    workspace: FcopPort, worker: ParseWorker
) -> None:
    for watch in (True, False):
        seen: list[str] = []
        sweeper = Sweeper(workspace.root, worker=worker, watch=watch, on_change=seen.append)
        try:
            sweeper.sweep(require_stable=False)
            first = set(seen)
            assert "fcop/reports/REPORT-r0.md" in first and len(first) == len(seen)
            assert any(o.startswith("fcop/operations/") for o in first)
            seen.clear()
            assert sweeper.sweep(require_stable=False) and seen == []  # nothing changed
            r0 = workspace.fcop_dir / "reports" / "REPORT-r0.md"
            _grow(r0, "extra: 1\n")
            bad = workspace.fcop_dir / "reviews" / "REVIEW-bad.md"
            bad.write_text(report("REVIEW-bad", DEEP))
            sweeper.sweep(require_stable=False)
            assert sorted(seen) == ["fcop/reports/REPORT-r0.md", "fcop/reviews/REVIEW-bad.md"]
            seen.clear()
            bad.unlink()
            sweeper.sweep(require_stable=False)
            assert seen == ["fcop/reviews/REVIEW-bad.md"], watch
            seen.clear()
            sweeper.forget("fcop/reports/REPORT-r0.md")  # the caller moved it away
            assert seen == ["fcop/reports/REPORT-r0.md"]
            r0.write_text(report("REPORT-r0"))  # put back for the next round
            seen.clear()
            sweeper.sweep(require_stable=False)
            assert seen == ["fcop/reports/REPORT-r0.md"], watch
        finally:
            sweeper.close()


def test_on_change_may_call_the_sweeper_and_its_errors_do_not_stop_a_pass(
    workspace: FcopPort, worker: ParseWorker
) -> None:
    facts: dict[str, object] = {}
    sweeper: Sweeper

    def hook(origin: str) -> None:
        facts[origin] = sweeper.passed_facts(origin)  # would deadlock inside the lock
        if origin.endswith("REPORT-r1.md"):
            raise ValueError("a broken index")

    sweeper = Sweeper(workspace.root, worker=worker, watch=True, on_change=hook)
    try:
        result = sweeper.sweep(require_stable=False)
        assert result.refused == () and facts["fcop/reports/REPORT-r2.md"] is not None
    finally:
        sweeper.close()
