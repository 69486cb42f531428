"""baton's O(1) lifecycle writer against the real fcop 4.0.5: same bytes, same rules, O(1).

* Byte compatibility: given the same random draws and clock, baton's create and
  claim leave a workspace *byte-identical* to the one fcop's own ``create_task``
  and ``transition`` leave (every TASK, fact, receipt and lock file).
* fcop's validator accepts every workspace baton writes (property test).
* Constant work: the files a create or claim opens do not depend on history.
* fcop's refusals are kept (conflicts, symlinks, manifest changes, replays).
"""

from __future__ import annotations

import json
import os
import random
import shutil
import sys
import uuid
import warnings
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
import yaml
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from baton.fcop_errors import (
    InvalidEnvelope,
    LifecycleConflict,
    OperationConflict,
    WorkspaceError,
    map_fcop_error,
)
from baton.fcop_port import lifecycle as lifecycle_pkg
from baton.fcop_port.authority import TrustedAuthority
from baton.fcop_port.lifecycle import Lifecycle
from baton.fcop_port.lifecycle.claim import claim_operation_id
from baton.fcop_port.lifecycle.create import derived_task_id
from baton.fcop_port.lifecycle.envelopes import EnvelopeMemo, emitted_frontmatter
from baton.fcop_port.port import FcopPort
from baton.fcop_port.workspace import init_workspace
from baton.intake.create_fact import operation_key
from tests.coordination.conftest import KEY


def _fcop() -> Any:
    import fcop

    return fcop


def _validate(root: Path) -> dict[str, Any]:
    from fcop.workspace import validate_workspace

    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)
        result: dict[str, Any] = validate_workspace(root)
    return result


def _tree(root: Path) -> dict[str, tuple[int, bytes]]:
    out = {}
    for path in sorted((root / "fcop").rglob("*")):
        if path.is_file():
            out[path.relative_to(root).as_posix()] = (path.stat().st_mode, path.read_bytes())
    return out


# ------------------------------------------------------------ byte compatibility


class _Clock(datetime):
    """``datetime`` whose ``now`` hands out a fixed sequence (fcop and baton share one)."""

    times: Iterator[datetime] = iter(())

    @classmethod
    def now(cls, tz: Any = None) -> datetime:  # type: ignore[override]
        return next(cls.times)


@contextmanager
def _draws(
    monkeypatch: pytest.MonkeyPatch, *, creation: list[uuid.UUID], moves: list[uuid.UUID]
) -> Iterator[None]:
    """Pin fcop's (and baton's) random ids and clock for one side of the comparison."""
    from fcop.v4 import creation as fcop_creation
    from fcop.v4 import lifecycle as fcop_lifecycle

    from baton.fcop_port.lifecycle import claim as baton_claim

    start = datetime(2026, 12, 1, 12, 0, tzinfo=UTC)
    _Clock.times = iter(start + timedelta(seconds=i) for i in range(100))
    draw_creation, draw_moves = iter(creation), iter(moves)
    with monkeypatch.context() as m:
        m.setattr(fcop_creation, "uuid4", lambda: next(draw_creation))
        m.setattr(fcop_lifecycle, "uuid4", lambda: next(draw_moves))
        m.setattr(baton_claim, "uuid4", lambda: next(draw_moves))
        for module in (fcop_creation, fcop_lifecycle, baton_claim):
            m.setattr(module, "datetime", _Clock)
        yield


REQUESTS: dict[str, dict[str, Any]] = {
    "plain": {"subject": "Write the report", "body": "Do the work.\n"},
    "unicode and folding": {
        "subject": "Überprüfe 中文 🙂 " + "a long subject that the emitter must fold " * 4,
        "body": "Zeile 1\r\nZeile 2\n\n\n",
        "priority": "P0",
    },
    "quoting": {"subject": "key: value # not a comment", "body": "- not a list\n"},
    "relations": {"subject": "child", "body": "b", "parent": "PARENT", "references": ["PARENT"]},
    "unresolved reference": {"subject": "s", "body": "b", "references": ["REPORT-missing"]},
}


@pytest.mark.parametrize("shape", sorted(REQUESTS))
def test_create_and_claim_write_exactly_fcops_bytes(
    shape: str, tmp_path: Path, authority: TrustedAuthority, monkeypatch: pytest.MonkeyPatch
) -> None:
    base = tmp_path / "base"
    base.mkdir()
    init_workspace(base, authority)
    parent = FcopPort(base, authority=authority).create_task(
        sender="ADMIN", recipient="PM", subject="parent", body="p"
    )
    request = {
        k: ([parent.task_id if r == "PARENT" else r for r in v] if k == "references" else v)
        for k, v in REQUESTS[shape].items()
    }
    if request.get("parent") == "PARENT":
        request["parent"] = parent.task_id
    theirs, ours = tmp_path / "fcop", tmp_path / "baton"
    shutil.copytree(base, theirs)
    shutil.copytree(base, ours)
    workspace_id = json.loads((base / "fcop" / "fcop.json").read_bytes())["workspace_id"]
    opid = "baton:bytes-" + shape.replace(" ", "-")
    task_id = derived_task_id(operation_key(workspace_id, opid))
    attempt = uuid.UUID(int=random.Random(shape).getrandbits(128), version=4)
    receipt_op = uuid.UUID(claim_operation_id(workspace_id, task_id))
    call = {"sender": "ADMIN", "recipient": "DEV", "operation_id": opid, **request}

    # fcop's own writer, its random draws pinned to what baton derives.
    with _draws(monkeypatch, creation=[uuid.UUID(hex=task_id[5:])], moves=[attempt, receipt_op]):
        project = _fcop().Project(theirs)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", DeprecationWarning)
            made = project.create_task(workspace_id=workspace_id, **call)
            project.transition(
                task_id=made["task_id"],
                from_stage="inbox",
                to_stage="active",
                tool="claim_task",
                actor="DEV",
            )
    with _draws(monkeypatch, creation=[uuid.uuid4()], moves=[attempt]):
        lifecycle = Lifecycle(ours)
        created = lifecycle.create(**call)
        claimed = lifecycle.claim(created["task_id"], actor="DEV")
    assert made["task_id"] == created["task_id"] == task_id
    assert claimed["attempt_id"] == attempt.urn
    assert _tree(ours) == _tree(theirs)
    assert _validate(ours)["valid"]


# ------------------------------------------------------------ fcop's validator


_text = st.text(
    st.characters(blacklist_categories=("Cs",), blacklist_characters="\x00"),
    min_size=1,
    max_size=120,
)


@settings(
    max_examples=25,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(
    subjects=st.lists(_text, min_size=1, max_size=3),
    body=_text,
    priority=st.sampled_from(["P0", "P1", "P2", "P3"]),
    nest=st.booleans(),
    claim_all=st.booleans(),
)
def test_fcops_validator_accepts_every_workspace_baton_writes(
    tmp_path_factory: pytest.TempPathFactory,
    subjects: list[str],
    body: str,
    priority: str,
    nest: bool,
    claim_all: bool,
) -> None:
    root = tmp_path_factory.mktemp("prop")
    init_workspace(root, TrustedAuthority(KEY))
    lifecycle = Lifecycle(root)
    parent: str | None = None
    made = []
    project = _fcop().Project(root)
    for i, subject in enumerate(subjects):
        request = {
            "sender": "ADMIN",
            "recipient": "DEV",
            "subject": subject,
            "body": body,
            "priority": priority,
        }
        if parent is not None:
            request["parent"] = parent
        try:
            created = lifecycle.create(operation_id=f"prop-{i}", **request)
        except Exception as exc:  # fcop must refuse it the same way (e.g. a "---" line)
            with pytest.raises(type(exc)) as theirs:
                project.create_task(
                    workspace_id=lifecycle.workspace_id, operation_id=f"fcop-{i}", **request
                )
            assert getattr(theirs.value, "code", None) == getattr(exc, "code", None)
            continue
        made.append(created["task_id"])
        if nest:
            parent = created["task_id"]
    for task in made if claim_all else made[:1]:
        lifecycle.claim(task, actor="DEV")
    check = _validate(root)
    assert check["valid"], check["errors"]
    assert check["checked"] == len(made)
    for task in made:
        assert lifecycle.read_task(task) == project.read_task(task_id=task)


def test_fcops_refusals_are_kept(root: Path) -> None:
    lifecycle = Lifecycle(root)
    request = {"sender": "ADMIN", "recipient": "DEV", "subject": "s", "body": "b"}
    with pytest.raises(Exception) as blank:
        lifecycle.create(operation_id="op-blank", **{**request, "subject": ""})
    assert isinstance(map_fcop_error(blank.value), InvalidEnvelope)
    first = lifecycle.create(operation_id="op-1", **request)
    again = lifecycle.create(operation_id="op-1", **request)
    assert again["existing"] and again["task_id"] == first["task_id"]
    with pytest.raises(Exception) as conflict:
        lifecycle.create(operation_id="op-1", **{**request, "body": "other"})
    assert isinstance(map_fcop_error(conflict.value), OperationConflict)
    with pytest.raises(Exception) as orphan:
        lifecycle.create(operation_id="op-2", **request, parent="TASK-doesnotexist")
    assert isinstance(map_fcop_error(orphan.value), InvalidEnvelope)
    lifecycle.claim(first["task_id"], actor="DEV")
    with pytest.raises(Exception) as twice:
        lifecycle.claim(first["task_id"], actor="DEV")  # T2 is not replayable in-process
    assert isinstance(map_fcop_error(twice.value), LifecycleConflict)
    with pytest.raises(Exception) as lost:
        Lifecycle(root).claim(first["task_id"], actor="QA")
    assert isinstance(map_fcop_error(lost.value), LifecycleConflict)
    # A fresh process replaying the same claim gets the committed result back.
    replay = Lifecycle(root).claim(first["task_id"], actor="DEV")
    assert replay["existing"] and replay["status"] == "COMMITTED"


def test_symlinks_and_a_changed_manifest_are_refused_like_fcop(root: Path) -> None:
    lifecycle = Lifecycle(root)
    created = lifecycle.create(operation_id="op", sender="A", recipient="B", subject="s", body="b")
    inbox = root / "fcop" / "_lifecycle" / "inbox"
    outside = root.parent / "outside.md"
    outside.write_bytes(Path(created["path"]).read_bytes())
    link = inbox / "TASK-linked.md"
    link.symlink_to(outside)
    with pytest.raises(Exception) as linked:
        lifecycle.read_task("TASK-linked")
    assert isinstance(map_fcop_error(linked.value), InvalidEnvelope)
    link.unlink()
    manifest = root / "fcop" / "fcop.json"
    value = json.loads(manifest.read_bytes())
    manifest.write_text(json.dumps({**value, "workspace_id": uuid.uuid4().urn}))
    with pytest.raises(Exception) as moved:
        lifecycle.claim(created["task_id"], actor="B")
    assert isinstance(map_fcop_error(moved.value), WorkspaceError)
    assert moved.value.code == "WORKSPACE_ID_MISMATCH"


# ------------------------------------------------------------ constant work


def _opened_under(root: Path, action: Callable[[], Any]) -> list[str]:
    """Workspace files ``action`` opens or lists (``open`` / ``os.scandir`` audit events)."""
    seen: list[str] = []
    prefix = str(root / "fcop")
    active = [True]

    def hook(event: str, args: tuple[Any, ...]) -> None:
        if active[0] and event in {"open", "os.scandir", "os.listdir"} and args:
            target = os.fsdecode(args[0]) if isinstance(args[0], str | bytes) else ""
            if target.startswith(prefix):
                seen.append(target[len(prefix) :])

    sys.addaudithook(hook)
    try:
        action()
    finally:
        active[0] = False
    return seen


def _settle(port: FcopPort, n: int) -> None:
    for i in range(n):
        task = port.create_task(sender="ADMIN", recipient="DEV", subject=f"old {i}", body="b")
        claim = port.claim(task.task_id, actor="DEV")
        report = port.write_report(
            task_id=task.task_id,
            attempt_id=claim.attempt_id,
            sender="DEV",
            recipient="ADMIN",
            result="done",
            body="done",
        )
        port.submit(task.task_id, actor="DEV", report_ref=report.report_id)
        port.approve(task.task_id, approver="ADMIN")


def test_create_and_claim_touch_the_same_files_whatever_the_history(
    tmp_path: Path, authority: TrustedAuthority
) -> None:
    def touched(settled: int) -> tuple[int, int]:
        root = tmp_path / f"h{settled}"
        root.mkdir()
        init_workspace(root, authority)
        port = FcopPort(root, authority=authority)
        _settle(port, settled)
        made: list[str] = []

        def create() -> None:
            made.append(
                port.create_task(sender="ADMIN", recipient="DEV", subject="new", body="b").task_id
            )

        opened = _opened_under(root, create)
        task = made[0]
        claimed = _opened_under(root, lambda: port.claim(task, actor="DEV"))
        key = operation_key(port.workspace_id, port.read_task(task).operation_id or "")
        receipt = claim_operation_id(port.workspace_id, task).split(":")[-1].replace("-", "")
        for path in opened + claimed:
            name = path.rsplit("/", 1)[-1]
            assert not name.startswith(("REPORT-", "REVIEW-", "ISSUE-")), path
            if "TASK-" in name:
                assert task in name, path  # never a settled TASK
            if name.startswith("create-"):
                assert key in name, path  # never another operation's fact
            if name.startswith("transition-"):
                assert receipt in name, path  # never another receipt
        return len(opened), len(claimed)

    quiet, busy = touched(0), touched(12)
    assert quiet == busy, (quiet, busy)


def test_the_port_falls_back_to_fcop_project_with_another_fcop(
    root: Path, authority: TrustedAuthority, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(lifecycle_pkg, "available", lambda: False)
    port = FcopPort(root, authority=authority)
    assert port._lifecycle is None
    task = port.create_task(sender="ADMIN", recipient="DEV", subject="s", body="b")
    assert task.task_id != derived_task_id(
        operation_key(port.workspace_id, task.operation_id)
    )  # fcop's random id: Core did it
    assert port.claim(task.task_id, actor="DEV").to_stage == "active"
    monkeypatch.undo()
    assert FcopPort(root, authority=authority)._lifecycle is not None


# ------------------------------------------------------------ parsing


def test_the_memo_is_fcops_parser_with_isolated_copies() -> None:
    from fcop.v4.encoding import _parse_envelope_bytes

    data = b"---\nprotocol: fcop\nreferences:\n- a\n---\nbody\n"
    memo = EnvelopeMemo(capacity=2)
    first = memo.parse(data)
    assert first == _parse_envelope_bytes(data)
    first["references"].append("mutated")
    assert memo.parse(data)["references"] == ["a"]
    assert memo.misses == 1
    with pytest.raises(Exception) as bad:
        memo.parse(b"---\na: 1\na: 2\n---\n")  # fcop refuses duplicate keys; so does the memo
    assert getattr(bad.value, "code", None) == "INVALID_ENVELOPE"


@settings(max_examples=300, deadline=None)
@given(
    st.dictionaries(
        st.text(min_size=1, max_size=12),
        st.one_of(
            _text,
            st.none(),
            st.integers(),
            st.lists(_text, max_size=3),
            st.dictionaries(st.text(min_size=1, max_size=5), _text, max_size=3),
        ),
        min_size=1,
        max_size=6,
    )
)
@example(fields={"---\n": None})  # found by hypothesis: fcop's split cuts inside the key
@example(fields={"subject": "x---"})
def test_libyaml_reads_pyyamls_emitter_output_exactly_as_fcops_parser(
    fields: dict[str, Any],
) -> None:
    """Why the C loader may check baton's own output: on emitter output both parsers agree.

    (Not always with the input: PyYAML's emitter writes a lone U+0085 so that it
    reads back as a space. fcop's writer does the same; baton then seeds its memo
    with what the parsers read back, never with what it meant to write.)
    """
    from fcop.errors import V4ProtocolError
    from fcop.v4.encoding import _parse_envelope_bytes

    header = yaml.safe_dump(fields, allow_unicode=True, sort_keys=False)
    data = ("---\n" + header + "---\n\nbody\n").encode()
    try:
        expected = _parse_envelope_bytes(data)
    except V4ProtocolError:
        # fcop cuts the frontmatter at the first "---\n" anywhere (a key or value that
        # emits one, e.g. "x---"): the check must refuse such bytes too, never read more.
        expected = None
    assert emitted_frontmatter(data) == expected


def test_why_libyaml_is_kept_away_from_untrusted_files_and_from_writing() -> None:
    from fcop.v4.encoding import _parse_envelope_bytes

    hostile = b"---\nsubject: a\tb #c\n---\n"  # PyYAML's scanner refuses; libyaml accepts
    with pytest.raises(Exception) as refused:
        _parse_envelope_bytes(hostile)
    assert getattr(refused.value, "code", None) == "INVALID_ENVELOPE"
    assert emitted_frontmatter(hostile) is not None
    long = {"subject": "a\tb " * 30}  # a double-quoted scalar libyaml folds differently
    assert yaml.dump(long, Dumper=yaml.CSafeDumper, allow_unicode=True) != yaml.safe_dump(
        long, allow_unicode=True
    )


def test_the_fast_check_falls_back_to_fcops_on_any_layout_change(root: Path) -> None:
    lifecycle = Lifecycle(root)
    first = lifecycle.create(operation_id="a", sender="A", recipient="B", subject="s", body="b")
    manifest = root / "fcop" / "fcop.json"
    value = json.loads(manifest.read_bytes())
    manifest.write_text(json.dumps(value, indent=2) + "\n")  # same manifest, other bytes
    assert lifecycle.claim(first["task_id"], actor="B")["status"] == "COMMITTED"  # fcop: equal
    assert lifecycle.workspace.manifest_bytes == manifest.read_bytes()  # rebound
    cold = root / "fcop" / "cold"
    moved = root.parent / "cold-elsewhere"
    cold.rename(moved)
    cold.symlink_to(moved)
    with pytest.raises(Exception) as linked:
        lifecycle.create(operation_id="b", sender="A", recipient="B", subject="s", body="b")
    assert getattr(linked.value, "code", None) == "INVALID_ENVELOPE"  # fcop's safe_path verdict


def test_a_move_finishing_between_listing_and_reading_is_listed_again(
    root: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """fcop's reader answers INVALID_ENVELOPE here; a claim that lost the race must lose."""
    lifecycle = Lifecycle(root)
    task = lifecycle.create(operation_id="op", sender="A", recipient="B", subject="s", body="b")
    inbox = Path(task["path"])
    active = inbox.parents[1] / "active" / inbox.name
    real = Path.read_bytes
    moved: list[Any] = []

    def racing(self: Path) -> bytes:
        if self == inbox and not moved:  # the winner's T2 lands right after our lstat
            moved.append(None)
            moved[0] = Lifecycle(root).claim(task["task_id"], actor="B")
        return real(self)

    monkeypatch.setattr(Path, "read_bytes", racing)
    with pytest.raises(Exception) as lost:
        lifecycle.claim(task["task_id"], actor="C")
    assert isinstance(map_fcop_error(lost.value), LifecycleConflict), lost.value
    assert moved and active.exists() and not inbox.exists()
