"""The JSON API: runs, events, requests and answers, on a real store."""

from __future__ import annotations

import asyncio
import json

import httpx
import pytest

from baton.requests.ledger import Ledger
from baton.requests.states import State
from baton.store.store import Store
from baton.web.answers import WEB_RULE
from tests.web.webbuild import append, create, permission_doc, plan_doc, question_doc


async def test_runs_list_and_detail(client: httpx.AsyncClient, store: Store) -> None:
    await append(store, range(1, 4))
    runs = (await client.get("/api/runs")).json()["runs"]
    assert [r["run_id"] for r in runs] == ["run-1"]
    assert runs[0]["status"] == "running"
    detail = await client.get("/api/runs/run-1")
    assert detail.status_code == 200
    assert detail.json()["last_seq"] == 3
    missing = await client.get("/api/runs/nope")
    assert missing.status_code == 404
    assert missing.json()["error"] == "UnknownRun"
    assert (await client.get("/api/runs?limit=x")).status_code == 400


async def test_events_are_the_stored_lines_as_ndjson(
    client: httpx.AsyncClient, store: Store
) -> None:
    await append(store, range(1, 6))
    stored = list(store.iter_event_json("run-1"))
    response = await client.get("/api/runs/run-1/events", params={"after": 2, "limit": 2})
    assert response.status_code == 200
    assert response.headers["content-type"].startswith("application/x-ndjson")
    assert response.text == stored[2] + "\n" + stored[3] + "\n"
    everything = await client.get("/api/runs/run-1/events")
    assert everything.text.splitlines() == stored
    assert (await client.get("/api/runs/run-1/events?after=-1")).status_code == 400
    assert (await client.get("/api/runs/nope/events")).status_code == 404


async def test_list_and_get_requests(client: httpx.AsyncClient, ledger: Ledger) -> None:
    perm = await create(ledger, permission_doc())
    await create(ledger, question_doc())
    await create(ledger, plan_doc())
    listed = (await client.get("/api/requests")).json()["requests"]
    assert [r["kind"] for r in listed] == ["permission", "question", "plan"]
    assert all(r["state"] == "pending" for r in listed)
    assert listed[0]["document"]["tool_call"]["command"] == "rm -rf build"
    await ledger.cancel(perm.request_id, "turn ended")
    assert len((await client.get("/api/requests?state=pending")).json()["requests"]) == 2
    assert len((await client.get("/api/requests?state=all")).json()["requests"]) == 3
    cancelled = (await client.get("/api/requests?state=cancelled")).json()["requests"]
    assert [r["request_id"] for r in cancelled] == [perm.request_id]
    assert (await client.get("/api/requests?state=bogus")).status_code == 400
    by_prefix = await client.get(f"/api/requests/{perm.request_id[:10]}")
    assert by_prefix.status_code == 200
    assert by_prefix.json()["request_id"] == perm.request_id
    unknown = await client.get("/api/requests/req-doesnotexist")
    assert unknown.status_code == 404
    assert unknown.json()["error"] == "UnknownRequest"


async def test_permission_answer_is_idempotent_and_conflicts_409(
    client: httpx.AsyncClient, ledger: Ledger
) -> None:
    record = await create(ledger, permission_doc())
    url = f"/api/requests/{record.request_id}/answer"
    first = await client.post(url, json={"kind": "permission", "decision": "allow"})
    assert first.status_code == 200, first.text
    body = first.json()
    assert body["replayed"] is False
    assert body["state"] == "answered"
    assert body["decided_by"] == "human"
    assert body["rule"] == WEB_RULE
    assert body["answer"]["option_id"] == "allow-once"  # resolved to the agent's own option
    again = await client.post(url, json={"kind": "permission", "decision": "allow"})
    assert again.status_code == 200
    assert again.json()["replayed"] is True
    assert again.json()["answered_at"] == body["answered_at"]  # the first result
    conflict = await client.post(url, json={"kind": "permission", "decision": "deny"})
    assert conflict.status_code == 409
    assert conflict.json()["error"] == "AnswerConflict"
    stored = await ledger.get(record.request_id)
    assert (stored.state, stored.decided_by, stored.rule) == (State.ANSWERED, "human", WEB_RULE)


async def test_question_answers_forged_ids_422(client: httpx.AsyncClient, ledger: Ledger) -> None:
    record = await create(ledger, question_doc())
    url = f"/api/requests/{record.request_id}/answer"

    def answer(q1: list[str], q2: list[str]) -> dict[str, object]:
        return {
            "kind": "question",
            "selections": [
                {"question_id": "question-1", "option_ids": q1},
                {"question_id": "question-2", "option_ids": q2},
            ],
        }

    forged = await client.post(url, json=answer(["option-9"], ["option-1"]))
    assert forged.status_code == 422
    assert forged.json()["error"] == "InvalidAnswer"
    assert "option-9" in forged.json()["message"]
    native = await client.post(url, json=answer(["pg"], ["option-1"]))  # a native id, not opaque
    assert native.status_code == 422
    two_for_single = await client.post(url, json=answer(["option-1", "option-2"], ["option-1"]))
    assert two_for_single.status_code == 422
    missing = await client.post(url, json={"kind": "question", "selections": []})
    assert missing.status_code == 422
    assert "missing answers" in missing.json()["message"]
    ok = await client.post(url, json=answer(["option-2"], ["option-3", "option-1"]))
    assert ok.status_code == 200, ok.text
    selections = ok.json()["answer"]["selections"]
    assert selections[1]["option_ids"] == ["option-1", "option-3"]  # normalized, document order
    assert (await ledger.get(record.request_id)).state is State.ANSWERED


async def test_plan_answer_stale_revision_422(client: httpx.AsyncClient, ledger: Ledger) -> None:
    record = await create(ledger, plan_doc())
    url = f"/api/requests/{record.request_id}/answer"
    older = plan_doc("# Plan\n\n1. Do something else\n")
    assert older.kind == "plan"
    stale = await client.post(
        url, json={"kind": "plan", "decision": "accept", "revision": older.revision}
    )
    assert stale.status_code == 422
    assert stale.json()["error"] == "StaleAnswer"
    no_revision = await client.post(url, json={"kind": "plan", "decision": "accept"})
    assert no_revision.status_code == 422
    assert "revision" in no_revision.json()["message"]
    assert (await ledger.get(record.request_id)).state is State.PENDING
    accepted = await client.post(
        url, json={"kind": "plan", "decision": "accept", "revision": record.revision}
    )
    assert accepted.status_code == 200, accepted.text
    assert accepted.json()["answer"]["decision"] == "accept"


async def test_unknown_not_pending_and_malformed(client: httpx.AsyncClient, ledger: Ledger) -> None:
    allow = {"kind": "permission", "decision": "allow"}
    unknown = await client.post("/api/requests/req-unknown/answer", json=allow)
    assert unknown.status_code == 404
    record = await create(ledger, permission_doc())
    url = f"/api/requests/{record.request_id}/answer"
    wrong_kind = await client.post(
        url, json={"kind": "plan", "decision": "accept", "revision": "x"}
    )
    assert wrong_kind.status_code == 422
    not_json = await client.post(
        url, content=b"{nope", headers={"content-type": "application/json"}
    )
    assert not_json.status_code == 400
    not_object = await client.post(url, json=["allow"])
    assert not_object.status_code == 422
    form = await client.post(url, data={"kind": "permission", "decision": "allow"})
    assert form.status_code == 415  # a cross-site form cannot post JSON
    huge = await client.post(
        url, content=b" " * (300 * 1024), headers={"content-type": "application/json"}
    )
    assert huge.status_code == 413
    await ledger.cancel(record.request_id, "turn ended")
    gone = await client.post(url, json=allow)
    assert gone.status_code == 409
    assert gone.json()["error"] == "NotPending"
    assert "cancelled" in gone.json()["message"]


async def test_answer_through_api_wakes_a_waiter(
    client: httpx.AsyncClient, store: Store, ledger: Ledger
) -> None:
    record = await create(ledger, permission_doc())
    # The waiter uses its own Ledger, as the daemon would: woken through the doorbell.
    daemon_side = Ledger(store)
    try:
        waiter = asyncio.create_task(daemon_side.wait_answer(record.request_id, timeout=30))
        response = await client.post(
            f"/api/requests/{record.request_id}/answer",
            json={"kind": "permission", "decision": "deny"},
        )
        assert response.status_code == 200
        woken = await asyncio.wait_for(waiter, 10)
    finally:
        await daemon_side.aclose()
    assert woken.state is State.ANSWERED
    assert woken.answer is not None
    assert json.loads(woken.answer_json or "{}")["option_id"] == "reject-once"
    assert (woken.decided_by, woken.rule) == ("human", WEB_RULE)


@pytest.mark.parametrize("path", ["/api/runs", "/api/requests", "/"])
async def test_responses_carry_security_headers(client: httpx.AsyncClient, path: str) -> None:
    response = await client.get(path)
    assert response.status_code == 200
    assert "script-src 'self'" in response.headers["content-security-policy"]
    assert response.headers["x-content-type-options"] == "nosniff"
    assert response.headers["cache-control"] == "no-store"
