"""A crash at any point of baton's create or claim is recoverable, and fcop agrees.

A real child process runs one operation and dies (``os._exit``, what SIGKILL
leaves) before its Nth mutating file-system call, for every N up to the
operation's full count. After each crash, on a copy of the workspace:

* :meth:`Lifecycle.inspect` reports the state without writing;
* the documented rule (``Lifecycle.recover``, then the same request again)
  finishes the operation exactly once;
* fcop agrees: ``validate_workspace`` is valid with no warnings, and for the
  claim, fcop's *own* replay of the same claim (``Project.transition``) also
  finishes it — fcop finds baton's receipt under the name it would use.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import warnings
from pathlib import Path
from typing import Any

import pytest

from baton.fcop_errors import LifecycleConflict, map_fcop_error
from baton.fcop_port.authority import TrustedAuthority
from baton.fcop_port.lifecycle import Lifecycle
from baton.fcop_port.port import FcopPort

CRASHER = Path(__file__).with_name("lifecycle_crasher.py")
CRASHED = 86

pytestmark = pytest.mark.slow


def _child(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, str(CRASHER), *args],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )


def _validate(root: Path) -> dict[str, Any]:
    from fcop.workspace import validate_workspace

    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)
        result: dict[str, Any] = validate_workspace(root)
    return result


def _total(root: Path, tmp: Path, *args: str) -> int:
    """How many mutating calls the operation makes when nothing interrupts it."""
    dry = tmp / "dry"
    shutil.copytree(root, dry, symlinks=True)
    done = _child(str(dry), *args, "1000000")
    assert done.returncode == 0, done.stderr
    return int(done.stdout.strip())


def _crash_copies(root: Path, tmp: Path, *args: str) -> list[tuple[int, Path]]:
    total = _total(root, tmp, *args)
    assert total >= 6, "the operation should publish, fsync and link several times"
    copies = []
    for n in range(1, total + 1):
        copy = tmp / f"crash{n}"
        shutil.copytree(root, copy, symlinks=True)
        result = _child(str(copy), *args, str(n))
        assert result.returncode == CRASHED, (n, result.returncode, result.stderr)
        copies.append((n, copy))
    return copies


def _fcop_claim(root: Path, task: str) -> dict[str, Any]:
    import fcop

    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)
        result: dict[str, Any] = fcop.Project(root).transition(
            task_id=task, from_stage="inbox", to_stage="active", tool="claim_task", actor="DEV"
        )
    return result


def test_a_claim_killed_at_any_point_is_finished_by_retrying_it_and_by_fcop(
    root: Path, authority: TrustedAuthority, tmp_path: Path
) -> None:
    port = FcopPort(root, authority=authority)
    task = port.create_task(sender="ADMIN", recipient="DEV", subject="s", body="b").task_id
    seen: set[tuple[tuple[str, ...], str | None]] = set()
    for n, copy in _crash_copies(root, tmp_path, "claim", task, "DEV"):
        lifecycle = Lifecycle(copy)
        state = lifecycle.inspect(task)
        seen.add((state.stages, state.claim_state))
        assert state.stages in {("inbox",), ("active",), ("inbox", "active")}, (n, state)

        # fcop alone, on a copy: its replay of the same claim finds baton's receipt.
        fcop_copy = tmp_path / f"fcop{n}"
        shutil.copytree(copy, fcop_copy, symlinks=True)
        if state.claim_state == "INDETERMINATE":
            # Died between linking the target and recording TARGET_DURABLE: fcop's own
            # claim would be stuck here too; baton's recover settles it from the digests.
            with pytest.raises(Exception, match="INDETERMINATE"):
                _fcop_claim(fcop_copy, task)
            Lifecycle(fcop_copy).recover(task)
        assert _fcop_claim(fcop_copy, task)["status"] == "COMMITTED"
        check = _validate(fcop_copy)
        stray = {e["path"] for e in check["errors"]}
        assert all(".fcop-create-" in p for p in stray), (n, check)  # only fcop's temporaries
        Lifecycle(fcop_copy).recover(task)
        check = _validate(fcop_copy)
        assert check["valid"] and not check["warnings"], (n, check)

        # baton's rule: retry the same claim.
        result = lifecycle.claim(task, actor="DEV")
        assert result["status"] == "COMMITTED"
        after = lifecycle.inspect(task)
        assert after.stages == ("active",) and after.claim_state == "COMMITTED", (n, after)
        assert not after.temporaries and not after.needs_recovery, (n, after)
        check = _validate(copy)
        assert check["valid"] and not check["warnings"], (n, check)
        claims = [t for t in lifecycle.read_task(task)["transitions"] if t["tool"] == "claim_task"]
        assert len(claims) == 1 and claims[0]["attempt_id"] == result["attempt_id"]
    # The crashes landed in every intermediate state of fcop's receipt protocol.
    assert seen >= {
        (("inbox",), None),  # before the receipt existed
        (("inbox",), "NOT_COMMITTED"),
        (("inbox", "active"), "INDETERMINATE"),
        (("inbox", "active"), "RECOVERABLE_DUPLICATE"),
        (("active",), "COMMITTED"),
    }, seen


def test_a_conflicting_actor_cannot_take_over_an_interrupted_claim(
    root: Path, authority: TrustedAuthority, tmp_path: Path
) -> None:
    """fcop's rule: a PREPARED claim by DEV is DEV's to finish; QA gets RECOVERY_REQUIRED."""
    port = FcopPort(root, authority=authority)
    task = port.create_task(sender="ADMIN", recipient="DEV", subject="s", body="b").task_id
    lifecycle = Lifecycle(root)
    lifecycle.workspace.inject_fault(operation="transition", stage="PREPARED")
    with pytest.raises(Exception) as crashed:
        lifecycle.claim(task, actor="DEV")
    assert getattr(crashed.value, "code", None) == "RECOVERY_REQUIRED"
    fresh = Lifecycle(root)
    assert fresh.inspect(task).claim_state == "NOT_COMMITTED"
    with pytest.raises(Exception) as refused:
        fresh.claim(task, actor="QA")
    assert getattr(refused.value, "code", None) == "RECOVERY_REQUIRED"
    assert fresh.claim(task, actor="DEV")["existing"] is True
    with pytest.raises(LifecycleConflict):
        try:
            Lifecycle(root).claim(task, actor="QA")
        except Exception as exc:
            raise map_fcop_error(exc) from exc


def test_a_create_killed_at_any_point_leaves_one_task_for_its_operation(
    root: Path, tmp_path: Path
) -> None:
    opid = "baton:crash-create"
    for n, copy in _crash_copies(root, tmp_path, "create", opid, ""):  # the rule: ask again
        lifecycle = Lifecycle(copy)
        result = lifecycle.create(
            operation_id=opid, sender="ADMIN", recipient="DEV", subject="crash", body="b\n"
        )
        tasks = sorted((copy / "fcop" / "_lifecycle" / "inbox").glob("TASK-*.md"))
        assert [t.stem for t in tasks] == [result["task_id"]], n
        facts = [
            json.loads(p.read_bytes()) for p in (copy / "fcop" / "operations").glob("create-*.json")
        ]
        assert [f["task_id"] for f in facts] == [result["task_id"]], n
        leftovers = [
            p.name
            for p in (copy / "fcop" / "_lifecycle" / "inbox").iterdir()
            if not p.name.startswith("TASK-")
        ]
        assert not leftovers, (n, leftovers)  # the retry swept its publish temporaries
        check = _validate(copy)
        assert check["valid"] and not check["warnings"], (n, check)
        assert os.path.exists(result["path"])


def test_recover_publishes_the_fact_a_crashed_create_did_not_write(root: Path) -> None:
    lifecycle = Lifecycle(root)

    def die(operation: str, stage: str) -> None:
        if (operation, stage) == ("create", "TASK_PUBLISHED"):
            raise SystemExit("killed between the TASK and its fact")

    lifecycle.workspace.crash_hook = die
    request = {"sender": "ADMIN", "recipient": "DEV", "subject": "s", "body": "b\n"}
    with pytest.raises(SystemExit):
        lifecycle.create(operation_id="op-half", **request)
    (task,) = [p.stem for p in (root / "fcop" / "_lifecycle" / "inbox").glob("TASK-*.md")]
    assert not list((root / "fcop" / "operations").glob("create-*.json"))
    import fcop

    project = fcop.Project(root)
    with warnings.catch_warnings(), pytest.raises(Exception) as stuck:
        warnings.simplefilter("ignore", DeprecationWarning)
        project.create_task(workspace_id=lifecycle.workspace_id, operation_id="op-half", **request)
    assert getattr(stuck.value, "code", None) == "RECOVERY_REQUIRED"  # fcop alone: stuck
    assert Lifecycle(root).recover(task)["create"] == "COMPLETED"
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)
        again = project.create_task(
            workspace_id=lifecycle.workspace_id, operation_id="op-half", **request
        )
    assert again["existing"] and again["task_id"] == task  # fcop now finds baton's fact
    check = _validate(root)
    assert check["valid"] and not check["warnings"], check


def test_recover_finishes_a_stock_fcop_claim_left_in_two_stages(root: Path) -> None:
    """A foreign move (stock fcop, random receipt name) found by the one scan, fixed by fcop."""
    lifecycle = Lifecycle(root)
    task = lifecycle.create(
        operation_id="op-foreign", sender="ADMIN", recipient="DEV", subject="s", body="b"
    )["task_id"]
    import fcop

    project = fcop.Project(root)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)
        project._v4_creation.inject_fault(operation="transition", stage="TARGET_DURABLE")
        with pytest.raises(Exception, match="TARGET_DURABLE"):
            project.transition(
                task_id=task, from_stage="inbox", to_stage="active", tool="claim_task", actor="DEV"
            )
    state = Lifecycle(root).inspect(task)
    assert state.two_stage and state.claim_receipt is None and state.needs_recovery
    outcome = Lifecycle(root).recover(task)
    assert [r["classification"] for r in outcome["foreign"]] == ["RECOVERABLE_DUPLICATE"]
    after = Lifecycle(root).inspect(task)
    assert after.stages == ("active",) and not after.needs_recovery
    check = _validate(root)
    assert check["valid"] and not check["warnings"], check


def test_the_rules_take_what_another_scan_found(root: Path) -> None:
    """team's host sweep finds receipts and TASKs by scanning; the rules are lifecycle's."""
    import fcop

    lifecycle = Lifecycle(root)
    request = {"sender": "ADMIN", "recipient": "DEV", "subject": "s", "body": "b\n"}
    project = fcop.Project(root)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)
        made = project.create_task(
            workspace_id=lifecycle.workspace_id, operation_id="op-fcop", **request
        )
        # What a crash between fcop's two publications leaves: the TASK, no fact.
        (fact,) = (root / "fcop" / "operations").glob("create-*.json")
        fact.unlink()
        assert lifecycle.complete_fact(made["task_id"]) is None  # fcop's random id: not proven
        assert lifecycle.complete_fact(made["task_id"], derived_only=False) == "COMPLETED"
        again = project.create_task(
            workspace_id=lifecycle.workspace_id, operation_id="op-fcop", **request
        )
        assert again["existing"] and again["task_id"] == made["task_id"]

        project._v4_creation.inject_fault(operation="transition", stage="TARGET_DURABLE")
        with pytest.raises(Exception, match="TARGET_DURABLE"):
            project.transition(
                task_id=made["task_id"],
                from_stage="inbox",
                to_stage="active",
                tool="claim_task",
                actor="DEV",
            )
    (receipt,) = (root / "fcop" / "operations").glob("transition-*.json")
    result = lifecycle.recover_receipt(receipt.relative_to(root))
    assert result["classification"] == "RECOVERABLE_DUPLICATE"
    check = _validate(root)
    assert check["valid"] and not check["warnings"], check


def test_a_fact_missing_after_the_task_moved_on_is_rebuilt_from_its_claim(root: Path) -> None:
    """team's harness found it: the create died before its fact, the TASK was claimed since."""
    import fcop

    lifecycle = Lifecycle(root)

    def die(operation: str, stage: str) -> None:
        if (operation, stage) == ("create", "TASK_PUBLISHED"):
            raise SystemExit("killed between the TASK and its fact")

    lifecycle.workspace.crash_hook = die
    request = {"sender": "ADMIN", "recipient": "DEV", "subject": "s", "body": "b\n"}
    with pytest.raises(SystemExit):
        lifecycle.create(operation_id="op-moved", **request)
    lifecycle.workspace.crash_hook = None
    (task,) = [p.stem for p in (root / "fcop" / "_lifecycle" / "inbox").glob("TASK-*.md")]
    claim = lifecycle.claim(task, actor="DEV")
    with pytest.raises(Exception, match="differs from durable fact"):  # fcop's answer, moved on
        Lifecycle(root).create(operation_id="op-moved", **request)
    (fact_path,) = (root / "fcop" / "operations").glob("create-*.json")
    fact = json.loads(fact_path.read_bytes())
    receipt = json.loads((root / claim["receipt_ref"]).read_bytes())
    assert fact["task_id"] == task and fact["content_digest"] == receipt["source_digest"]
    project = fcop.Project(root)
    with warnings.catch_warnings(), pytest.raises(Exception, match="differs from durable fact"):
        warnings.simplefilter("ignore", DeprecationWarning)
        project.create_task(workspace_id=lifecycle.workspace_id, operation_id="op-moved", **request)
    check = _validate(root)
    assert check["valid"] and not check["warnings"], check

    # The same for fcop's own writers, with what a scan found (random TASK and receipt ids).
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)
        made = project.create_task(
            workspace_id=lifecycle.workspace_id, operation_id="op-fcop", **request
        )
        moved = project.transition(
            task_id=made["task_id"],
            from_stage="inbox",
            to_stage="active",
            tool="claim_task",
            actor="DEV",
        )
    fcop_fact = next(
        p
        for p in (root / "fcop" / "operations").glob("create-*.json")
        if json.loads(p.read_bytes())["task_id"] == made["task_id"]
    )
    original = fcop_fact.read_bytes()
    fcop_fact.unlink()
    assert lifecycle.complete_fact(made["task_id"], derived_only=False) is None  # no receipt
    assert (
        lifecycle.complete_fact(
            made["task_id"], derived_only=False, claim_receipt=moved["receipt_ref"]
        )
        == "COMPLETED"
    )
    assert fcop_fact.read_bytes() == original  # exactly the fact fcop wrote
