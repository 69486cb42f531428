"""A question request: opaque option ids chosen per question, mapped back to the agent's own."""

from __future__ import annotations

from baton.request_model.documents import QuestionAnswer, QuestionRequest, QuestionSelection
from baton.request_model.errors import InvalidAnswer
from baton.requests.kinds.rules import AutomaticDecision, KindRules, Reply, listed

__all__ = ["QUESTION", "native_selections"]


def _validate(document: QuestionRequest, answer: QuestionAnswer) -> QuestionAnswer:
    if answer.outcome == "skipped":
        if answer.selections:
            raise InvalidAnswer("a skipped question answer must not carry selections")
        return answer
    known = [q.id for q in document.questions]
    by_question: dict[str, QuestionSelection] = {}
    for selection in answer.selections:
        question = document.question(selection.question_id)
        if question is None:
            raise InvalidAnswer(
                f"unknown question id {selection.question_id!r}; the request has {listed(known)}"
            )
        if question.id in by_question:
            raise InvalidAnswer(f"{question.id} is answered more than once")
        if not selection.option_ids:
            raise InvalidAnswer(f"{question.id}: no option selected (every question is required)")
        seen: set[str] = set()
        for option_id in selection.option_ids:
            if question.option(option_id) is None:
                options = [o.id for o in question.options]
                raise InvalidAnswer(
                    f"{question.id}: unknown option id {option_id!r}; it offers {listed(options)}"
                )
            if option_id in seen:
                raise InvalidAnswer(f"{question.id}: option {option_id} selected more than once")
            seen.add(option_id)
        if question.selection == "single" and len(seen) != 1:
            raise InvalidAnswer(
                f"{question.id} takes exactly one option, got {len(seen)} "
                f"({listed(list(selection.option_ids))})"
            )
        by_question[question.id] = QuestionSelection(
            question_id=question.id,
            option_ids=tuple(o.id for o in question.options if o.id in seen),
        )
    missing = [q for q in known if q not in by_question]
    if missing:
        raise InvalidAnswer(f"missing answers for {listed(missing)} (every question is required)")
    return answer.model_copy(update={"selections": tuple(by_question[q] for q in known)})


def native_selections(
    document: QuestionRequest, answer: QuestionAnswer
) -> list[tuple[str, list[str]]]:
    """``(native question id, [native option ids])`` in document order."""
    normalized = _validate(document, answer)
    out: list[tuple[str, list[str]]] = []
    for selection in normalized.selections:
        question = document.question(selection.question_id)
        assert question is not None  # validated above
        out.append(
            (
                question.native_id,
                [o.native_id for o in question.options if o.id in selection.option_ids],
            )
        )
    return out


def _reply(document: QuestionRequest, answer: QuestionAnswer) -> Reply:
    if answer.outcome == "skipped":
        return {"outcome": {"outcome": "skipped", "reason": answer.reason or "skipped"}}
    return {
        "outcome": {
            "outcome": "answered",
            "answers": [
                {"questionId": q, "selectedOptionIds": opts}
                for q, opts in native_selections(document, answer)
            ],
        }
    }


def _cancelled(document: QuestionRequest) -> Reply:
    return {"outcome": {"outcome": "cancelled"}}


def _expired(document: QuestionRequest) -> Reply:
    return {"outcome": {"outcome": "skipped", "reason": "no answer in time"}}


def _automatic(document: QuestionRequest, decision: AutomaticDecision) -> QuestionAnswer:
    return QuestionAnswer(outcome="skipped", reason=decision.reason)


QUESTION: KindRules[QuestionRequest, QuestionAnswer] = KindRules(
    answer_type=QuestionAnswer,
    validate=_validate,
    reply=_reply,
    cancelled_reply=_cancelled,
    expired_reply=_expired,
    automatic_answer=_automatic,
)
