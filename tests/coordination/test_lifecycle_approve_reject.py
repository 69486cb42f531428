"""baton's O(1) T4/T5 against the real fcop 4.0.5: same bytes, same gate, same refusals.

* Byte compatibility: the port's approve and reject with baton's writer leave a
  workspace byte-identical to the same port on ``fcop.Project`` alone.
* fcop's authorization gate is kept, code for code, on twin workspaces: no
  authorization, a reused one, an expired one, the wrong REVIEW kind, a replaced
  REPORT named, a proof for another attempt.
* Replays: baton's and fcop's replay of baton's T4 return the committed result.
* Constant work: T4 opens no other TASK's REPORT, REVIEW, receipt or TASK file.
"""

from __future__ import annotations

import shutil
import uuid
import warnings
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

from baton.fcop_port.authority import Expectation, TrustedAuthority
from baton.fcop_port.lifecycle import Lifecycle
from baton.fcop_port.lifecycle.approve_reject import approve_reject_operation_id
from baton.fcop_port.port import FcopPort
from baton.fcop_port.workspace import init_workspace
from tests.coordination.conftest import KEY
from tests.coordination.test_lifecycle import _opened_under, _settle, _tree, _validate

START = datetime(2026, 12, 2, 12, 0, tzinfo=UTC)


class _Clock(datetime):
    times: Iterator[datetime] = iter(())

    @classmethod
    def now(cls, tz: Any = None) -> datetime:  # type: ignore[override]
        return next(cls.times)


@contextmanager
def _pinned(
    monkeypatch: pytest.MonkeyPatch, *, reviews: list[uuid.UUID], moves: list[uuid.UUID]
) -> Iterator[None]:
    """REVIEW ids, the move's draws (new attempt, fcop's operation id), clocks, proof nonce."""
    from fcop.v4 import creation as fcop_creation
    from fcop.v4 import lifecycle as fcop_lifecycle

    from baton.fcop_port import authority as baton_authority
    from baton.fcop_port import transitions as task_transitions
    from baton.fcop_port.lifecycle import approve_reject as baton_approve_reject

    _Clock.times = iter(START + timedelta(seconds=i) for i in range(100))
    draw_reviews, draw_moves = iter(reviews), iter(moves)
    with monkeypatch.context() as m:
        m.setattr(fcop_creation, "uuid4", lambda: next(draw_reviews))
        m.setattr(fcop_lifecycle, "uuid4", lambda: next(draw_moves))
        m.setattr(baton_approve_reject, "uuid4", lambda: next(draw_moves))
        for module in (fcop_creation, fcop_lifecycle, baton_approve_reject):
            m.setattr(module, "datetime", _Clock)
        issued = datetime.now(UTC).replace(second=0, microsecond=0)  # one issue time for both
        m.setattr(task_transitions, "_now", lambda: issued)
        m.setattr(baton_authority.secrets, "token_hex", lambda n: "ab" * n)
        yield


def _in_review(root: Path, authority: TrustedAuthority, subject: str = "s") -> tuple[str, str, str]:
    port = FcopPort(root, authority=authority)
    task = port.create_task(sender="ADMIN", recipient="DEV", subject=subject, body="b").task_id
    attempt = port.claim(task, actor="DEV").attempt_id
    report = port.write_report(
        task_id=task, attempt_id=attempt, sender="DEV", recipient="ADMIN", result="done", body="r"
    )
    port.submit(task, actor="DEV")
    return task, attempt, report.report_id


def _ports(root: Path, tmp_path: Path, name: str, authority: TrustedAuthority) -> tuple[Any, Any]:
    theirs, ours = tmp_path / f"{name}-fcop", tmp_path / f"{name}-baton"
    shutil.copytree(root, theirs)
    shutil.copytree(root, ours)
    fcop_port = FcopPort(theirs, authority=authority)
    fcop_port._lifecycle = None  # every call through fcop.Project
    return fcop_port, FcopPort(ours, authority=authority)


@pytest.mark.parametrize("decision", ["approve", "reject"])
def test_approve_and_reject_write_exactly_fcops_bytes(
    decision: str,
    root: Path,
    authority: TrustedAuthority,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    task, attempt, _ = _in_review(root, authority)
    theirs, ours = _ports(root, tmp_path, decision, authority)
    reviews = [uuid.uuid4(), uuid.uuid4()]
    new_attempt = uuid.uuid4()
    tool = "approve_task" if decision == "approve" else "reject_task"
    op = uuid.UUID(approve_reject_operation_id(ours.workspace_id, task, attempt, tool))
    results = []
    if datetime.now(UTC).second > 55:  # both sides must see the same minute
        import time

        time.sleep(60 - datetime.now(UTC).second)
    for port, moves in ((theirs, [new_attempt, op]), (ours, [new_attempt])):
        if decision == "approve":
            moves = moves[1:]  # T4 keeps the attempt: no draw for it
        with _pinned(monkeypatch, reviews=list(reviews), moves=moves):
            act = port.approve if decision == "approve" else port.reject
            results.append(act(task, approver="ADMIN", reason="ok"))
    assert _tree(ours.root) == _tree(theirs.root)
    assert results[0] == results[1]
    check = _validate(ours.root)
    assert check["valid"] and not check["warnings"], check
    moved = ours.read_task(task)
    assert moved.stage == ("done" if decision == "approve" else "active")


def _grant(
    port: FcopPort,
    task: str,
    attempt: str,
    report: str,
    *,
    kind: str = "acceptance",
    to_stage: str = "done",
    ttl: timedelta = timedelta(minutes=10),
    issued: datetime | None = None,
) -> tuple[str, str]:
    """An evidence REVIEW of ``kind`` and an authorization for ``review → to_stage``."""
    authority = port.authority
    assert authority is not None
    review = port._call(
        "write_review",
        workspace_id=port.workspace_id,
        sender="ADMIN",
        recipient="DEV",
        subject_ref=task,
        review_kind=kind,
        decision="approved" if kind == "acceptance" else "rejected",
        attempt_id=attempt,
        references=[report],
        body="ok",
    )["review_id"]
    issued = issued or datetime.now(UTC)
    expectation = Expectation(
        issuer="ADMIN", subject_ref=task, from_stage="review", to_stage=to_stage, attempt_id=attempt
    )
    with authority.expecting(expectation):
        auth = port._call(
            "mark_human_approved",
            review_id=review,
            decision="approved",
            approver="ADMIN",
            profile_ref=authority.profile_ref,
            from_stage="review",
            to_stage=to_stage,
            attempt_id=attempt,
            issued_at=issued.isoformat(),
            expires_at=(issued + ttl).isoformat(),
            issuer_proof=authority.mint(expectation, issued_at=issued.isoformat()),
            comment="grant",
        )["review_id"]
    return review, auth


def _move(writer: Any, authority: TrustedAuthority, task: str, attempt: str, **kw: Any) -> Any:
    tool = kw.pop("tool", "approve_task")
    to_stage = "done" if tool == "approve_task" else "active"
    expectation = Expectation(
        issuer="ADMIN", subject_ref=task, from_stage="review", to_stage=to_stage, attempt_id=attempt
    )
    with authority.expecting(expectation), warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)
        if isinstance(writer, Lifecycle):
            return writer.approve_or_reject(task, tool=tool, actor="ADMIN", **kw)
        return writer.transition(
            task_id=task, from_stage="review", to_stage=to_stage, tool=tool, actor="ADMIN", **kw
        )


def _outcomes(
    root: Path,
    tmp_path: Path,
    authority: TrustedAuthority,
    name: str,
    act: Callable[[Any], Any],
) -> tuple[Any, Any]:
    import fcop

    out = []
    for side in ("fcop", "baton"):
        copy = tmp_path / f"{name}-{side}"
        shutil.copytree(root, copy)
        trusted = {authority.profile_ref: authority.evaluator}
        writer = (
            fcop.Project(copy, trusted_profiles=trusted)
            if side == "fcop"
            else Lifecycle(copy, trusted_profiles=trusted)
        )
        try:
            result = act(writer)
            out.append(("ok", result["to_stage"], result["existing"]))
        except Exception as exc:
            out.append(("error", getattr(exc, "code", type(exc).__name__)))
    return out[0], out[1]


def test_fcops_gate_is_kept_code_for_code(
    root: Path, authority: TrustedAuthority, tmp_path: Path
) -> None:
    task, attempt, report = _in_review(root, authority)
    port = FcopPort(root, authority=authority)
    review, auth = _grant(port, task, attempt, report)
    rejection, reject_auth = _grant(
        port, task, attempt, report, kind="rejection", to_stage="active"
    )
    task2, attempt2, report2 = _in_review(root, authority, subject="another")
    other_review, other_auth = _grant(port, task2, attempt2, report2)
    refs = {"report_ref": report, "review_ref": review, "authorization_ref": auth}
    profile = {"profile_ref": authority.profile_ref}

    def move(**kw: Any) -> Callable[[Any], Any]:
        return lambda w: _move(w, authority, task, attempt, **kw)

    def expired(act: Callable[[Any], Any]) -> Callable[[Any], Any]:
        """``act`` an hour later: past the authorization's ten minutes (fcop's own clock)."""
        from fcop.v4 import authorization as fcop_authorization

        def later(w: Any) -> Any:
            real = fcop_authorization._utc_now
            fcop_authorization._utc_now = lambda: real() + timedelta(hours=1)
            try:
                return act(w)
            finally:
                fcop_authorization._utc_now = real

        return later

    cases: dict[str, Callable[[Any], Any]] = {
        "approved": move(**refs, **profile),
        "rejected": move(
            tool="reject_task",
            report_ref=report,
            review_ref=rejection,
            authorization_ref=reject_auth,
        ),
        "no authorization": move(report_ref=report, review_ref=review),
        "no evidence review": move(report_ref=report, authorization_ref=auth),
        "expired": expired(move(**refs)),
        "rejection as evidence for approval": move(
            report_ref=report, review_ref=rejection, authorization_ref=auth
        ),
        "authorization for the other edge": move(
            report_ref=report, review_ref=review, authorization_ref=reject_auth
        ),
        "another TASK's evidence and authorization": move(
            report_ref=report, review_ref=other_review, authorization_ref=other_auth
        ),
        "another TASK's authorization": move(
            report_ref=report, review_ref=review, authorization_ref=other_auth
        ),
        "not the head": move(
            report_ref="REPORT-" + "0" * 32, review_ref=review, authorization_ref=auth
        ),
        "family digest": move(**refs, family_digest="sha256:" + "0" * 64),
        "another profile": move(**refs, profile_ref="baton-other-profile"),
    }
    for name, act in cases.items():
        theirs, ours = _outcomes(root, tmp_path, authority, name.replace(" ", "-"), act)
        assert theirs == ours, (name, theirs, ours)
    assert _outcomes(root, tmp_path, authority, "ok", cases["approved"])[1][0] == "ok"

    # Replays and reuse on one workspace: baton commits, then both writers replay it.
    approved = _move(
        Lifecycle(root, trusted_profiles={authority.profile_ref: authority.evaluator}),
        authority,
        task,
        attempt,
        **refs,
    )
    assert approved["status"] == "COMMITTED" and not approved["existing"]

    def after(act: Callable[[Any], Any], name: str) -> tuple[Any, Any]:
        return _outcomes(root, tmp_path, authority, name, act)

    theirs, ours = after(move(**refs), "replay")  # the same request: the committed result
    assert theirs == ours == ("ok", "done", True), (theirs, ours)
    theirs, ours = after(cases["approved"], "reuse")  # another request, same authorization
    assert theirs == ours == ("error", "AUTHORIZATION_REUSED"), (theirs, ours)
    theirs, ours = after(cases["rejected"], "after-approval")
    assert theirs == ours and theirs[0] == "error", (theirs, ours)


def test_approve_touches_the_same_files_whatever_the_history(
    tmp_path: Path, authority: TrustedAuthority
) -> None:
    def touched(settled: int) -> int:
        root = tmp_path / f"h{settled}"
        root.mkdir()
        init_workspace(root, authority)
        port = FcopPort(root, authority=authority)
        _settle(port, settled)
        task, attempt, report = _in_review(root, authority)
        port.find_decision(task, attempt)  # the indexes have listed the history once
        review, auth = _grant(port, task, attempt, report)
        lifecycle = port.lifecycle
        assert lifecycle is not None
        opened = _opened_under(
            root,
            lambda: _move(
                lifecycle,
                authority,
                task,
                attempt,
                report_ref=report,
                review_ref=review,
                authorization_ref=auth,
            ),
        )
        own = {task, report, review, auth}
        for path in opened:
            name = path.rsplit("/", 1)[-1]
            stem = name.removesuffix(".md")
            if name.startswith(("TASK-", "REPORT-", "REVIEW-")):
                assert stem in own, path  # never another TASK's files
            if name.startswith("transition-"):
                op = approve_reject_operation_id(port.workspace_id, task, attempt, "approve_task")
                assert op.split(":")[-1].replace("-", "") in name, path
        return len([p for p in opened if p not in {"/reports", "/reviews"}])

    assert touched(0) == touched(10)


def test_the_writer_needs_a_trusted_evaluator(tmp_path: Path) -> None:
    root = tmp_path / "ws"
    root.mkdir()
    authority = TrustedAuthority(KEY)
    init_workspace(root, authority)
    task, attempt, report = _in_review(root, authority)
    review, auth = _grant(FcopPort(root, authority=authority), task, attempt, report)
    with pytest.raises(Exception) as refused:
        _move(
            Lifecycle(root),
            authority,
            task,
            attempt,
            report_ref=report,
            review_ref=review,
            authorization_ref=auth,
        )  # no trusted_profiles given to this writer
    assert getattr(refused.value, "code", None) == "AUTHORIZATION_PROFILE_UNAVAILABLE"


@pytest.mark.parametrize("stage", ["PREPARED", "TARGET_DURABLE", "COMMITTED"])
def test_an_interrupted_approval_is_finished_by_replaying_it(
    stage: str, root: Path, authority: TrustedAuthority
) -> None:
    """Interrupted at each durable boundary: the same request finishes it exactly once."""
    task, attempt, report = _in_review(root, authority)
    review, auth = _grant(FcopPort(root, authority=authority), task, attempt, report)
    refs = {"report_ref": report, "review_ref": review, "authorization_ref": auth}
    trusted = {authority.profile_ref: authority.evaluator}
    crashing = Lifecycle(root, trusted_profiles=trusted)
    crashing.workspace.inject_fault(operation="transition", stage=stage)
    with pytest.raises(Exception, match=stage):
        _move(crashing, authority, task, attempt, **refs)
    result = _move(Lifecycle(root, trusted_profiles=trusted), authority, task, attempt, **refs)
    assert result["status"] == "COMMITTED" and result["existing"]
    fields = Lifecycle(root).read_task(task)
    assert [t["tool"] for t in fields["transitions"]].count("approve_task") == 1
    assert Path(fields["path"]).parent.name == "done"
    check = _validate(root)
    assert check["valid"] and not check["warnings"], check
