"""The FCoP port against the real ``fcop`` 4.0.5 library: init, legacy, T1–T5, errors."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from baton.fcop_errors import (
    CODE_TO_ERROR,
    AuthorizationRefused,
    EvidenceError,
    LegacyWorkspaceError,
    LifecycleConflict,
    OperationConflict,
    StateAmbiguous,
    TaskNotFound,
    WorkspaceNotInitialized,
    map_fcop_error,
)
from baton.fcop_port.authority import PROFILE_REF, Expectation, TrustedAuthority
from baton.fcop_port.port import FcopPort
from baton.fcop_port.workspace import init_workspace, inspect_workspace_kind
from tests.coordination.conftest import KEY


def test_init_creates_a_4_0_workspace_adopting_batons_profile(tmp_path: Path) -> None:
    status = init_workspace(tmp_path, TrustedAuthority(KEY))
    assert status.kind == "v4"
    assert status.authority_adopted
    manifest = json.loads((tmp_path / "fcop" / "fcop.json").read_text())
    assert manifest["protocol_version"] == "4.0"
    assert manifest["profiles"] == [PROFILE_REF]
    for stage in ("inbox", "active", "review", "done", "archive"):
        assert (tmp_path / "fcop" / "_lifecycle" / stage).is_dir()
    again = init_workspace(tmp_path, TrustedAuthority(KEY))  # idempotent, no error
    assert again.workspace_id == status.workspace_id


def test_no_workspace_is_reported_not_guessed(tmp_path: Path) -> None:
    assert inspect_workspace_kind(tmp_path).kind == "absent"
    with pytest.raises(WorkspaceNotInitialized):
        FcopPort(tmp_path)


@pytest.mark.parametrize(
    ("layout", "label"),
    [
        ({"fcop/tasks/TASK-20260509-001-PM-to-DEV.md": "x", "fcop/reports/.keep": ""}, "1.x–3.x"),
        (
            {
                "fcop/fcop.json": json.dumps(
                    {
                        "mode": "team",
                        "team": "dev-team",
                        "leader": "PM",
                        "roles": ["PM", "DEV"],
                        "version": 2,
                    }
                ),
                "fcop/log/.keep": "",
            },
            "1.x–3.x",
        ),
        ({"fcop/_lifecycle/inbox/TASK-20260521-001-PM-to-QA.md": "x"}, "3.x"),
        ({"docs/agents/tasks/TASK-20260401-001-PM-to-DEV.md": "x"}, "0.x"),
        (
            {"fcop/fcop.json": json.dumps({"protocol": "fcop", "protocol_version": "3.2"})},
            "1.x–3.x",
        ),
    ],
)
def test_legacy_workspace_is_detected_explained_and_left_untouched(
    tmp_path: Path, layout: dict[str, str], label: str
) -> None:
    for rel, text in layout.items():
        path = tmp_path / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
    before = sorted(
        (p.relative_to(tmp_path), p.read_bytes()) for p in tmp_path.rglob("*") if p.is_file()
    )
    status = inspect_workspace_kind(tmp_path)
    assert status.kind == "legacy"
    assert status.legacy_kind == label
    assert "baton init" in status.guidance and "mv" in status.guidance
    with pytest.raises(LegacyWorkspaceError) as info:
        init_workspace(tmp_path, TrustedAuthority(KEY))
    assert info.value.guidance == status.guidance
    with pytest.raises(LegacyWorkspaceError):
        FcopPort(tmp_path)
    after = sorted(
        (p.relative_to(tmp_path), p.read_bytes()) for p in tmp_path.rglob("*") if p.is_file()
    )
    assert after == before  # not a byte written


def test_create_is_idempotent_on_operation_id(port: FcopPort) -> None:
    first = port.create_task(sender="ADMIN", recipient="PM", subject="Ship it", body="Do X.\n")
    again = port.create_task(sender="ADMIN", recipient="PM", subject="Ship it", body="Do X.\n")
    assert again.task_id == first.task_id and again.existing and not first.existing
    with pytest.raises(OperationConflict):
        port.create_task(
            sender="ADMIN",
            recipient="QA",
            subject="Other",
            body="y",
            operation_id=first.operation_id,
        )
    task = port.read_task(first.task_id)
    assert (task.stage, task.sender, task.recipient, task.subject) == (
        "inbox",
        "ADMIN",
        "PM",
        "Ship it",
    )
    assert task.body == "Do X.\n"
    assert task.attempt_id is None


def test_full_lifecycle_t1_t2_report_t3_t4(port: FcopPort) -> None:
    created = port.create_task(sender="ADMIN", recipient="QA", subject="Test", body="run tests")
    claim = port.claim(created.task_id, actor="QA")
    assert claim.attempt_id.startswith("urn:uuid:")
    with pytest.raises(LifecycleConflict):  # a second claimer loses
        port.claim(created.task_id, actor="DEV")
    assert port.find_report_head(created.task_id, claim.attempt_id) is None
    report = port.write_report(
        task_id=created.task_id,
        attempt_id=claim.attempt_id,
        sender="QA",
        recipient="ADMIN",
        result="done",
        body="all green",
    )
    assert report.report_kind == "final"
    fixed = port.write_report(
        task_id=created.task_id,
        attempt_id=claim.attempt_id,
        sender="QA",
        recipient="ADMIN",
        result="done",
        body="all green (corrected)",
    )
    assert fixed.report_kind == "replacement" and fixed.references == (report.report_id,)
    head = port.find_report_head(created.task_id, claim.attempt_id)
    assert head is not None and head.report_id == fixed.report_id
    submitted = port.submit(created.task_id, actor="QA", report_ref=head.report_id)
    assert (submitted.from_stage, submitted.to_stage) == ("active", "review")
    with pytest.raises(AuthorizationRefused):  # QA may not approve its own work
        port.approve(created.task_id, approver="QA")
    done = port.approve(created.task_id, approver="ADMIN", reason="looks good")
    assert done.to_stage == "done"
    report_ref, acceptance, authorization = done.evidence_ref
    assert report_ref == fixed.report_id
    task = port.read_task(created.task_id)
    assert task.stage == "done" and task.claims == 1
    last = task.last_transition
    assert last["tool"] == "approve_task" and last["authorization_ref"] == authorization
    assert last["evidence_ref"] == [fixed.report_id, acceptance]
    # The authorization REVIEW carries baton's HMAC proof and is single-use.
    auth = (port.fcop_dir / "reviews" / f"{authorization}.md").read_text()
    assert "review_kind: authorization" in auth and "mac:" in auth
    from fcop.workspace import validate_workspace

    assert validate_workspace(port.root)["valid"]


def test_reject_starts_a_new_attempt_then_approve(port: FcopPort) -> None:
    created = port.create_task(sender="PM", recipient="DEV", subject="Fix", body="fix bug")
    first = port.claim(created.task_id, actor="DEV").attempt_id
    port.write_report(
        task_id=created.task_id,
        attempt_id=first,
        sender="DEV",
        recipient="PM",
        result="done",
        body="v1",
    )
    port.submit(created.task_id, actor="DEV")
    rejected = port.reject(created.task_id, approver="PM", reason="add a test")
    assert (rejected.to_stage, rejected.attempt_id != first) == ("active", True)
    task = port.read_task(created.task_id)
    assert task.stage == "active" and task.attempt_id == rejected.attempt_id and task.claims == 1
    review = port.find_decision(created.task_id, first, reviewer="PM")
    assert review is not None and review.review_kind == "rejection" and "add a test" in review.body
    with pytest.raises(EvidenceError):  # the old attempt's report does not count
        port.submit(created.task_id, actor="DEV")
    port.write_report(
        task_id=created.task_id,
        attempt_id=task.attempt_id,
        sender="DEV",
        recipient="PM",
        result="done",
        body="v2 with test",
    )
    port.submit(created.task_id, actor="DEV")
    assert port.approve(created.task_id, approver="PM").to_stage == "done"


def test_approval_needs_the_adopted_profile(tmp_path: Path) -> None:
    import fcop

    fcop.Project(tmp_path).create_workspace(profiles=[])  # e.g. made by `fcop init`
    status = inspect_workspace_kind(tmp_path)
    assert status.kind == "v4" and not status.authority_adopted
    port = FcopPort(tmp_path, authority=TrustedAuthority(KEY))
    assert not port.can_authorize
    created = port.create_task(sender="ADMIN", recipient="QA", subject="s", body="b")
    attempt = port.claim(created.task_id, actor="QA").attempt_id
    port.write_report(
        task_id=created.task_id,
        attempt_id=attempt,
        sender="QA",
        recipient="ADMIN",
        result="done",
        body="ok",
    )
    port.submit(created.task_id, actor="QA")
    with pytest.raises(AuthorizationRefused, match="fixed when the workspace is created"):
        port.approve(created.task_id, approver="ADMIN")


def test_evaluator_refuses_forged_copied_and_unexpected_proofs() -> None:
    authority = TrustedAuthority(KEY)
    claims = Expectation("PM", "TASK-a", "review", "done", "urn:uuid:1")
    proof = authority.mint(claims, issued_at="2026-01-01T00:00:00+00:00")
    ev = authority.evaluator
    # Outside the port's expectation nothing is authorized, even a genuine proof.
    assert ev(profile_ref=authority.profile_ref, issuer="PM", proof=proof) == "REFUSED"
    with authority.expecting(claims):
        assert ev(profile_ref=authority.profile_ref, issuer="PM", proof=proof) == "AUTHORIZED"
        assert ev(profile_ref=authority.profile_ref, issuer="QA", proof=proof) == "REFUSED"
        assert ev(profile_ref="other", issuer="PM", proof=proof) == "REFUSED"
        forged = {**proof, "subject_ref": "TASK-b"}
        assert ev(profile_ref=authority.profile_ref, issuer="PM", proof=forged) == "REFUSED"
        other_key = TrustedAuthority(b"x" * 32).mint(claims, issued_at=proof["issued_at"])
        assert ev(profile_ref=authority.profile_ref, issuer="PM", proof=other_key) == "REFUSED"
    with authority.expecting(Expectation("PM", "TASK-b", "review", "done", "urn:uuid:1")):
        # A copied proof is useless for another task.
        assert ev(profile_ref=authority.profile_ref, issuer="PM", proof=proof) == "REFUSED"


def test_read_retries_the_two_stage_window(root: Path, authority: TrustedAuthority) -> None:
    port = FcopPort(root, authority=authority)
    created = port.create_task(sender="ADMIN", recipient="QA", subject="s", body="b")
    claim = port.claim(created.task_id, actor="QA")
    active = port.stage_dir("active") / f"{created.task_id}.md"
    ghost = port.stage_dir("review") / active.name
    shutil.copyfile(active, ghost)  # what a reader sees mid-move: two stages

    sleeps: list[float] = []

    def sleep(delay: float) -> None:
        sleeps.append(delay)
        if len(sleeps) == 2:
            ghost.unlink()  # the move completes

    patient = FcopPort(root, authority=authority, sleep=sleep)
    assert patient.read_task(created.task_id).attempt_id == claim.attempt_id
    assert len(sleeps) == 2
    shutil.copyfile(active, ghost)
    impatient = FcopPort(root, authority=authority, read_attempts=3, sleep=lambda _: None)
    with pytest.raises(StateAmbiguous):
        impatient.read_task(created.task_id)
    ghost.unlink()
    with pytest.raises(TaskNotFound):
        impatient.read_task("TASK-0123456789abcdef0123456789abcdef")


def test_every_frozen_code_is_mapped() -> None:
    from fcop.errors import V4ProtocolError, _V4Code

    base = {c.value for c in _V4Code if not c.value.startswith("toolkit:")}
    assert base == set(CODE_TO_ERROR)
    assert len(base) == 31
    err = map_fcop_error(
        V4ProtocolError(_V4Code.STATE_AMBIGUOUS, "two paths", subject_ref="TASK-x")
    )
    assert isinstance(err, StateAmbiguous) and err.code == "STATE_AMBIGUOUS"
    assert err.subject_ref == "TASK-x"
