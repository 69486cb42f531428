"""Property tests for answer validation: valid answers round-trip, anything forged is refused."""

from __future__ import annotations

from dataclasses import dataclass

import pytest
from hypothesis import assume, given, settings
from hypothesis import strategies as st

from baton.request_model.documents import (
    ElicitationAnswer,
    NativeQuestion,
    PermissionAnswer,
    PermissionOption,
    PlanAnswer,
    QuestionAnswer,
    QuestionRequest,
    QuestionSelection,
    ReviewAnswer,
    canonical_json,
)
from baton.request_model.errors import InvalidAnswer, StaleAnswer
from baton.requests.replies import cancelled_reply, expired_reply, native_selections, reply_for
from baton.requests.validate import validate_answer
from tests.requests.reqbuild import cursor_plan, cursor_questions, elicitation, permission, review

native_ids = st.text(alphabet=st.characters(codec="utf-8"), min_size=1, max_size=8)


@st.composite
def question_requests(draw: st.DrawFn) -> QuestionRequest:
    n = draw(st.integers(1, 6))
    qids = draw(st.lists(native_ids, min_size=n, max_size=n, unique=True))
    questions = []
    for qid in qids:
        k = draw(st.integers(1, 6))
        oids = draw(st.lists(native_ids, min_size=k, max_size=k, unique=True))
        questions.append(
            NativeQuestion(
                native_id=qid,
                prompt=draw(st.text(max_size=20)),
                options=[(o, f"label {o}") for o in oids],
                multiple=draw(st.booleans()),
            )
        )
    return QuestionRequest.from_native(questions)


@dataclass
class Case:
    doc: QuestionRequest
    answer: QuestionAnswer
    expected_native: dict[str, set[str]]


@st.composite
def valid_cases(draw: st.DrawFn) -> Case:
    doc = draw(question_requests())
    selections = []
    expected: dict[str, set[str]] = {}
    for q in doc.questions:
        if q.selection == "single":
            chosen = [draw(st.sampled_from(q.options))]
        else:
            chosen = draw(
                st.lists(st.sampled_from(q.options), min_size=1, unique_by=lambda o: o.id)
            )
        selections.append(
            QuestionSelection(question_id=q.id, option_ids=tuple(o.id for o in chosen))
        )
        expected[q.native_id] = {o.native_id for o in chosen}
    order = draw(st.permutations(selections))
    return Case(doc, QuestionAnswer(selections=tuple(order)), expected)


@given(valid_cases())
@settings(deadline=None)
def test_valid_answers_are_accepted_and_round_trip_to_native_ids(case: Case) -> None:
    normalized = validate_answer(case.doc, case.answer)
    assert isinstance(normalized, QuestionAnswer)
    # normalized: document order, and validating again is a fixed point
    assert [s.question_id for s in normalized.selections] == [q.id for q in case.doc.questions]
    assert validate_answer(case.doc, normalized) == normalized
    native = native_selections(case.doc, case.answer)
    assert {q: set(opts) for q, opts in native} == case.expected_native
    reply = reply_for(case.doc, case.answer)
    assert reply["outcome"]["outcome"] == "answered"
    assert [a["questionId"] for a in reply["outcome"]["answers"]] == [
        q.native_id for q in case.doc.questions
    ]
    # the same answer in another order normalizes to the same bytes (idempotence key)
    reordered = case.answer.model_copy(
        update={"selections": tuple(reversed(case.answer.selections))}
    )
    again = validate_answer(case.doc, reordered)
    assert canonical_json(again.model_dump(mode="json")) == canonical_json(
        normalized.model_dump(mode="json")
    )


MUTATIONS = (
    "drop_question",
    "duplicate_question",
    "forged_question",
    "forged_option",
    "native_option_id",
    "duplicate_option",
    "empty_selection",
    "too_many_for_single",
)


@given(valid_cases(), st.sampled_from(MUTATIONS), st.data())
@settings(max_examples=300, deadline=None)
def test_forged_duplicate_missing_or_out_of_range_answers_are_refused(
    case: Case, mutation: str, data: st.DataObject
) -> None:
    sels = list(case.answer.selections)
    i = data.draw(st.integers(0, len(sels) - 1))
    q = case.doc.question(sels[i].question_id)
    assert q is not None
    if mutation == "drop_question":
        del sels[i]
        match = "missing answers"
    elif mutation == "duplicate_question":
        sels.append(sels[i])
        match = "more than once"
    elif mutation == "forged_question":
        sels[i] = sels[i].model_copy(
            update={"question_id": f"question-{len(case.doc.questions) + 1}"}
        )
        match = "unknown question id"
    elif mutation == "forged_option":
        forged = f"option-{len(q.options) + data.draw(st.integers(1, 5))}"
        sels[i] = sels[i].model_copy(update={"option_ids": (*sels[i].option_ids, forged)})
        match = "unknown option id"
    elif mutation == "native_option_id":
        native = q.options[0].native_id
        assume(q.option(native) is None)
        sels[i] = sels[i].model_copy(update={"option_ids": (native,)})
        match = "unknown option id"
    elif mutation == "duplicate_option":
        sels[i] = sels[i].model_copy(
            update={"option_ids": (*sels[i].option_ids, sels[i].option_ids[0])}
        )
        match = "more than once" if q.selection == "multiple" else "more than once|exactly one"
    elif mutation == "empty_selection":
        sels[i] = sels[i].model_copy(update={"option_ids": ()})
        match = "no option selected"
    else:
        assume(q.selection == "single" and len(q.options) >= 2)
        sels[i] = sels[i].model_copy(update={"option_ids": (q.options[0].id, q.options[1].id)})
        match = "exactly one"
    with pytest.raises(InvalidAnswer, match=match):
        validate_answer(case.doc, QuestionAnswer(selections=tuple(sels)))


def test_skipped_questions_carry_no_selections() -> None:
    doc = cursor_questions()
    assert validate_answer(doc, QuestionAnswer(outcome="skipped", reason="later"))
    with pytest.raises(InvalidAnswer):
        validate_answer(
            doc,
            QuestionAnswer(
                outcome="skipped",
                selections=(QuestionSelection(question_id="question-1", option_ids=("option-1",)),),
            ),
        )


def test_wrong_kind_of_answer_is_refused() -> None:
    with pytest.raises(InvalidAnswer, match="a permission answer cannot answer a plan request"):
        validate_answer(cursor_plan(), PermissionAnswer(decision="allow"))


# --------------------------------------------------------------------------- permission

KINDS = ("allow_once", "allow_always", "reject_once", "reject_always")


@given(
    st.lists(st.sampled_from(KINDS), min_size=1, max_size=4, unique=True),
    st.booleans(),
    st.sampled_from(["allow", "deny"]),
    st.sampled_from(["once", "always"]),
)
@settings(deadline=None)
def test_permission_picks_the_agents_own_option_by_kind(
    kinds: list[str], granted: bool, decision: str, scope: str
) -> None:
    options = tuple(PermissionOption(option_id=f"opt-{k}", name=k, kind=k) for k in kinds)
    doc = permission(options=options, granted=granted)
    answer = PermissionAnswer(decision=decision, scope=scope)
    try:
        normalized = validate_answer(doc, answer)
    except InvalidAnswer:
        if scope == "always":
            return  # never allow_always (nor reject_always on request), whatever the document says
        if decision == "allow":
            assert "allow_once" not in kinds
        else:
            assert not {"reject_once", "reject_always"} & set(kinds)
        return
    assert scope == "once"
    assert isinstance(normalized, PermissionAnswer)
    chosen = next(o for o in options if o.option_id == normalized.option_id)
    if decision == "allow":
        # baton never answers allow_always, even where the agent offers it
        assert chosen.kind == "allow_once"
    else:
        assert chosen.kind.startswith("reject_")
        if "reject_once" in kinds:
            assert chosen.kind == "reject_once"
    assert reply_for(doc, answer) == {
        "outcome": {"outcome": "selected", "optionId": chosen.option_id}
    }


def test_permission_option_named_by_a_surface_must_exist_and_agree() -> None:
    doc = permission()
    with pytest.raises(InvalidAnswer, match="unknown permission option"):
        validate_answer(doc, PermissionAnswer(decision="allow", option_id="allow-forever"))
    with pytest.raises(InvalidAnswer, match="does not match"):
        validate_answer(doc, PermissionAnswer(decision="allow", option_id="reject-once"))
    with pytest.raises(InvalidAnswer, match="never answers allow_always"):
        validate_answer(doc, PermissionAnswer(decision="allow", scope="always"))


# --------------------------------------------------------------------------------- plan


def test_stale_plan_revision_is_rejected() -> None:
    old = cursor_plan("# v1")
    new = cursor_plan("# v2")
    with pytest.raises(StaleAnswer, match="stale plan answer"):
        validate_answer(new, PlanAnswer(decision="accept", revision=old.revision))
    assert validate_answer(new, PlanAnswer(decision="accept", revision=new.revision))
    assert reply_for(new, PlanAnswer(decision="reject", revision=new.revision, reason="no")) == {
        "outcome": {"outcome": "rejected", "reason": "no"}
    }


# -------------------------------------------------------------------------- elicitation


def test_elicitation_answers_are_checked_against_the_schema() -> None:
    doc = elicitation()
    ok = ElicitationAnswer(
        action="accept",
        content={"targets": ("win", "linux"), "version": "1.2", "channel": "beta", "retries": 3},
    )
    normalized = validate_answer(doc, ok)
    assert isinstance(normalized, ElicitationAnswer)
    assert list((normalized.content or {}).keys()) == ["version", "retries", "channel", "targets"]
    assert normalized.content and normalized.content["targets"] == ("linux", "win")
    assert reply_for(doc, ok)["content"]["targets"] == ["linux", "win"]
    bad = [
        ({"version": "1.2"}, "missing required"),
        ({"version": "x", "channel": "beta"}, "pattern"),
        ({"version": "1.2", "channel": "nightly"}, "not one of"),
        ({"version": "1.2", "channel": "beta", "retries": 9}, "at most"),
        ({"version": "1.2", "channel": "beta", "retries": 1.5}, "integer"),
        ({"version": "1.2", "channel": "beta", "dry_run": "yes"}, "true or false"),
        ({"version": "1.2", "channel": "beta", "targets": ()}, "at least 1"),
        ({"version": "1.2", "channel": "beta", "targets": ("bsd",)}, "not one of"),
        ({"version": "1.2", "channel": "beta", "extra": "x"}, "unknown form field"),
    ]
    for content, match in bad:
        with pytest.raises(InvalidAnswer, match=match):
            validate_answer(doc, ElicitationAnswer(action="accept", content=content))
    assert reply_for(doc, ElicitationAnswer(action="decline")) == {"action": "decline"}
    with pytest.raises(InvalidAnswer):
        validate_answer(doc, ElicitationAnswer(action="decline", content={"version": "1"}))


def test_review_answers() -> None:
    assert validate_answer(review(), ReviewAnswer(decision="reject", reason="tests missing"))


def test_an_expired_request_is_denied_not_cancelled() -> None:
    """Nobody answered in time: the agent hears a denial and its turn goes on."""
    rejecting = permission()
    reject = next(o for o in rejecting.options if o.kind == "reject_once")
    assert expired_reply(rejecting) == {
        "outcome": {"outcome": "selected", "optionId": reject.option_id}
    }
    allow_only = permission(
        options=(PermissionOption(option_id="yes", name="Allow", kind="allow_once"),)
    )
    assert expired_reply(allow_only) == cancelled_reply(allow_only)  # nothing to deny with
    assert expired_reply(cursor_plan())["outcome"]["outcome"] == "rejected"
    assert expired_reply(cursor_questions())["outcome"]["outcome"] == "skipped"
    assert expired_reply(elicitation()) == {"action": "decline"}
