"""The guarded parse and the bounded YAML loader, over the hostile corpus and real Core files."""

from __future__ import annotations

import resource
import time
from pathlib import Path

import pytest
import yaml

from baton.fcop_errors import InvalidEnvelope
from baton.fcop_port.authority import TrustedAuthority
from baton.fcop_port.port import FcopPort
from baton.intake.limits import DEFAULT_LIMITS, IntakeLimits
from baton.intake.screen import Refused, Screened, screen_envelope, screen_json
from baton.intake.yaml_guard import (
    YamlLimitError,
    bounded_loader,
    expanded_size,
    harden_fcop,
)
from tests.support.hostile import CORPUS, Hostile, alias_bomb, with_header

FILE_CORPUS = [h for h in CORPUS if h.name not in ("FIFO", "directory", "symlink to /dev/zero")]


@pytest.fixture
def template(port: FcopPort) -> str:
    created = port.create_task(sender="ADMIN", recipient="DEV", subject="template", body="b")
    return created.path.read_text()


def written(hostile: Hostile, tmp_path: Path, template: str) -> bytes:
    path = tmp_path / "TASK-hostile.md"
    hostile.write(path, "TASK-hostile", template)
    if path.stat().st_size > 16 * 1024 * 1024:
        return path.open("rb").read(DEFAULT_LIMITS.max_file_bytes + 1)  # what the worker reads
    return path.read_bytes()


@pytest.mark.parametrize("hostile", FILE_CORPUS, ids=lambda h: h.name)
def test_each_hostile_file_is_refused_with_its_reason(
    hostile: Hostile, tmp_path: Path, template: str
) -> None:
    data = written(hostile, tmp_path, template)
    verdict = screen_envelope(data, expect_id="TASK-hostile")
    assert isinstance(verdict, Refused), verdict
    assert verdict.reason == hostile.reason, verdict
    assert verdict.detail and "\x1b" not in verdict.detail and "\u202e" not in verdict.detail


def test_every_envelope_core_writes_passes(port: FcopPort, authority: TrustedAuthority) -> None:
    task = port.create_task(sender="ADMIN", recipient="DEV", subject="Ship: v1 (é)", body="b")
    claim = port.claim(task.task_id, actor="DEV")
    port.write_report(
        task_id=task.task_id,
        attempt_id=claim.attempt_id,
        sender="DEV",
        recipient="ADMIN",
        result="done",
        body="ok",
    )
    port.submit(task.task_id, actor="DEV")
    port.approve(task.task_id, approver="ADMIN", reason="fine")
    port.write_issue(sender="DEV", recipient="ADMIN", severity="low", body="note")
    files = sorted(port.fcop_dir.glob("*/*.md")) + sorted(port.fcop_dir.glob("_lifecycle/*/*.md"))
    kinds = set()
    for path in files:
        verdict = screen_envelope(path.read_bytes(), expect_id=path.stem)
        assert isinstance(verdict, Screened), (path, verdict)
        kinds.add(verdict.kind)
    assert kinds == {"TASK", "REPORT", "REVIEW", "ISSUE"}
    for path in sorted((port.fcop_dir / "operations").glob("*.json")):
        assert isinstance(screen_json(path.read_bytes()), dict), path


def test_screened_fields_and_digest(template: str) -> None:
    data = with_header(template, "TASK-x").encode()
    verdict = screen_envelope(data, expect_id="TASK-x")
    assert isinstance(verdict, Screened)
    assert (verdict.kind, verdict.envelope_id, verdict.subject) == ("TASK", "TASK-x", "template")
    assert verdict.operation_id and verdict.size == len(data)
    assert isinstance(screen_envelope(data, expect_id="TASK-y"), Refused)


def test_limits_are_exact_at_the_boundary() -> None:
    limits = IntakeLimits(max_depth=3, max_anchors=2, max_aliases=2)
    loader = bounded_loader(yaml.SafeLoader, limits)
    assert yaml.load("a: [[1]]", Loader=loader) == {"a": [[1]]}  # depth 3
    with pytest.raises(YamlLimitError) as deep:
        yaml.load("a: [[[1]]]", Loader=loader)
    assert deep.value.reason == "yaml_too_deep"
    assert yaml.load("a: &x 1\nb: &y 2\nc: *x\nd: *y", Loader=loader)["d"] == 2
    with pytest.raises(YamlLimitError) as anchors:
        yaml.load("a: &x 1\nb: &y 2\nc: &z 3", Loader=loader)
    assert anchors.value.reason == "yaml_anchors"
    with pytest.raises(YamlLimitError) as aliases:
        yaml.load("a: &x 1\nb: [*x, *x, *x]", Loader=loader)
    assert aliases.value.reason == "yaml_aliases"


def test_expansion_is_measured_without_expanding() -> None:
    limits = IntakeLimits(max_nodes=10**12, max_aliases=10**6, max_expanded_chars=10**12)
    node = yaml.compose(alias_bomb(levels=9, width=9), Loader=yaml.SafeLoader)
    started = time.perf_counter()
    nodes, chars = expanded_size(node, limits)
    assert time.perf_counter() - started < 1.0
    assert nodes > 9**9 and chars > 3 * 9**9
    with pytest.raises(YamlLimitError) as exc:
        expanded_size(node, DEFAULT_LIMITS)
    assert exc.value.reason == "yaml_expansion"


def test_hardened_core_refuses_an_alias_bomb_without_exploding(
    port: FcopPort, template: str
) -> None:
    """Failing-first: fcop 4.0.5 alone spends minutes and gigabytes here (22.7 GB seen)."""
    inbox = port.stage_dir("inbox")
    # 7 levels: enough to show the failure without hardening (2.5 s, +120 MB), not a hang.
    (inbox / "TASK-bomb.md").write_text(with_header(template, "TASK-bomb", alias_bomb(levels=7)))
    before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    with pytest.raises(InvalidEnvelope):
        port.read_task("TASK-bomb")
    grown_mib = (resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - before) / 1024
    assert grown_mib < 50


def test_harden_is_idempotent_and_keeps_cores_duplicate_key_rule() -> None:
    from fcop.v4 import encoding

    assert harden_fcop() is harden_fcop() is encoding._UniqueLoader
    with pytest.raises(Exception, match="duplicate"):
        yaml.load("a: 1\na: 2", Loader=encoding._UniqueLoader)


@pytest.fixture(params=["fcop", "baton"])
def writer(request: pytest.FixtureRequest, port: FcopPort, monkeypatch: pytest.MonkeyPatch) -> str:
    """Both T1 writers: fcop.Project (its create scan reads every TASK and fact whole) and
    baton's O(1) lifecycle writer (reads only the new TASK's own relations)."""
    if request.param == "fcop":
        monkeypatch.setattr(port, "_lifecycle", None)
    else:
        assert port.lifecycle is not None
    return str(request.param)


def _create_next(port: FcopPort, writer: str, match: str | None = None) -> None:
    """fcop's scan must fail cleanly on the hostile file; baton's writer never reads it."""
    if writer == "fcop":
        with pytest.raises(InvalidEnvelope, match=match):
            port.create_task(sender="ADMIN", recipient="QA", subject="next", body="b")
    else:
        created = port.create_task(sender="ADMIN", recipient="QA", subject="next", body="b")
        assert port.read_task(created.task_id).stage == "inbox"


def test_hardened_core_refuses_deep_nesting_without_recursion_error(
    port: FcopPort, template: str, writer: str
) -> None:
    inbox = port.stage_dir("inbox")
    (inbox / "TASK-deep.md").write_text(
        with_header(template, "TASK-deep", "deep: " + "[" * 5000 + "]" * 5000)
    )
    with pytest.raises(InvalidEnvelope):
        port.read_task("TASK-deep")
    _create_next(port, writer)


def test_deep_json_fact_is_an_invalid_envelope_not_a_recursion_error(
    port: FcopPort, writer: str
) -> None:
    (port.fcop_dir / "operations" / "create-hostile.json").write_text("[" * 100_000 + "]" * 100_000)
    _create_next(port, writer)


def test_oversize_file_anywhere_stops_create_before_core_reads_it(
    port: FcopPort, writer: str
) -> None:
    done = port.stage_dir("done")
    with (done / "TASK-huge.md").open("wb") as handle:
        handle.truncate(3 * 1024**3)
    before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    _create_next(port, writer, match=r"TASK-huge\.md")
    assert (resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - before) / 1024 < 50


def test_flow_depth_is_bounded_per_line_before_pyyaml_scans() -> None:
    from baton.intake.yaml_guard import flow_depth

    assert flow_depth("a: [[1], {b: [2]}]\nc: d") == 3
    assert flow_depth('subject: "[[[["') == 4  # quotes counted: over, never under
    assert flow_depth("a: [\n  [\n    [1]\n  ]\n]") == 1  # across lines: the composer's job
    one_line = b"---\ntype: TASK\ntask_id: TASK-x\nd: " + b"[" * 15000 + b"\n---\n"
    verdict = screen_envelope(one_line, expect_id="TASK-x")
    assert isinstance(verdict, Refused) and verdict.reason == "yaml_too_deep"
    across = "d: " + "".join("[\nx," for _ in range(3000)) + "]" * 3000
    verdict = screen_envelope(f"---\ntype: TASK\n{across}\n---\n".encode())
    assert isinstance(verdict, Refused) and verdict.reason == "yaml_too_deep"


def test_listing_a_stage_or_children_never_reads_an_oversize_file(port: FcopPort) -> None:
    """The web board and the ordering facts list stages in process: ``lstat`` first."""
    parent = port.create_task(sender="ADMIN", recipient="PM", subject="p", body="b")
    kept = port.create_task(
        sender="PM", recipient="DEV", subject="c", body="b", parent=parent.task_id
    )
    huge = port.stage_dir("inbox") / "TASK-huge.md"
    with huge.open("wb") as out:
        out.write(kept.path.read_bytes().replace(kept.task_id.encode(), b"TASK-huge"))
        out.truncate(2 * 1024**3)  # sparse: 2 GiB that Core would read whole
    before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    assert {t.task_id for t in port.list_stage("inbox")} == {parent.task_id, kept.task_id}
    assert [c.task_id for c in port.children(parent.task_id)] == [kept.task_id]
    assert (resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - before) / 1024 < 50


@pytest.mark.parametrize(
    ("subject", "problem"),
    [
        ("", "must not be empty"),
        ("two\nlines", "one line"),
        ("bell\x07", "one line"),
        ("x" * 201, "at most 200"),
        ("done---", "'---' at the end of a line"),
        ("word " * 14 + "--- and the fold lands there", "'---' at the end of a line"),
    ],
)
def test_a_subject_fcop_could_not_read_back_is_refused_in_words(subject: str, problem: str) -> None:
    from baton.intake.screen import subject_problem

    found = subject_problem(subject)
    assert found is not None and problem in found


@pytest.mark.parametrize("subject", ["Fix the login bug", "a---b", "  padded  ", "ünïcode ✓"])
def test_a_readable_subject_round_trips_through_fcop(subject: str) -> None:
    """What the rule lets through, fcop reads back exactly (the rule is not too strict)."""
    import yaml
    from fcop.v4.encoding import _parse_envelope_bytes

    from baton.intake.screen import subject_problem

    assert subject_problem(subject) is None
    header = yaml.safe_dump({"subject": subject.strip()}, allow_unicode=True, sort_keys=False)
    data = ("---\n" + header + "---\n\nbody\n").encode()
    assert _parse_envelope_bytes(data) == {"subject": subject.strip()}
