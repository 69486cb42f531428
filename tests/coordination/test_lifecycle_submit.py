"""baton's O(1) T3 and ``write_report`` against the real fcop 4.0.5: same bytes, same rules.

* Byte compatibility: with the same random draws and clock, baton's REPORTs and T3
  leave a workspace byte-identical to fcop's ``write_report`` and ``transition``
  (final REPORT alone, and a replacement chain whose head T3 must pick).
* fcop's refusals are kept, code for code, on twin workspaces.
* Constant work: T3 and ``write_report`` open no other TASK's REPORT or receipt.
* A crash at any point of T3 is finished by retrying it, and by fcop's own replay.
"""

from __future__ import annotations

import shutil
import subprocess
import sys
import uuid
import warnings
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

from baton.fcop_port.authority import TrustedAuthority
from baton.fcop_port.lifecycle import Lifecycle
from baton.fcop_port.lifecycle.submit import submit_operation_id
from baton.fcop_port.port import FcopPort
from tests.coordination.test_lifecycle import _opened_under, _settle, _tree, _validate

CRASHER = Path(__file__).with_name("lifecycle_crasher.py")
CRASHED = 86


class _Clock(datetime):
    times: Iterator[datetime] = iter(())

    @classmethod
    def now(cls, tz: Any = None) -> datetime:  # type: ignore[override]
        return next(cls.times)


@contextmanager
def _pinned(monkeypatch: pytest.MonkeyPatch, ids: list[uuid.UUID]) -> Iterator[None]:
    """fcop's REPORT ids and T3 operation id drawn from ``ids``; one clock for both writers."""
    from fcop.v4 import creation as fcop_creation
    from fcop.v4 import lifecycle as fcop_lifecycle

    from baton.fcop_port.lifecycle import submit as baton_submit

    start = datetime(2026, 12, 2, 12, 0, tzinfo=UTC)
    _Clock.times = iter(start + timedelta(seconds=i) for i in range(100))
    draw = iter(ids)
    with monkeypatch.context() as m:
        m.setattr(fcop_creation, "uuid4", lambda: next(draw))
        m.setattr(fcop_lifecycle, "uuid4", lambda: next(draw))
        for module in (fcop_creation, fcop_lifecycle, baton_submit):
            m.setattr(module, "datetime", _Clock)
        yield


def _claimed(root: Path, authority: TrustedAuthority) -> tuple[str, str]:
    port = FcopPort(root, authority=authority)
    task = port.create_task(sender="ADMIN", recipient="DEV", subject="s", body="b").task_id
    return task, port.claim(task, actor="DEV").attempt_id


def _fcop_project(root: Path) -> Any:
    import fcop

    return fcop.Project(root)


def _quiet(call: Callable[[], Any]) -> Any:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)
        return call()


def _report(
    writer: Any, workspace_id: str, task: str, attempt: str, body: str, prior: str | None
) -> Any:
    kwargs: dict[str, Any] = {
        "workspace_id": workspace_id,
        "sender": "DEV",
        "recipient": "ADMIN",
        "subject_ref": task,
        "attempt_id": attempt,
        "body": body,
        "result": "done",
        "report_kind": "final" if prior is None else "replacement",
    }
    if prior is not None:
        kwargs["references"] = [prior]
    return _quiet(lambda: writer.write_report(**kwargs))


@pytest.mark.parametrize("reports", [1, 3])
def test_reports_and_submit_write_exactly_fcops_bytes(
    reports: int,
    root: Path,
    authority: TrustedAuthority,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    task, attempt = _claimed(root, authority)
    theirs, ours = tmp_path / "fcop", tmp_path / "baton"
    shutil.copytree(root, theirs)
    shutil.copytree(root, ours)
    lifecycle = Lifecycle(ours)
    workspace_id = lifecycle.workspace_id
    report_ids = [uuid.uuid4() for _ in range(reports)]
    t3 = uuid.UUID(submit_operation_id(workspace_id, task, attempt))
    results = {}
    for side, writer in (("fcop", _fcop_project(theirs)), ("baton", lifecycle)):
        with _pinned(monkeypatch, [*report_ids, t3]):
            prior = None
            for i in range(reports):
                prior = _report(writer, workspace_id, task, attempt, f"take {i}\n", prior)[
                    "report_id"
                ]
            if side == "fcop":
                results[side] = _quiet(
                    lambda: writer.transition(
                        task_id=task,
                        from_stage="active",
                        to_stage="review",
                        tool="submit_task",
                        actor="DEV",
                    )
                )
            else:
                results[side] = lifecycle.submit(task, actor="DEV")
    assert _tree(ours) == _tree(theirs)
    assert results["baton"] == {**results["fcop"], "path": results["baton"]["path"]}
    moved = lifecycle.read_task(task)["transitions"][-1]
    assert moved["tool"] == "submit_task" and moved["evidence_ref"] == [prior]  # the head
    check = _validate(ours)
    assert check["valid"] and not check["warnings"], check


def _codes(root: Path, tmp_path: Path, act: Callable[[Any], Any], name: str) -> tuple[Any, Any]:
    """fcop's and baton's outcome of ``act(writer)`` on twin copies of ``root``."""
    out = []
    for side in ("fcop", "baton"):
        copy = tmp_path / f"{name}-{side}"
        shutil.copytree(root, copy)
        writer = _fcop_project(copy) if side == "fcop" else Lifecycle(copy)
        try:
            result = _quiet(lambda w=writer: act(w))
            out.append(("ok", result.get("status", "written")))
        except Exception as exc:
            out.append(("error", getattr(exc, "code", type(exc).__name__)))
    return out[0], out[1]


def _t3(writer: Any, task: str, **extra: Any) -> Any:
    if isinstance(writer, Lifecycle):
        return writer.submit(task, actor=extra.get("actor", "DEV"), report_ref=extra.get("ref"))
    kwargs = {"report_ref": extra["ref"]} if extra.get("ref") else {}
    return writer.transition(
        task_id=task,
        from_stage="active",
        to_stage="review",
        tool="submit_task",
        actor=extra.get("actor", "DEV"),
        **kwargs,
    )


def test_fcops_refusals_are_kept_code_for_code(
    root: Path, authority: TrustedAuthority, tmp_path: Path
) -> None:
    port = FcopPort(root, authority=authority)
    waiting = port.create_task(sender="ADMIN", recipient="DEV", subject="w", body="b").task_id
    task, attempt = _claimed(root, authority)
    cases: dict[str, Callable[[Any], Any]] = {
        "no report": lambda w: _t3(w, task),
        "still in the inbox": lambda w: _t3(w, waiting),
        "not a task": lambda w: _t3(w, "REPORT-x"),
        "unknown task": lambda w: _t3(w, "TASK-nothere"),
    }
    for name, act in cases.items():
        theirs, ours = _codes(root, tmp_path, act, name.replace(" ", "-"))
        assert theirs == ours and theirs[0] == "error", (name, theirs, ours)

    first = port.write_report(
        task_id=task, attempt_id=attempt, sender="DEV", recipient="ADMIN", result="done", body="1"
    )
    second = port.write_report(
        task_id=task, attempt_id=attempt, sender="DEV", recipient="ADMIN", result="done", body="2"
    )
    ws = port.workspace_id
    more: dict[str, Callable[[Any], Any]] = {
        "explicit head": lambda w: _t3(w, task, ref=second.report_id),
        "explicit replaced report": lambda w: _t3(w, task, ref=first.report_id),
        "explicit non-report": lambda w: _t3(w, task, ref=task),
        "a second final": lambda w: _report(w, ws, task, attempt, "again", None),
        "a replacement of the old head": lambda w: _report(
            w, ws, task, attempt, "again", first.report_id
        ),
        "a replacement of the head": lambda w: _report(
            w, ws, task, attempt, "again", second.report_id
        ),
        "a report for another attempt": lambda w: _report(w, ws, task, uuid.uuid4().urn, "x", None),
    }
    for name, act in more.items():
        theirs, ours = _codes(root, tmp_path, act, name.replace(" ", "-"))
        assert theirs == ours, (name, theirs, ours)

    lifecycle = Lifecycle(root)
    assert lifecycle.submit(task, actor="DEV")["status"] == "COMMITTED"
    with pytest.raises(Exception) as twice:
        lifecycle.submit(task, actor="DEV")  # T3 is not replayable in-process, as in fcop
    assert getattr(twice.value, "code", None) == "INVALID_TRANSITION"
    replay = Lifecycle(root).submit(task, actor="DEV")  # a fresh process: the committed result
    assert replay["existing"] and replay["status"] == "COMMITTED"
    replay_fcop = _quiet(lambda: _t3(_fcop_project(root), task))  # fcop finds baton's receipt
    assert replay_fcop["existing"] and replay_fcop["receipt_ref"] == replay["receipt_ref"]
    theirs, ours = _codes(root, tmp_path, lambda w: _t3(w, task, actor="QA"), "other-actor")
    assert theirs == ours == ("error", "INVALID_TRANSITION")  # the TASK is in review now


def test_submit_and_reports_touch_the_same_files_whatever_the_history(
    tmp_path: Path, authority: TrustedAuthority
) -> None:
    def touched(settled: int) -> tuple[int, int]:
        root = tmp_path / f"h{settled}"
        root.mkdir()
        from baton.fcop_port.workspace import init_workspace

        init_workspace(root, authority)
        port = FcopPort(root, authority=authority)
        _settle(port, settled)
        task = port.create_task(sender="ADMIN", recipient="DEV", subject="new", body="b").task_id
        attempt = port.claim(task, actor="DEV").attempt_id
        port.find_report_head(task, attempt)  # the index has listed the history once
        made: list[str] = []

        def report() -> None:
            made.append(
                port.write_report(
                    task_id=task,
                    attempt_id=attempt,
                    sender="DEV",
                    recipient="ADMIN",
                    result="done",
                    body="b",
                ).report_id
            )

        wrote = _opened_under(root, report)
        submitted = _opened_under(root, lambda: port.submit(task, actor="DEV"))
        receipt = submit_operation_id(port.workspace_id, task, attempt).split(":")[-1]
        for path in wrote + submitted:
            name = path.rsplit("/", 1)[-1]
            if name.startswith("REPORT-"):
                assert made[0] in name, path  # never another TASK's REPORT
            assert not name.startswith(("REVIEW-", "ISSUE-")), path
            if "TASK-" in name:
                assert task in name, path
            if name.startswith("transition-"):
                assert receipt.replace("-", "") in name, path
        # A folder listing (names only) happens when the folder changed within the racy
        # window, a matter of timing, not of history; the files opened are counted.
        return (
            len([p for p in wrote if p != "/reports"]),
            len([p for p in submitted if p != "/reports"]),
        )

    quiet, busy = touched(0), touched(12)
    assert quiet == busy, (quiet, busy)


def _child(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, str(CRASHER), *args],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )


@pytest.mark.slow
def test_a_submit_killed_at_any_point_is_finished_by_retrying_it_and_by_fcop(
    root: Path, authority: TrustedAuthority, tmp_path: Path
) -> None:
    task, attempt = _claimed(root, authority)
    FcopPort(root, authority=authority).write_report(
        task_id=task, attempt_id=attempt, sender="DEV", recipient="ADMIN", result="done", body="r"
    )
    dry = tmp_path / "dry"
    shutil.copytree(root, dry)
    done = _child(str(dry), "submit", task, "DEV", "1000000")
    assert done.returncode == 0, done.stderr
    total = int(done.stdout.strip())
    assert total >= 6
    states = set()
    for n in range(1, total + 1):
        copy = tmp_path / f"crash{n}"
        shutil.copytree(root, copy)
        crashed = _child(str(copy), "submit", task, "DEV", str(n))
        assert crashed.returncode == CRASHED, (n, crashed.stderr)
        stages = tuple(
            s
            for s in ("active", "review")
            if (copy / "fcop/_lifecycle" / s / f"{task}.md").exists()
        )
        states.add(stages)
        fcop_copy = tmp_path / f"fcop{n}"
        shutil.copytree(copy, fcop_copy)
        try:  # fcop alone: its replay of the same T3 finds baton's receipt by its scan
            fcop_result = _quiet(lambda c=fcop_copy: _t3(_fcop_project(c), task))
            assert fcop_result["status"] == "COMMITTED", n
        except Exception as exc:  # died after linking the target, before TARGET_DURABLE
            assert "INDETERMINATE" in str(exc) and stages == ("active", "review"), (n, exc)
        result = Lifecycle(copy).submit(task, actor="DEV")  # baton's rule: retry
        assert result["status"] == "COMMITTED", n
        assert not (copy / "fcop/_lifecycle/active" / f"{task}.md").exists(), n
        check = _validate(copy)
        stray = [e for e in check["errors"] if ".fcop-" not in e["path"]]
        assert not stray and not check["warnings"], (n, check)
        moves = [t for t in Lifecycle(copy).read_task(task)["transitions"] if t["to"] == "review"]
        assert len(moves) == 1, n
    assert {("active",), ("active", "review"), ("review",)} <= states, states
