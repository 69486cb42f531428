"""Unit tests of the Cursor normalizers, one behaviour each."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import pytest

from baton.errors import RequestError, SecurityError
from baton.events.extension import MalformedPayload, TurnContext
from baton.events.model import (
    ArtifactGenerated,
    ArtifactViewed,
    DelegationCompleted,
    DelegationStarted,
    PlanUpdated,
    ProviderNotice,
    SecurityPathRefused,
    SecurityPayloadRejected,
    UsageReported,
)
from baton.providers.cursor import CursorExtension
from baton.providers.cursor import children as children_mod
from baton.providers.cursor.artifacts import generate_image
from baton.providers.cursor.children import ChildNormalizer
from baton.providers.cursor.containment import display_candidate, resolve_artifact_reference
from baton.providers.cursor.plans import normalize_plan
from baton.providers.cursor.questions import normalize_question
from baton.providers.cursor.tasks import role_of, task_completed
from baton.providers.cursor.todos import TodoReducer
from baton.request_model.documents import (
    MAX_DOCUMENT_BYTES,
    PlanRequest,
    QuestionRequest,
    parse_document,
    plan_revision,
)
from baton.request_model.errors import InvalidDocument, PayloadTooLarge


def ctx(workspace: str = "/nonexistent", session: str = "sess") -> TurnContext:
    return TurnContext(session_id=session, turn_id="t", workspace=workspace)


def plans_of(payloads: Any) -> list[PlanUpdated]:
    return [p for p in payloads if isinstance(p, PlanUpdated)]


def notices(payloads: Any) -> list[str]:
    return [p.category for p in payloads if isinstance(p, ProviderNotice)]


# ------------------------------------------------------------------------- todos


def test_cancelled_todo_is_blocked_with_native_status_and_unchanged_text() -> None:
    result = TodoReducer().apply(
        {"todos": [{"id": "1", "content": "Run it", "status": "cancelled"}], "merge": False}
    )
    (plan,) = plans_of(result.payloads)
    (step,) = plan.steps
    assert (step.status, step.native_status, step.content) == ("blocked", "cancelled", "Run it")
    assert plan.source == "cursor.update_todos"


def test_merge_updates_in_place_and_appends_and_replace_replaces() -> None:
    r = TodoReducer()
    r.apply({"todos": [{"id": "a", "content": "A"}, {"id": "b", "content": "B"}], "merge": False})
    result = r.apply(
        {"todos": [{"id": "b", "status": "completed"}, {"id": "c", "content": "C"}], "merge": True}
    )
    assert [(t["id"], t["status"]) for t in result.todos] == [
        ("a", "pending"),
        ("b", "completed"),
        ("c", "pending"),
    ]
    result = r.apply({"todos": [{"id": "z", "content": "Z"}], "merge": False})
    assert [t["id"] for t in result.todos] == ["z"]


def test_an_unchanged_list_emits_no_new_revision() -> None:
    r = TodoReducer()
    first = r.apply({"todos": [{"id": "a", "content": "A"}], "merge": False})
    again = r.apply({"todos": [{"id": "a", "content": "A"}], "merge": True})
    assert len(plans_of(first.payloads)) == 1 and plans_of(again.payloads) == []


def test_bad_items_are_skipped_visibly_and_missing_merge_merges() -> None:
    r = TodoReducer()
    r.apply({"todos": [{"id": "a", "content": "A"}], "merge": False})
    result = r.apply({"todos": [{"content": "no id"}, 7, {"id": "b", "content": 3}, {"id": "c"}]})
    assert notices(result.payloads) == ["malformed", "malformed"]
    assert [t["id"] for t in result.todos] == ["a", "c"]
    with pytest.raises(MalformedPayload):  # the agent's fault: the extension's seam notices it
        r.apply({"todos": "nope", "merge": True})


def test_unknown_status_is_pending_with_its_native_status() -> None:
    result = TodoReducer().apply(
        {"todos": [{"id": "a", "content": "A", "status": "paused"}], "merge": False}
    )
    (plan,) = plans_of(result.payloads)
    assert (plan.steps[0].status, plan.steps[0].native_status) == ("pending", "paused")
    assert "malformed" in notices(result.payloads)


def test_unsafe_native_ids_get_stable_digests() -> None:
    result = TodoReducer().apply(
        {"todos": [{"id": "a b/c", "content": "x"}, {"id": 5, "content": "y"}], "merge": False}
    )
    (plan,) = plans_of(result.payloads)
    assert plan.steps[0].step_id.startswith("todo-") and plan.steps[1].step_id == "5"


# ---------------------------------------------------------------------- children


def test_nested_spawn_on_a_live_child_session_is_accepted() -> None:
    n = ChildNormalizer()
    n.begin_turn("p")
    n.spawned("p", {"subagentSessionId": "c1"})
    (started,) = n.spawned("c1", {"subagentSessionId": "c2", "name": "shell"})
    assert isinstance(started, DelegationStarted)
    n.state_update("p", {"subagentSessionId": "c1", "state": "completed"})
    assert notices(n.spawned("c1", {"subagentSessionId": "c3"})) == ["child_foreign"]


def test_state_update_from_the_wrong_session_is_an_identity_claim() -> None:
    n = ChildNormalizer()
    n.begin_turn("p")
    n.spawned("p", {"subagentSessionId": "c1"})
    assert notices(n.state_update("c1", {"subagentSessionId": "c1", "state": "completed"})) == [
        "child_identity"
    ]


def test_child_limit_evicts_finished_children_first(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(children_mod, "MAX_CHILDREN", 2)
    n = ChildNormalizer()
    n.begin_turn("p")
    n.spawned("p", {"subagentSessionId": "c1"})
    n.spawned("p", {"subagentSessionId": "c2"})
    assert notices(n.spawned("p", {"subagentSessionId": "c3"})) == ["child_limit"]
    n.state_update("p", {"subagentSessionId": "c1", "state": "completed"})
    assert isinstance(n.spawned("p", {"subagentSessionId": "c3"})[0], DelegationStarted)


def test_child_text_goes_to_its_bucket_as_a_bounded_tail() -> None:
    n = ChildNormalizer()
    n.begin_turn("p")
    n.spawned("p", {"subagentSessionId": "c1"})
    chunk = {
        "sessionUpdate": "agent_message_chunk",
        "content": {"type": "text", "text": "y" * 3000},
    }
    for _ in range(3):
        assert n.child_update("c1", chunk) == []
    assert n.children["c1"].updates == 3 and len(n.children["c1"].tail) == 4000
    assert n.child_update("nobody", chunk) is None


def test_no_active_turn_means_no_valid_parent() -> None:
    n = ChildNormalizer()
    assert notices(n.spawned(None, {"subagentSessionId": "c1"})) == ["child_foreign"]


# ------------------------------------------------------------------- containment


@pytest.fixture
def ws(tmp_path: Path) -> Path:
    root = tmp_path / "ws"
    (root / "d").mkdir(parents=True)
    (root / "d" / "a.png").write_bytes(b"")
    (tmp_path / "out.png").write_bytes(b"")
    (root / "d" / "ln.png").symlink_to(tmp_path / "out.png")
    (root / "inner.png").symlink_to(root / "d" / "a.png")
    (root / "dirlink").symlink_to(root / "d")
    return root


@pytest.mark.parametrize(
    "candidate,expected",
    [
        ("d/a.png", "d/a.png"),
        ("{ws}/d/a.png", "d/a.png"),
        ("{real}/d/a.png", "d/a.png"),
    ],
)
def test_contained_paths_resolve_to_workspace_relative(
    ws: Path, candidate: str, expected: str
) -> None:
    path = candidate.format(ws=ws, real=os.path.realpath(ws))
    assert resolve_artifact_reference(str(ws), path) == expected


@pytest.mark.parametrize(
    "candidate,reason",
    [
        ("", "empty"),
        ("d/../d/a.png", "'..'"),
        ("d\\a.png", "backslash"),
        ("d/a\x00.png", "control"),
        ("d/a\u009b.png", "control"),
        ("/etc/passwd", "outside"),
        ("d/ln.png", "symbolic link"),
        ("inner.png", "symbolic link"),
        ("dirlink/a.png", "symbolic link"),
        ("d", "not a regular file"),
        ("d/none.png", "does not exist"),
        ("{ws}", "workspace itself"),
        ("x" * 5000, "longer"),
    ],
)
def test_refused_paths_say_why(ws: Path, candidate: str, reason: str) -> None:
    with pytest.raises(SecurityError, match=reason):
        resolve_artifact_reference(str(ws), candidate.format(ws=ws))


def test_a_relative_workspace_is_refused() -> None:
    with pytest.raises(SecurityError, match="workspace"):
        resolve_artifact_reference("rel/ws", "a.png")


def test_a_symlinked_workspace_is_followed_once(tmp_path: Path, ws: Path) -> None:
    alias = tmp_path / "alias"
    alias.symlink_to(ws)
    assert resolve_artifact_reference(str(alias), f"{alias}/d/a.png") == "d/a.png"


def test_refused_outside_paths_are_shown_by_name_only() -> None:
    assert display_candidate("/w", "/home/me/.ssh/id_rsa") == "…/id_rsa"
    assert display_candidate("/w", "/w/x/\x07y") == "x/?y"


def test_generate_image_never_reads_bytes(ws: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    def refuse(*args: object, **kwargs: object) -> None:
        raise AssertionError("read")

    monkeypatch.setattr(Path, "read_bytes", refuse)
    monkeypatch.setattr(Path, "open", refuse)
    payloads, reply = generate_image(
        {
            "description": "d",
            "filePath": "d/a.png",
            "referenceImagePaths": ["d/a.png", 5, "d/ln.png"],
        },
        workspace=str(ws),
    )
    kinds = [type(p) for p in payloads]
    assert kinds == [
        ArtifactViewed,
        ProviderNotice,
        SecurityPathRefused,
        ProviderNotice,
        ArtifactGenerated,
    ]
    assert all(getattr(p, "registered", False) is False for p in payloads)
    assert reply == {"outcome": {"outcome": "generated", "filePath": "d/a.png"}}


def test_too_many_reference_images_are_cut_visibly(ws: Path) -> None:
    payloads, _ = generate_image({"referenceImagePaths": ["d/a.png"] * 40}, workspace=str(ws))
    assert sum(isinstance(p, ArtifactViewed) for p in payloads) == 32
    assert "artifact_refused" in notices(payloads)


# ------------------------------------------------------------------------- tasks


@pytest.mark.parametrize(
    "native,role",
    [("explore", "explore"), ({"custom": "rev"}, "custom:rev"), ({"x": 1}, None), (None, None)],
)
def test_subagent_type_becomes_role(native: Any, role: str | None) -> None:
    assert role_of(native) == role


def test_task_conflicting_with_its_spawn_keeps_the_spawn_origin() -> None:
    n = ChildNormalizer()
    n.begin_turn("p")
    n.spawned(
        "p",
        {
            "subagentSessionId": "c1",
            "name": "explore",
            "_meta": {"cursor": {"toolCallId": "tc-1", "agentId": "ag", "model": "m"}},
        },
    )
    payloads, reply = task_completed(
        {"toolCallId": "tc-9", "agentId": "ag", "durationMs": 3.0}, children=n
    )
    assert notices(payloads) == ["child_identity"]
    (done,) = [p for p in payloads if isinstance(p, DelegationCompleted)]
    child = done.children[0]
    assert (child.child_id, child.parent_tool_call_id, child.model, child.duration_ms) == (
        "c1",
        "tc-1",
        "m",
        3,
    )
    assert reply == {"outcome": {"outcome": "completed", "agentId": "ag", "durationMs": 3}}


# --------------------------------------------------------------------- questions


QUESTION = {
    "toolCallId": "tc",
    "title": "T",
    "questions": [
        {
            "id": "q-a",
            "prompt": "A?",
            "options": [{"id": "x", "label": "X"}, {"id": "y", "label": "Y"}],
            "allowMultiple": True,
        },
        {
            "id": "q-b",
            "prompt": "B?",
            "options": [{"id": "z", "label": "Z"}, {"id": "w", "label": "W"}],
        },
    ],
}


def test_questions_get_opaque_ids_and_keep_native_ones() -> None:
    doc = normalize_question(QUESTION)
    assert [q.id for q in doc.questions] == ["question-1", "question-2"]
    assert [o.id for o in doc.questions[0].options] == ["option-1", "option-2"]
    assert doc.questions[0].native_id == "q-a" and doc.questions[0].selection == "multiple"


def test_human_answers_map_back_to_native_ids_through_the_ledger_replies() -> None:
    model = pytest.importorskip("baton.request_model.documents")
    replies = pytest.importorskip("baton.requests.replies")
    document = normalize_question(QUESTION)
    answer = model.parse_answer(
        {
            "kind": "question",
            "selections": [
                {"question_id": "question-2", "option_ids": ["option-2"]},
                {"question_id": "question-1", "option_ids": ["option-2", "option-1"]},
            ],
        }
    )
    assert replies.reply_for(document, answer) == {
        "outcome": {
            "outcome": "answered",
            "answers": [
                {"questionId": "q-a", "selectedOptionIds": ["x", "y"]},
                {"questionId": "q-b", "selectedOptionIds": ["w"]},
            ],
        }
    }
    forged = model.parse_answer(
        {"kind": "question", "selections": [{"question_id": "question-1", "option_ids": ["x"]}]}
    )
    with pytest.raises(RequestError):
        replies.reply_for(document, forged)


@pytest.mark.parametrize(
    "params,oversize",
    [
        ({"questions": []}, False),
        ({"questions": [{"id": "a", "prompt": "?", "options": []}]}, False),
        (
            {
                "questions": [
                    {
                        "id": "a",
                        "prompt": "?",
                        "options": [{"id": "1", "label": "x"}, {"id": "1", "label": "y"}],
                    }
                ]
            },
            False,
        ),
        (
            {
                "questions": [
                    {"id": str(i), "prompt": "?", "options": [{"id": "o", "label": "x"}]}
                    for i in range(65)
                ]
            },
            True,
        ),
        (
            {
                "questions": [
                    {"id": "a", "prompt": "p" * 100_001, "options": [{"id": "o", "label": "x"}]}
                ]
            },
            True,
        ),
        (
            {
                "questions": [
                    {
                        "id": "a",
                        "prompt": "p",
                        "options": [{"id": "o", "label": "x" * (MAX_DOCUMENT_BYTES + 1)}],
                    }
                ]
            },
            True,
        ),
    ],
)
def test_unpresentable_questions_are_refused_not_cut(params: Any, oversize: bool) -> None:
    with pytest.raises(InvalidDocument) as info:
        normalize_question(params)
    assert isinstance(info.value, PayloadTooLarge) is oversize


# ------------------------------------------------------------------------- plans


PLAN: dict[str, Any] = {
    "toolCallId": "tc-p",
    "name": "Refactor",
    "overview": "Split it",
    "plan": "# Refactor\n\nSteps.",
    "todos": [{"id": "1", "content": "Lexer", "status": "pending"}],
    "phases": [
        {"name": "One", "todos": [{"id": "1", "content": "Lexer", "status": "in_progress"}]}
    ],
    "isProject": True,
}


def test_plan_revision_is_the_sha256_of_the_whole_plan() -> None:
    doc = normalize_plan(PLAN)
    assert doc.revision == plan_revision(doc.model_dump(mode="json"))
    changed = normalize_plan({**PLAN, "plan": "# Refactor\n\nSteps. "})
    assert changed.revision != doc.revision


def test_plan_answers_are_bound_to_the_revision() -> None:
    model = pytest.importorskip("baton.request_model.documents")
    replies = pytest.importorskip("baton.requests.replies")
    document = normalize_plan(PLAN)
    accept = model.parse_answer(
        {"kind": "plan", "decision": "accept", "revision": document.revision}
    )
    assert replies.reply_for(document, accept) == {"outcome": {"outcome": "accepted"}}
    stale = model.parse_answer({"kind": "plan", "decision": "accept", "revision": "0" * 64})
    with pytest.raises(RequestError):
        replies.reply_for(document, stale)


def test_oversize_plans_are_rejected_never_truncated() -> None:
    ext = CursorExtension()
    outcome = ext.vendor_method(
        "cursor/create_plan", {**PLAN, "plan": "x" * (200 * 1024)}, has_id=True, ctx=ctx()
    )
    assert outcome is not None and outcome.route == "reply"
    assert outcome.result["outcome"]["outcome"] == "rejected"
    assert any(isinstance(p, SecurityPayloadRejected) for p in outcome.payloads)


def test_documents_are_the_requests_ledger_models() -> None:
    """One home for request documents: the provider builds the ledger's own, redacted."""
    question = normalize_question(QUESTION, Prefix())
    plan = normalize_plan(PLAN)
    assert isinstance(question, QuestionRequest) and isinstance(plan, PlanRequest)
    assert parse_document(plan.model_dump(mode="json")) == plan, "it round-trips as stored"
    assert question.questions[0].prompt.startswith("[R]"), "redacted before validation"


class Prefix:
    """A redaction that marks every string it saw."""

    def text(self, value: str) -> str:
        return "[R]" + value

    def value(self, value: Any) -> Any:
        if isinstance(value, str):
            return self.text(value)
        if isinstance(value, dict):
            return {
                k: v if k in ("kind", "id", "selection") else self.value(v)
                for k, v in value.items()
            }
        if isinstance(value, list):
            return [self.value(v) for v in value]
        return value


# --------------------------------------------------------------------- extension


@pytest.mark.parametrize(
    "method,params",
    [
        ("cursor/update_todos", {"todos": "bad"}),
        ("cursor/task", {"toolCallId": "x", "description": "d"}),
        ("cursor/generate_image", {"filePath": 5}),
    ],
)
def test_every_non_human_cursor_method_is_answered_at_once(method: str, params: Any) -> None:
    outcome = CursorExtension().vendor_method(method, params, has_id=True, ctx=ctx())
    assert outcome is not None and outcome.route == "reply" and outcome.result is not None
    assert outcome.result["outcome"]["outcome"] in ("accepted", "completed", "rejected")
    silent = CursorExtension().vendor_method(method, params, has_id=False, ctx=ctx())
    assert silent is not None and silent.route == "reply"


def test_questions_and_plans_go_to_the_human_route_with_a_headless_answer() -> None:
    ext = CursorExtension()
    q = ext.vendor_method("cursor/ask_question", QUESTION, has_id=True, ctx=ctx())
    p = ext.vendor_method("cursor/create_plan", PLAN, has_id=True, ctx=ctx())
    assert q is not None and q.route == "human" and isinstance(q.request, QuestionRequest)
    assert q.result["outcome"]["outcome"] == "skipped"
    assert p is not None and p.route == "human" and isinstance(p.request, PlanRequest)
    assert p.result == {"outcome": {"outcome": "rejected", "reason": "no human surface attached"}}


def test_usage_is_unavailable_unless_reported() -> None:
    ext = CursorExtension()
    c = ctx()
    (usage,) = ext.end_turn(c)
    assert isinstance(usage, UsageReported) and not usage.available
    assert usage.reason == "Cursor's ACP reports no token usage"
    c.usage_reported = True
    assert ext.end_turn(c) == []


def test_shared_revision_counter_and_redaction_come_from_the_context() -> None:
    class Redact:
        def text(self, value: str) -> str:
            return value.replace("sk-secret", "***")

        def value(self, value: Any) -> Any:
            return value

    ext = CursorExtension()
    c = ctx()
    c.next_plan_revision = lambda: 41
    c.redaction = Redact()
    ext.begin_turn(c)
    outcome = ext.vendor_method(
        "cursor/update_todos",
        {"todos": [{"id": "1", "content": "use sk-secret"}], "merge": False},
        has_id=True,
        ctx=c,
    )
    assert outcome is not None
    (plan,) = plans_of(outcome.payloads)
    assert plan.revision == 41 and plan.steps[0].content == "use ***"


def test_todos_carry_over_turns_unless_asked_to_reset() -> None:
    for reset, expected in ((False, "Ship it"), (True, "")):
        ext = CursorExtension(reset_todos_each_turn=reset)
        c = ctx()
        ext.begin_turn(c)
        ext.vendor_method(
            "cursor/update_todos",
            {"todos": [{"id": "a", "content": "Ship it"}], "merge": False},
            has_id=True,
            ctx=c,
        )
        ext.begin_turn(c)
        out = ext.vendor_method(
            "cursor/update_todos",
            {"todos": [{"id": "a", "status": "completed"}], "merge": True},
            has_id=True,
            ctx=c,
        )
        assert out is not None
        assert out.result["outcome"]["todos"] == [
            {"id": "a", "content": expected, "status": "completed"}
        ]


def test_foreign_session_updates_never_fail_the_parent() -> None:
    ext = CursorExtension()
    c = ctx(session="p")
    ext.begin_turn(c)
    ext.classify_update(
        "subagent_spawned", {"sessionUpdate": "subagent_spawned", "subagentSessionId": "c1"}, c
    )
    chunk = {"sessionUpdate": "agent_message_chunk", "content": {"type": "text", "text": "hi"}}
    assert ext.foreign_session_update("c1", chunk, c) == []
    assert notices(ext.foreign_session_update("ghost", chunk, c)) == ["child_unknown"]
    assert ext.foreign_session_update("ghost", chunk, c) == []
    nested = ext.foreign_session_update(
        "c1", {"sessionUpdate": "subagent_spawned", "subagentSessionId": "c2"}, c
    )
    assert isinstance(nested[0], DelegationStarted)
