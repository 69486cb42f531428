"""Policy: decisions by tool kind, presets, the outside-workspace rule, named rules."""

from __future__ import annotations

from pathlib import Path

import pytest

from baton.request_model.documents import DiffPreview, PermissionAnswer, PlanAnswer, QuestionAnswer
from baton.requests.policy import (
    ACP_TOOL_KINDS,
    DEFAULT_AUTO_ALLOW,
    DEFAULT_ESCALATE,
    Policy,
    PolicyConfig,
    tool_call_paths,
)
from baton.requests.validate import validate_answer
from tests.requests.reqbuild import cursor_plan, cursor_questions, elicitation, permission, review


@pytest.fixture
def ws(tmp_path: Path) -> Path:
    root = tmp_path / "ws"
    (root / "src").mkdir(parents=True)
    return root


@pytest.mark.parametrize("kind", [k for k in ACP_TOOL_KINDS if k != "switch_mode"])
def test_default_table(kind: str, ws: Path) -> None:
    d = Policy().decision_for(permission(kind, command=None), workspace=ws, human_available=True)
    expected = "allow" if kind in DEFAULT_AUTO_ALLOW else "escalate"
    assert kind in DEFAULT_AUTO_ALLOW + DEFAULT_ESCALATE
    assert d.outcome == expected
    assert d.rule == f"default:{expected}:{kind}"
    assert d.decided_by == "policy"


def test_unknown_kinds_count_as_other(ws: Path) -> None:
    d = Policy().decision_for(permission("teleport"), workspace=ws, human_available=True)
    assert d.outcome == "escalate" and d.rule == "default:escalate:teleport(as other)"


def test_escalation_without_a_human_is_a_headless_denial(ws: Path) -> None:
    d = Policy.preset("reads").decision_for(permission("edit"), workspace=ws, human_available=False)
    assert d.outcome == "deny" and d.decided_by == "headless"
    assert d.rule == "preset-reads:escalate:edit:no-human"
    assert d.answer(permission("edit")) == PermissionAnswer(decision="deny")


TOOL_CALL_KINDS = tuple(k for k in ACP_TOOL_KINDS if k != "switch_mode")


@pytest.mark.parametrize("kind", TOOL_CALL_KINDS)
def test_preset_all_allows_once_never_always(kind: str, ws: Path) -> None:
    doc = permission(kind, granted=True)
    d = Policy.preset("all").decision_for(doc, workspace=ws, human_available=False)
    assert d.outcome == "allow" and d.rule == f"preset-all:allow:{kind}"
    answer = validate_answer(doc, d.answer(doc))
    assert isinstance(answer, PermissionAnswer) and answer.option_id == "allow-once"


@pytest.mark.parametrize("kind", TOOL_CALL_KINDS)
def test_preset_none_denies_every_tool_call(kind: str, ws: Path) -> None:
    d = Policy.preset("none").decision_for(permission(kind), workspace=ws, human_available=True)
    assert d.outcome == "deny" and d.rule == f"preset-none:deny:{kind}"


@pytest.mark.parametrize("preset", ["all", "none", "reads"])
def test_a_mode_change_is_never_decided_by_a_preset(preset: str, ws: Path) -> None:
    doc = permission("switch_mode")
    d = Policy.preset(preset).decision_for(doc, workspace=ws, human_available=True)
    assert d.outcome == "escalate" and d.request_class == "mode_change"
    assert d.rule == f"preset-{preset}:firewall:mode_change"
    headless = Policy.preset(preset).decision_for(doc, workspace=ws, human_available=False)
    assert headless.outcome == "deny" and headless.decided_by == "headless"


def test_unknown_preset() -> None:
    with pytest.raises(ValueError, match="unknown approval preset"):
        Policy.preset("most")


@pytest.mark.parametrize(
    "where",
    [
        {"paths": ("/etc/passwd",)},
        {"paths": ("../outside.txt",)},
        {"diff": DiffPreview(path="/tmp/elsewhere/x.py", new_text="x")},
        {"raw_input": {"file_path": "/root/.ssh/id_rsa"}},
    ],
)
def test_paths_outside_the_workspace_are_never_auto_allowed(
    where: dict[str, object], ws: Path
) -> None:
    doc = permission("read", command=None, **where)  # type: ignore[arg-type]
    for policy in (Policy(), Policy.preset("all")):
        with_human = policy.decision_for(doc, workspace=ws, human_available=True)
        assert with_human.outcome == "escalate"
        assert with_human.rule == f"{policy.name}:outside-workspace"
        headless = policy.decision_for(doc, workspace=ws, human_available=False)
        assert headless.outcome == "deny" and headless.rule.endswith("outside-workspace:no-human")


def test_paths_inside_the_workspace_and_symlinks_out(ws: Path, tmp_path: Path) -> None:
    inside = permission("read", command=None, paths=("src/a.py", str(ws / "src" / "b.py")))
    assert Policy().decision_for(inside, workspace=ws, human_available=False).outcome == "allow"
    secret = tmp_path / "secret"
    secret.mkdir()
    (ws / "link").symlink_to(secret)
    sneaky = permission("read", command=None, paths=("link/key.pem",))
    assert Policy().decision_for(sneaky, workspace=ws, human_available=True).outcome == "escalate"
    extra = permission("read", command=None, paths=(str(secret / "k"),))
    assert (
        Policy()
        .decision_for(extra, workspace=ws, human_available=False, additional_roots=[secret])
        .outcome
        == "allow"
    )


def test_tool_call_paths_collects_every_source() -> None:
    doc = permission(
        "edit",
        paths=("a",),
        diff=DiffPreview(path="b", new_text=""),
        raw_input={"filePath": "c", "paths": ["d", 3]},
    )
    assert tool_call_paths(doc) == ("a", "b", "c", "d")


def test_layers(ws: Path) -> None:
    policy = Policy.from_layers(
        [
            ("profile-opencode", PolicyConfig(auto_allow=("edit",))),
            ("role-QA", PolicyConfig(deny=("execute",), default="deny")),
        ]
    )
    edit = permission("edit", paths=("src/x.py",), granted=True)
    d = policy.decision_for(edit, workspace=ws, human_available=True)
    assert d.outcome == "allow" and d.rule == "role-QA:allow:edit"
    answer = validate_answer(edit, d.answer(edit))
    assert isinstance(answer, PermissionAnswer) and answer.option_id == "allow-once"
    assert policy.decision_for(permission("execute"), workspace=ws, human_available=True).rule == (
        "role-QA:deny:execute"
    )
    assert (
        policy.decision_for(permission("teleport"), workspace=ws, human_available=True).outcome
        == "escalate"
    )


def test_other_kinds_of_requests(ws: Path) -> None:
    policy = Policy()
    for doc in (cursor_questions(), cursor_plan(), elicitation(), review()):
        assert policy.decision_for(doc, workspace=ws, human_available=True).needs_human
    assert policy.decision_for(review(), workspace=ws, human_available=False).needs_human
    q = policy.decision_for(cursor_questions(), workspace=ws, human_available=False)
    assert q.decided_by == "headless" and q.rule == "default:headless:question"
    assert isinstance(q.answer(cursor_questions()), QuestionAnswer)
    plan = cursor_plan()
    p = policy.decision_for(plan, workspace=ws, human_available=False)
    assert p.rule == "default:headless:plan-reject"
    assert p.answer(plan) == PlanAnswer(decision="reject", revision=plan.revision, reason=p.reason)
    p_all = Policy.preset("all").decision_for(plan, workspace=ws, human_available=False)
    assert validate_answer(plan, p_all.answer(plan)) == PlanAnswer(
        decision="accept", revision=plan.revision
    )
    with pytest.raises(ValueError, match="escalates"):
        policy.decision_for(plan, workspace=ws, human_available=True).answer(plan)
