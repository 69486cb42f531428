"""The ledger over SQLite: persist before expose, exactly once, byte-exact, restart-safe."""

from __future__ import annotations

import asyncio
import sqlite3
from pathlib import Path

import pytest

from baton.errors import RequestError
from baton.request_model.documents import (
    MAX_DOCUMENT_BYTES,
    PermissionAnswer,
    PlanAnswer,
    PlanRequest,
    QuestionAnswer,
    QuestionSelection,
    RequestDocument,
    check_limits,
)
from baton.request_model.errors import (
    AnswerConflict,
    IllegalTransition,
    InvalidAnswer,
    NotPending,
    PayloadTooLarge,
    StaleAnswer,
    UnknownRequest,
)
from baton.requests.ledger import Ledger
from baton.requests.payloads import created, for_state, oversize
from baton.requests.replies import cancelled_reply, reply_for
from baton.requests.states import State
from tests.requests.reqbuild import META, cursor_plan, cursor_questions, permission, review

UNICODE = (
    "e\u0301 a\u0308\u0323 — combining marks\n"
    "👩‍👩‍👧‍👦 🏳️‍🌈 👍🏽 — emoji with ZWJ and modifiers\n"
    "שלום עולם مرحبا بالعالم \u202eRTL override\u202c — right-to-left\n"
    "NUL:\x00 tab:\t bell:\x07 — control characters\n"
    "𝔘𝔫𝔦𝔠𝔬𝔡𝔢 中文 日本語 한국어 \ufeff BOM \u2028 LS\n"
)


def _rows(db_path: Path, ledger: Ledger | None = None) -> list[tuple[str, str]]:
    """The requests as another process sees them (its own connection)."""
    dsn = getattr(ledger.store, "dsn", None) if ledger is not None else None
    if dsn is not None:  # the PostgreSQL backend: another host's connection
        import psycopg

        with psycopg.connect(dsn) as pg:
            rows = pg.execute("SELECT request_id, state FROM requests").fetchall()
        return [(str(r[0]), str(r[1])) for r in rows]
    with sqlite3.connect(db_path) as conn:
        return conn.execute("SELECT request_id, state FROM requests").fetchall()


async def test_create_persists_before_it_returns(ledger: Ledger, db_path: Path) -> None:
    record = await ledger.create(permission(), jsonrpc_id=5, **META)
    # visible to another connection (another process) the moment create returns
    assert _rows(db_path, ledger) == [(record.request_id, "pending")]
    assert record.state is State.PENDING
    assert record.jsonrpc_id == 5 and record.connection_id == "conn-1"
    assert record.tool_call_id == "call_1"
    assert created(record).summary["tool_kind"] == "execute"


async def test_jsonrpc_ids_keep_their_json_type(ledger: Ledger) -> None:
    a = await ledger.create(permission(), jsonrpc_id="5", **META)
    b = await ledger.create(permission(), jsonrpc_id=5, **META)
    assert (await ledger.get(a.request_id)).jsonrpc_id == "5"
    assert (await ledger.get(b.request_id)).jsonrpc_id == 5


async def test_duplicate_open_jsonrpc_id_on_a_connection_is_refused(ledger: Ledger) -> None:
    first = await ledger.create(permission(), jsonrpc_id=7, **META)
    with pytest.raises(RequestError, match="duplicate request"):
        await ledger.create(permission(), jsonrpc_id=7, **META)
    # another connection may reuse the id; so may this one once the first is closed
    await ledger.create(permission(), jsonrpc_id=7, **{**META, "connection_id": "conn-2"})
    await ledger.cancel(first.request_id, "turn ended")
    await ledger.create(permission(), jsonrpc_id=7, **META)


@pytest.mark.parametrize("make", [cursor_questions, cursor_plan])
async def test_unicode_round_trips_byte_exact(make: object, db_path: Path) -> None:
    doc: RequestDocument
    if make is cursor_plan:
        doc = cursor_plan(UNICODE * 3, name=UNICODE, overview=UNICODE)
    else:
        from baton.request_model.documents import NativeQuestion, QuestionRequest

        doc = QuestionRequest.from_native(
            [
                NativeQuestion(
                    native_id=UNICODE,
                    prompt=UNICODE,
                    description=UNICODE,
                    options=[("é", UNICODE), ("e\u0301", "decomposed ≠ composed")],
                )
            ],
            title=UNICODE,
        )
    expected = check_limits(doc)
    ledger = Ledger.open(db_path)
    record = await ledger.create(doc, jsonrpc_id=1, **META)
    await ledger.aclose()
    # reopen ("restart") and read back
    ledger = Ledger.open(db_path)
    again = await ledger.get(record.request_id)
    await ledger.aclose()
    assert again.document == doc
    assert again.document_json == expected
    with sqlite3.connect(db_path) as conn:
        (stored,) = conn.execute(
            "SELECT CAST(document_json AS BLOB) FROM requests WHERE request_id = ?",
            (record.request_id,),
        ).fetchone()
    assert stored == expected.encode("utf-8")
    assert again.document_bytes == len(stored)
    if isinstance(doc, PlanRequest):
        assert again.revision == doc.revision
        assert isinstance(again.document, PlanRequest) and again.document.markdown == UNICODE * 3


async def test_oversize_is_rejected_before_anything_is_written(
    ledger: Ledger, db_path: Path
) -> None:
    base = len(check_limits(cursor_plan("")).encode("utf-8"))
    at_limit = cursor_plan("a" * (MAX_DOCUMENT_BYTES - base))
    over = cursor_plan("a" * (MAX_DOCUMENT_BYTES - base + 1))
    ok = await ledger.create(at_limit, jsonrpc_id=1, **META)
    assert ok.document_bytes == MAX_DOCUMENT_BYTES
    assert ok.document == at_limit  # stored whole
    with pytest.raises(PayloadTooLarge) as info:
        await ledger.create(over, jsonrpc_id=2, **META)
    assert [r for r, _ in _rows(db_path, ledger)] == [ok.request_id]
    # the caller records the refusal and emits request.rejected + security.payload_rejected
    rejected = await ledger.record_rejected(
        "plan",
        reason=str(info.value),
        title="oversize plan",
        size_bytes=info.value.size,
        sha256="0" * 64,
        jsonrpc_id=2,
        **META,
    )
    assert rejected.state is State.REJECTED and rejected.document is None
    assert for_state(rejected).TYPE == "request.rejected"
    assert oversize(info.value, subject=rejected.request_id).TYPE == "security.payload_rejected"
    with pytest.raises(NotPending, match="rejected on arrival"):
        await ledger.answer(
            rejected.request_id, PlanAnswer(decision="accept", revision="x"), decided_by="human"
        )


async def test_answer_deliver_and_exactly_once(ledger: Ledger) -> None:
    record = await ledger.create(permission(), jsonrpc_id=5, **META)
    first = await ledger.answer(
        record.request_id, PermissionAnswer(decision="allow"), decided_by="human"
    )
    assert not first.replayed and first.record.state is State.ANSWERED
    assert first.record.answer == PermissionAnswer(decision="allow", option_id="allow-once")
    assert reply_for(record.document, first.record.answer) == {  # type: ignore[arg-type]
        "outcome": {"outcome": "selected", "optionId": "allow-once"}
    }
    # idempotent: the same answer again returns the first result
    second = await ledger.answer(
        record.request_id, PermissionAnswer(decision="allow"), decided_by="human"
    )
    assert second.replayed and second.record == first.record
    # a different answer is rejected
    with pytest.raises(AnswerConflict, match="already answered"):
        await ledger.answer(
            record.request_id, PermissionAnswer(decision="deny"), decided_by="human"
        )
    delivered = await ledger.mark_delivered(record.request_id)
    assert delivered.state is State.DELIVERED and delivered.delivered_at
    # still idempotent after delivery; delivery itself happens once
    assert (
        await ledger.answer(
            record.request_id, PermissionAnswer(decision="allow"), decided_by="human"
        )
    ).replayed
    with pytest.raises(IllegalTransition, match="'deliver' in state 'delivered'"):
        await ledger.mark_delivered(record.request_id)


async def test_delivering_an_unanswered_request_is_illegal(ledger: Ledger) -> None:
    record = await ledger.create(permission(), jsonrpc_id=5, **META)
    with pytest.raises(IllegalTransition, match="'deliver' in state 'pending'"):
        await ledger.mark_delivered(record.request_id)


async def test_invalid_answers_are_refused_against_the_persisted_document(ledger: Ledger) -> None:
    record = await ledger.create(cursor_questions(), jsonrpc_id=1, **META)
    forged = QuestionAnswer(
        selections=(
            QuestionSelection(question_id="question-1", option_ids=("option-9",)),
            QuestionSelection(question_id="question-2", option_ids=("option-1",)),
        )
    )
    with pytest.raises(InvalidAnswer, match="unknown option id 'option-9'"):
        await ledger.answer(record.request_id, forged, decided_by="human")
    assert (await ledger.get(record.request_id)).state is State.PENDING


async def test_stale_plan_answer_is_rejected(ledger: Ledger) -> None:
    v1, v2 = cursor_plan("# v1"), cursor_plan("# v2")
    old = await ledger.create(v1, jsonrpc_id=1, **META)
    await ledger.cancel(old.request_id, "plan re-issued")
    new = await ledger.create(v2, jsonrpc_id=2, **META)
    with pytest.raises(StaleAnswer):
        await ledger.answer(
            new.request_id, PlanAnswer(decision="accept", revision=v1.revision), decided_by="human"
        )
    result = await ledger.answer(
        new.request_id, PlanAnswer(decision="accept", revision=v2.revision), decided_by="human"
    )
    assert result.record.state is State.ANSWERED


async def test_answers_to_ended_requests_are_rejected(ledger: Ledger) -> None:
    record = await ledger.create(permission(), jsonrpc_id=1, **META)
    await ledger.cancel(record.request_id, "turn cancelled")
    with pytest.raises(NotPending, match="is cancelled \\(turn cancelled\\)"):
        await ledger.answer(
            record.request_id, PermissionAnswer(decision="allow"), decided_by="human"
        )


async def test_policy_decisions_must_name_their_rule(ledger: Ledger) -> None:
    record = await ledger.create(permission("read"), jsonrpc_id=1, **META)
    with pytest.raises(RequestError, match="must name the rule"):
        await ledger.answer(
            record.request_id, PermissionAnswer(decision="allow"), decided_by="policy"
        )
    result = await ledger.answer(
        record.request_id,
        PermissionAnswer(decision="allow"),
        decided_by="policy",
        rule="default:allow:read",
    )
    event = for_state(result.record)
    assert event.TYPE == "request.answered"
    assert event.decided_by == "policy" and event.rule == "default:allow:read"  # type: ignore[attr-defined]


async def test_cancel_for_turn_cancels_pending_and_undelivered(ledger: Ledger) -> None:
    a = await ledger.create(permission(), jsonrpc_id=1, **META)
    b = await ledger.create(cursor_plan(), jsonrpc_id=2, **META)
    c = await ledger.create(permission(), jsonrpc_id=3, **{**META, "turn_id": "turn-2"})
    await ledger.answer(
        b.request_id,
        PlanAnswer(decision="accept", revision=cursor_plan().revision),
        decided_by="human",
    )
    cancelled = await ledger.cancel_for_turn("turn-1", "turn ended")
    assert [r.request_id for r in cancelled] == [a.request_id, b.request_id]
    assert all(r.state is State.CANCELLED and r.reason == "turn ended" for r in cancelled)
    assert cancelled_reply(cancelled[0].document) == {"outcome": {"outcome": "cancelled"}}  # type: ignore[arg-type]
    assert (await ledger.get(c.request_id)).state is State.PENDING
    # a late answer for the ended turn is refused, never attributed to another turn
    with pytest.raises(NotPending):
        await ledger.answer(a.request_id, PermissionAnswer(decision="allow"), decided_by="human")


async def test_expire_orphans_after_restart_loses_nothing(db_path: Path) -> None:
    ledger = Ledger.open(db_path)
    plan = cursor_plan(UNICODE)
    pending = await ledger.create(plan, jsonrpc_id=1, **META)
    answered = await ledger.create(permission(), jsonrpc_id=2, **META)
    await ledger.answer(answered.request_id, PermissionAnswer(decision="deny"), decided_by="human")
    live = await ledger.create(permission(), jsonrpc_id=3, **{**META, "connection_id": "conn-live"})
    rev = await ledger.create(review(), jsonrpc_id=None, **{**META, "connection_id": None})
    done = await ledger.create(permission(), jsonrpc_id=4, **META)
    await ledger.answer(done.request_id, PermissionAnswer(decision="allow"), decided_by="human")
    await ledger.mark_delivered(done.request_id)
    await ledger.aclose()

    ledger = Ledger.open(db_path)  # "restart"
    expired = await ledger.expire_orphans({"conn-live"}, "baton restarted; agent connection gone")
    assert {r.request_id for r in expired} == {pending.request_id, answered.request_id}
    for r in expired:
        assert r.state is State.EXPIRED
        assert r.reason == "baton restarted; agent connection gone"
        assert for_state(r).TYPE == "request.expired"
    again = await ledger.get(pending.request_id)
    assert again.document == plan and again.document_json == check_limits(plan)
    assert (await ledger.get(answered.request_id)).answer == PermissionAnswer(
        decision="deny", option_id="reject-once"
    )
    assert (await ledger.get(live.request_id)).state is State.PENDING
    assert (await ledger.get(rev.request_id)).state is State.PENDING
    assert (await ledger.get(done.request_id)).state is State.DELIVERED
    # never auto-approved, never pending
    with pytest.raises(NotPending):
        await ledger.answer(
            pending.request_id,
            PlanAnswer(decision="accept", revision=plan.revision),
            decided_by="human",
        )
    await ledger.aclose()


async def test_reissued_request_after_load_is_linked_not_merged(ledger: Ledger) -> None:
    old = await ledger.create(permission(tool_call_id="call_9"), jsonrpc_id=1, **META)
    await ledger.expire_orphans(set(), "restart")
    doc = permission(tool_call_id="call_9")
    found = await ledger.find_reissued(doc, session_id="sess-1")
    assert found is not None and found.request_id == old.request_id
    new = await ledger.create(
        doc, jsonrpc_id=1, supersedes=found.request_id, **{**META, "connection_id": "conn-2"}
    )
    assert new.supersedes == old.request_id and new.request_id != old.request_id
    with pytest.raises(UnknownRequest):
        await ledger.create(doc, jsonrpc_id=2, supersedes="req-nope", **META)


async def test_pending_filters_and_prefix_resolution(ledger: Ledger) -> None:
    a = await ledger.create(permission(), jsonrpc_id=1, **META)
    b = await ledger.create(cursor_questions(), jsonrpc_id=2, **{**META, "session_id": "sess-2"})
    assert [r.request_id for r in await ledger.pending()] == [a.request_id, b.request_id]
    assert [r.request_id for r in await ledger.pending(session_id="sess-2")] == [b.request_id]
    assert [r.request_id for r in await ledger.pending(kinds={"permission"})] == [a.request_id]
    assert await ledger.resolve_id(a.request_id[:12]) == a.request_id
    with pytest.raises(UnknownRequest, match="ambiguous"):
        await ledger.resolve_id("req-")
    with pytest.raises(UnknownRequest):
        await ledger.get("req-missing")


async def test_wait_answer_in_process_and_timeout(ledger: Ledger) -> None:
    record = await ledger.create(permission(), jsonrpc_id=1, **META)
    with pytest.raises(TimeoutError):
        await ledger.wait_answer(record.request_id, timeout=0.05)
    expired = await ledger.expire_if_pending(record.request_id, "no answer within 0.05s")
    assert expired.state is State.EXPIRED
    other = await ledger.create(permission(), jsonrpc_id=2, **META)
    waiter = asyncio.create_task(ledger.wait_answer(other.request_id, timeout=30))
    await ledger.answer(other.request_id, PermissionAnswer(decision="deny"), decided_by="human")
    got = await asyncio.wait_for(waiter, 10)
    assert got.state is State.ANSWERED
    # an answer that lands first wins over the timeout's expiry
    assert (await ledger.expire_if_pending(other.request_id, "late")).state is State.ANSWERED


async def test_concurrent_answers_exactly_one_wins(ledger: Ledger) -> None:
    record = await ledger.create(permission(), jsonrpc_id=1, **META)
    results = await asyncio.gather(
        *(
            ledger.answer(record.request_id, PermissionAnswer(decision=d), decided_by="human")
            for d in ("allow", "deny", "allow", "deny")
        ),
        return_exceptions=True,
    )
    wins = [r for r in results if not isinstance(r, BaseException) and not r.replayed]
    conflicts = [r for r in results if isinstance(r, AnswerConflict)]
    assert len(wins) == 1 and len(conflicts) == 2


async def test_standalone_and_store_share_one_schema(db_path: Path) -> None:
    from baton.requests.ledger import REQUESTS_MIGRATIONS
    from baton.store.sqlite import SqliteStore

    ledger = Ledger.open(db_path)  # e.g. `baton answer` before any daemon ran
    record = await ledger.create(permission(), jsonrpc_id=1, **META)
    await ledger.aclose()
    store = SqliteStore.open(db_path, extra_migrations=REQUESTS_MIGRATIONS)
    try:
        over_store = Ledger(store)
        assert (await over_store.get(record.request_id)).document == permission()
        result = await over_store.answer(
            record.request_id, PermissionAnswer(decision="allow"), decided_by="human"
        )
        assert result.record.state is State.ANSWERED
        await over_store.aclose()
    finally:
        await store.aclose()
    ledger = Ledger.open(db_path)  # and back
    assert (await ledger.get(record.request_id)).state is State.ANSWERED
    await ledger.aclose()
