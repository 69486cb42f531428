"""Recovery without guessing: FCoP state a crash leaves behind, repaired by rule or flagged.

The crash windows are produced by ``fcop``'s own fault injection (see ``fcop_faults``);
each repair is checked with ``fcop``'s validator. Written failing-first against the
pre-store daemon: the claim window left the TASK refused and never resolved, the
submit window raised ``StateAmbiguous`` out of recovery and stopped everything.
"""

from __future__ import annotations

import contextlib
import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from baton.fcop_errors import CoordinationError
from baton.fcop_port.port import FcopPort
from baton.fcop_port.publication import lock_path
from baton.fcop_port.recovery import (
    Repair,
    Unresolved,
    clean_temporaries,
    complete_create_fact,
    resolve_two_stages,
    validate_workspace,
)
from baton.team.states import TaskState
from baton.team.views import task_views
from tests.team.conftest import Team
from tests.team.fcop_faults import claim_killed_after_target, receipt_for


def _stages(port: FcopPort, task_id: str) -> list[str]:
    return [
        s
        for s in ("inbox", "active", "review", "done")
        if (port.stage_dir(s) / f"{task_id}.md").exists()
    ]


def test_r1_prepared_receipt_with_matching_digests_rolls_forward(port: FcopPort) -> None:
    task = port.create_task(sender="ADMIN", recipient="QA", subject="Stuck", body="b")
    claim_killed_after_target(port, task.task_id, actor="QA", stage="PREPARED")
    from fcop.v4.encoding import read_json

    receipt = receipt_for(port, task.task_id, "inbox", "active")
    classification = port._project.recover_operation(
        operation_id=read_json(receipt)["operation_id"],
        source_path=f"fcop/_lifecycle/inbox/{task.task_id}.md",
        target_path=f"fcop/_lifecycle/active/{task.task_id}.md",
        receipt_path=receipt.relative_to(port.root).as_posix(),
    )["classification"]
    assert classification == "INDETERMINATE"  # what fcop leaves to the host
    assert not validate_workspace(port.root)["valid"]
    repair = resolve_two_stages(port, task.task_id)
    assert repair.rule == "two-stages.prepared-roll-forward"
    assert _stages(port, task.task_id) == ["active"]
    assert json.loads(receipt.read_text())["stage"] == "COMMITTED"
    assert validate_workspace(port.root)["valid"]
    assert port.read_task(task.task_id).claims == 1


def test_r2_target_durable_receipt_completes(port: FcopPort) -> None:
    task = port.create_task(sender="ADMIN", recipient="QA", subject="Stuck", body="b")
    claim_killed_after_target(port, task.task_id, actor="QA", stage="TARGET_DURABLE")
    assert resolve_two_stages(port, task.task_id).rule == "two-stages.target-durable"
    assert _stages(port, task.task_id) == ["active"] and validate_workspace(port.root)["valid"]


def test_divergent_copies_are_not_guessed(port: FcopPort) -> None:
    task = port.create_task(sender="ADMIN", recipient="QA", subject="Stuck", body="b")
    claim_killed_after_target(port, task.task_id, actor="QA", stage="PREPARED")
    target = port.stage_dir("active") / f"{task.task_id}.md"
    target.write_bytes(target.read_bytes() + b"tampered\n")
    with contextlib.suppress(Unresolved):
        resolve_two_stages(port, task.task_id)
        raise AssertionError("a divergent copy was resolved")
    assert _stages(port, task.task_id) == ["inbox", "active"]  # all evidence kept


async def test_a_task_left_in_two_stages_is_resolved_and_the_others_flow(
    team: Team, port: FcopPort
) -> None:
    stuck = port.create_task(sender="ADMIN", recipient="QA", subject="Stuck", body="b")
    other = port.create_task(sender="ADMIN", recipient="OPS", subject="Other", body="b")
    claim_killed_after_target(port, stuck.task_id, actor="QA", stage="PREPARED")
    fresh = team.port()
    await team.run_idle(team.loop(team.factory(), port=fresh))
    assert fresh.read_task(other.task_id).stage == "review"
    assert fresh.read_task(stuck.task_id).stage == "review"
    assert fresh.read_task(stuck.task_id).claims == 1
    assert validate_workspace(port.root)["valid"]
    recoveries = [
        json.loads(line)["payload"]
        for line in _events(team)
        if json.loads(line)["type"] == "team.recovery"
    ]
    assert any(
        r["rule"] == "two-stages.prepared-roll-forward" and r["valid"] for r in recoveries
    ), recoveries


async def test_the_submit_window_no_longer_stops_the_loop(team: Team, port: FcopPort) -> None:
    stuck = port.create_task(sender="ADMIN", recipient="QA", subject="Stuck", body="b")
    other = port.create_task(sender="ADMIN", recipient="OPS", subject="Other", body="b")
    claim = port.claim(stuck.task_id, actor="QA")
    port.write_report(
        task_id=stuck.task_id,
        attempt_id=claim.attempt_id,
        sender="QA",
        recipient="ADMIN",
        result="done",
        body="x",
    )
    port._project.inject_fault(operation="transition", stage="TARGET_DURABLE")
    with contextlib.suppress(CoordinationError):
        port.submit(stuck.task_id, actor="QA")
    from fcop.v4.encoding import read_json
    from fcop.v4.receipts import set_stage

    receipt = receipt_for(port, stuck.task_id, "active", "review")
    set_stage(port.root, receipt, read_json(receipt), "PREPARED")
    fresh = team.port()
    await team.run_idle(team.loop(team.factory(), port=fresh))
    assert fresh.read_task(other.task_id).stage == "review"
    assert fresh.read_task(stuck.task_id).stage == "review"
    assert validate_workspace(port.root)["valid"]


async def test_an_unresolvable_task_needs_attention_while_the_others_flow(
    team: Team, port: FcopPort
) -> None:
    stuck = port.create_task(sender="ADMIN", recipient="QA", subject="Stuck", body="b")
    other = port.create_task(sender="ADMIN", recipient="OPS", subject="Other", body="b")
    claim_killed_after_target(port, stuck.task_id, actor="QA", stage="PREPARED")
    target = port.stage_dir("active") / f"{stuck.task_id}.md"
    target.write_bytes(target.read_bytes() + b"tampered\n")
    summary = await team.run_idle(team.loop(team.factory()))
    assert team.port().read_task(other.task_id).stage == "review"
    assert stuck.task_id in summary.stalled
    record = {r.task_id: r for r in task_views(team.store)}[stuck.task_id]
    assert record.state is TaskState.NEEDS_ATTENTION and "two FCoP stages" in (record.reason or "")
    assert record.attention_request is not None and record.issue_id is not None
    issue = (port.fcop_dir / "issues" / f"{record.issue_id}.md").read_text()
    assert "divergent" in issue


def test_r3_a_task_without_its_create_fact_is_completed(port: FcopPort) -> None:
    parent = port.create_task(sender="ADMIN", recipient="PM", subject="P", body="b")
    created = port.create_task(
        sender="PM", recipient="QA", subject="child", body="b", parent=parent.task_id
    )
    facts = sorted((port.fcop_dir / "operations").glob("create-*.json"))
    fact = next(f for f in facts if created.task_id in f.read_text())
    content = fact.read_bytes()
    fact.unlink()  # the crash between the TASK and its fact
    with contextlib.suppress(CoordinationError):
        port._call(
            "create_task",
            workspace_id=port.workspace_id,
            operation_id=created.operation_id,
            sender="PM",
            recipient="QA",
            subject="child",
            body="b",
            priority="P2",
            parent=parent.task_id,
        )
        raise AssertionError("fcop accepted the create without its fact")
    again = port.create_task(
        sender="PM",
        recipient="QA",
        subject="child",
        body="b",
        parent=parent.task_id,
        operation_id=created.operation_id,
    )
    assert again.task_id == created.task_id and again.existing
    assert fact.read_bytes() == content  # the very bytes fcop had written
    assert validate_workspace(port.root)["valid"]
    with contextlib.suppress(Unresolved):
        complete_create_fact(port, created.operation_id)
        raise AssertionError("a second fact was written")


def test_r4_removes_every_temporary_no_live_writer_owns_whatever_its_age(port: FcopPort) -> None:
    """Ownership, not age (issue 30 item 6): a temporary written a moment ago by a writer
    that is gone is as abandoned as an old one."""
    task = port.create_task(sender="ADMIN", recipient="QA", subject="t", body="b")
    active = port.stage_dir("active")
    old = active / f".fcop-create-{task.task_id}-abcd1234.tmp"
    old.write_bytes(b"half")
    stamp = time.time() - 60
    os.utime(old, (stamp, stamp))
    young = port.stage_dir("review") / f".fcop-create-{task.task_id}-young123.tmp"
    young.write_bytes(b"being written")
    residue = port.stage_dir("inbox") / f".fcop-create-{task.task_id}-resid123.tmp"
    residue.write_bytes((port.stage_dir("inbox") / f"{task.task_id}.md").read_bytes())
    repairs = clean_temporaries(port)
    assert not old.exists() and not residue.exists() and not young.exists()
    assert {r.outcome for r in repairs} == {"cleaned"} and len(repairs) == 3
    assert any("residue" in r.detail for r in repairs), repairs
    assert validate_workspace(port.root)["valid"]


def test_r4_spares_a_live_writer_in_another_process_however_long_it_stalls(
    port: FcopPort, tmp_path: Path
) -> None:
    """A writer that holds the publication lock (another process, stalled) keeps its
    temporary; once that process is gone, the same temporary is removed."""
    task = port.create_task(sender="ADMIN", recipient="QA", subject="t", body="b")
    temporary = port.stage_dir("active") / f".fcop-create-{task.task_id}-stall123.tmp"
    temporary.write_bytes(b"a stalled writer's bytes")
    holder = subprocess.Popen(
        [
            sys.executable,
            "-c",
            "import fcntl, os, sys\n"
            "fd = os.open(sys.argv[1], os.O_RDWR | os.O_CREAT)\n"
            "fcntl.flock(fd, fcntl.LOCK_SH)\n"
            "print('held', flush=True)\n"
            "sys.stdin.read()\n",
            str(lock_path(port.root)),
        ],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
    )
    try:
        assert holder.stdout is not None and holder.stdout.readline().strip() == b"held"
        assert clean_temporaries(port) == []
        assert temporary.exists()
    finally:
        holder.kill()
        holder.wait()
    (repair,) = clean_temporaries(port)
    assert "abandoned" in repair.detail and not temporary.exists()


def test_r4_spares_a_writer_between_its_link_and_its_unlink(
    port: FcopPort, monkeypatch: pytest.MonkeyPatch
) -> None:
    """fcop's ``publish`` links its temporary, syncs the directory, then unlinks it. A sweep
    that removed the temporary in between made the writer fail with
    TARGET_ALREADY_EXISTS_DIFFERENT (seen: ``baton task new`` while ``baton up`` started)."""
    from fcop.v4 import encoding

    inbox = port.stage_dir("inbox")
    target = inbox / "TASK-0123456789abcdef0123456789abcdef.md"
    seen: list[list[Repair]] = []
    real_sync = encoding.sync_directory

    def sweep_after_link(path: Path) -> None:
        if target.exists() and not seen:
            seen.append(clean_temporaries(port))  # a daemon's sweep, in the window
        real_sync(path)

    monkeypatch.setattr(encoding, "sync_directory", sweep_after_link)
    encoding.publish(target, b"the bytes")
    assert seen == [[]], seen
    assert target.read_bytes() == b"the bytes"
    assert not [p for p in inbox.iterdir() if p.name.startswith(".fcop-create-")]


def _events(team: Team) -> list[str]:
    runs = [r.run_id for r in team.store.list_runs()]
    return [line for run in runs for line in team.store.iter_event_json(run)]


def test_a_redelivered_create_finds_its_task_after_it_moved_on(port: FcopPort) -> None:
    """Found by the crash harness: fcop replays a create only while its TASK is untouched in
    the inbox; a leader re-prompted after its child was claimed got RECOVERY_REQUIRED and
    stopped delegating (the next child was lost)."""
    parent = port.create_task(sender="ADMIN", recipient="PM", subject="P", body="b")
    request = {
        "sender": "PM",
        "recipient": "QA",
        "subject": "child",
        "body": "b",
        "parent": parent.task_id,
        "operation_id": "baton:delegate-child",
    }
    first = port.create_task(**request)  # type: ignore[arg-type]
    port.claim(first.task_id, actor="QA")
    again = port.create_task(**request)  # type: ignore[arg-type]
    assert again.task_id == first.task_id and again.existing
    assert len(port.children(parent.task_id)) == 1
    with contextlib.suppress(CoordinationError):
        port.create_task(**{**request, "body": "different"})  # type: ignore[arg-type]
        raise AssertionError("a conflicting request reused the operation id")


def test_r3_also_for_a_task_that_was_claimed_since(port: FcopPort) -> None:
    """Found by the crash harness: the child created in the killed turn was claimed before
    the re-prompted leader delegated it again."""
    parent = port.create_task(sender="ADMIN", recipient="PM", subject="P", body="b")
    request = {
        "sender": "PM",
        "recipient": "QA",
        "subject": "child",
        "body": "b",
        "parent": parent.task_id,
        "operation_id": "baton:delegate-claimed",
    }
    created = port.create_task(**request)  # type: ignore[arg-type]
    fact = next(
        f
        for f in (port.fcop_dir / "operations").glob("create-*.json")
        if created.task_id in f.read_text()
    )
    content = fact.read_bytes()
    fact.unlink()  # the crash between the TASK and its fact
    port.claim(created.task_id, actor="QA")  # and the child was picked up since
    again = port.create_task(**request)  # type: ignore[arg-type]
    assert again.task_id == created.task_id and again.existing
    assert fact.read_bytes() == content
    assert validate_workspace(port.root)["valid"]
