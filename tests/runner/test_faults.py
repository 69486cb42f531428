"""Fault injection: every broken agent ends in a typed error or a terminal event,
baton stays healthy, and no process of the agent's group survives.

The scenarios run over the in-memory transport (the same scripts as the subprocess fake
agent, see ``tests/support/harness.py``); the tests about processes (pipes, groups,
signals, grandchildren) say ``transport="subprocess"``.
"""

from __future__ import annotations

import asyncio
import signal
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from baton.errors import AgentTimeout, AuthRequired, RemoteCallError
from baton.procgroup import process_alive
from baton.requests.states import State
from tests.support.harness import FAST_STOP, Harness, Transport, fake, group_gone


async def test_ok_turn_has_exactly_one_terminal_and_honest_usage(harness: Harness) -> None:
    session = await harness.open(fake("ok"))
    outcome = await session.prompt("hello")
    assert outcome.status == "completed" and outcome.stop_reason == "end_turn"
    types = harness.types()
    assert types[0] == "session.started"
    assert types.count("turn.completed") == 1
    terminal_index = types.index("turn.completed")
    assert "transcript.assistant" in types[:terminal_index]
    usage = harness.of("usage.reported")
    assert len(usage) == 1 and usage[0].available is False and usage[0].reason
    seqs = [e.seq for e in harness.events]
    assert seqs == sorted(seqs) and len(set(seqs)) == len(seqs)


@pytest.mark.parametrize(
    ("scenario", "kinds"),
    [("malformed-json", ["invalid_json", "not_object"]), ("invalid-utf8", ["invalid_utf8"])],
)
async def test_bad_frames_are_reported_and_the_turn_still_completes(
    harness: Harness, scenario: str, kinds: list[str]
) -> None:
    session = await harness.open(fake(scenario))
    outcome = await session.prompt("go")
    assert outcome.status == "completed"
    summaries = " ".join(d.summary for d in harness.of("harness.diagnostic"))
    for kind in kinds:
        assert kind in summaries


async def test_a_60_mb_line_is_skipped_with_a_diagnostic(harness: Harness) -> None:
    session = await harness.open(fake("huge-line", "--bytes", str(60 * 1024 * 1024)))
    outcome = await session.prompt("go")
    assert outcome.status == "completed"
    oversized = [d for d in harness.of("harness.diagnostic") if "oversized" in d.summary]
    assert len(oversized) == 1 and "exceeds" in oversized[0].summary
    assert harness.of("transcript.assistant"), "the chunk after the huge line must arrive"


@pytest.mark.parametrize("transport", ["memory", "subprocess"])
async def test_agent_dying_mid_turn_fails_the_turn_with_its_exit_code(
    harness: Harness, transport: Transport
) -> None:
    """Over a real process its stdout closes a moment before it is reaped: baton waits
    (bounded) for the status instead of saying only "closed its stdout" (failed 2 of 3)."""
    session = await harness.open(fake("die-mid-turn"), transport=transport)
    outcome = await session.prompt("go")
    assert outcome.status == "failed"
    failed = harness.of("turn.failed")
    assert len(failed) == 1 and failed[0].error_type == "AgentExited"
    assert "exit code 3" in failed[0].message


async def test_an_agent_that_never_answers_initialize_times_out(harness: Harness) -> None:
    with pytest.raises(AgentTimeout) as info:
        await harness.open(fake("no-initialize"), initialize_timeout=0.2)
    assert info.value.operation == "initialize"
    failed = harness.of("session.failed")
    assert failed and failed[0].error_type == "AgentTimeout"


async def test_stderr_flood_never_deadlocks_and_the_preview_is_bounded(harness: Harness) -> None:
    session = await harness.open(
        fake("stderr-flood", "--bytes", str(50 * 1024 * 1024)), transport="subprocess"
    )
    outcome = await session.prompt("go")
    assert outcome.status == "completed"
    assert session.process is not None
    assert session.process.stderr.total_bytes >= 1024 * 1024
    assert len(session.stderr_preview().encode()) <= 4 * 1024 * 4  # escaped bytes at most 4×


async def test_agent_ignoring_cancel_is_killed_and_the_turn_is_cancelled(harness: Harness) -> None:
    session = await harness.open(fake("ignore-cancel"), transport=FAST_STOP)
    prompt = asyncio.create_task(session.prompt("go"))
    await harness.next_event("transcript.assistant")
    await session.cancel("test cancel")
    # A round trip after the cancel: once answered, the agent has read (and ignored) it.
    assert session.conn is not None
    with pytest.raises(RemoteCallError):
        await session.conn.request("baton/barrier", {})
    assert not prompt.done(), "the agent ignores cancel; the turn must still be open"
    await session.kill("ignored cancel in the test")
    outcome = await asyncio.wait_for(prompt, 10)
    assert outcome.status == "cancelled"
    cancelled = harness.of("turn.cancelled")
    assert len(cancelled) == 1 and cancelled[0].forced
    assert session.process is not None and group_gone(session.process.pgid)


async def test_turn_timeout_sends_cancel_then_fails_the_turn(harness: Harness) -> None:
    session = await harness.open(fake("hang-prompt"))
    outcome = await session.prompt("go", timeout=0.2)
    assert outcome.status == "failed"
    failed = harness.of("turn.failed")
    assert failed[0].error_type == "AgentTimeout"
    assert "stopped on session/cancel" in failed[0].message


async def test_spawned_grandchildren_die_with_the_agent(harness: Harness) -> None:
    session = await harness.open(fake("spawn-grandchild"), transport="subprocess")
    await session.prompt("go")
    pid = session.session_result["_meta"]["grandchildPid"]
    assert process_alive(pid)
    await session.close()
    assert not process_alive(pid)


async def test_auth_required_is_a_typed_error_naming_the_methods(harness: Harness) -> None:
    with pytest.raises(AuthRequired) as info:
        await harness.open(fake("auth-required"))
    assert info.value.auth_methods == ("fake-login",)
    assert harness.of("session.failed")[0].auth_methods == ["fake-login"]


async def test_late_chunks_are_kept_and_attributed_to_their_turn(harness: Harness) -> None:
    session = await harness.open(fake("late-chunks"))
    outcome = await session.prompt("go")
    await harness.next_event("provider.notice", lambda n: n.category == "late_update")
    await session.close()  # whatever text was still held back is kept at the latest now
    assert "Late chunk two." in "".join(t.text for t in harness.of("transcript.assistant"))
    late = [e for e in harness.events if e.type == "transcript.assistant"]
    assert late and all(e.turn_id == outcome.turn_id for e in late)


async def test_repeated_tool_call_is_one_upserted_execution(harness: Harness) -> None:
    session = await harness.open(fake("repeat-tool-call"))
    await session.prompt("go")
    assert len(harness.of("tool.execution.started")) == 1
    assert len(harness.of("tool.execution.completed")) == 1


async def test_unknown_variant_is_visible(harness: Harness) -> None:
    session = await harness.open(fake("unknown-variant"))
    await session.prompt("go")
    notices = harness.of("provider.notice")
    assert any(n.category == "unclassified" and n.variant == "future_variant_xyz" for n in notices)


async def test_vendor_requests_with_ids_are_answered_and_never_block(harness: Harness) -> None:
    session = await harness.open(fake("cursor-ext"))
    outcome = await asyncio.wait_for(session.prompt("go"), 15)
    assert outcome.status == "completed"
    assert session.transport is not None
    assert session.transport.stderr.tail().count("cursor-reply=") == 5


@pytest.mark.parametrize(("preset", "verdict"), [("all", "allow"), ("none", "deny")])
async def test_permission_decisions_are_events_and_delivered(
    harness: Harness, preset: str, verdict: str
) -> None:
    session = await harness.open(fake("permission"), preset=preset)
    await session.prompt("go")
    assert [p.kind for p in harness.of("request.created")] == ["permission"]
    answered = harness.of("request.answered")
    assert answered[0].answer["decision"] == verdict and answered[0].rule
    assert len(harness.of("request.delivered")) == 1
    completed = harness.of("tool.execution.completed")
    assert completed[0].status == ("completed" if verdict == "allow" else "failed")


async def test_a_reply_the_agent_has_is_delivered_even_when_the_turn_ends_first(
    harness: Harness, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The agent answers the prompt as soon as it read our permission reply; recording that
    reply ``delivered`` may still be under way then. The turn's end must not cancel it."""
    ledger = harness.ledger
    mark_delivered = ledger.mark_delivered

    async def slow_commit(request_id: str, **kw: Any) -> Any:
        for _ in range(200):  # let the reader dispatch the prompt's answer first
            await asyncio.sleep(0)
        return await mark_delivered(request_id, **kw)

    monkeypatch.setattr(ledger, "mark_delivered", slow_commit)
    session = await harness.open(fake("permission"), preset="all")
    assert (await session.prompt("go")).status == "completed"
    (created,) = harness.of("request.created")
    assert (await ledger.get(created.request_id)).state is State.DELIVERED
    assert not harness.of("request.cancelled")


async def test_a_request_that_waits_carries_its_deadline(harness: Harness) -> None:
    """The broker's wait timeout is the request's ``expires_at``; it expires then."""
    session = await harness.open(fake("permission"), preset="reads", wait_timeout=0.5)
    before = datetime.now(UTC) - timedelta(milliseconds=1)
    outcome = await session.prompt("go")
    after = datetime.now(UTC)
    assert outcome.status == "completed"
    (created,) = harness.of("request.created")
    record = await harness.ledger.get(created.request_id)
    assert record.state is State.EXPIRED and record.expires_at is not None
    deadline = datetime.fromisoformat(record.expires_at) - timedelta(milliseconds=500)
    assert before <= deadline <= after


async def test_a_request_decided_at_once_has_no_deadline(harness: Harness) -> None:
    session = await harness.open(fake("permission"), preset="all", wait_timeout=30)
    await session.prompt("go")
    (created,) = harness.of("request.created")
    assert (await harness.ledger.get(created.request_id)).expires_at is None


async def test_reported_usage_is_kept(harness: Harness) -> None:
    session = await harness.open(fake("usage"))
    await session.prompt("go")
    usage = harness.of("usage.reported")
    assert {u.scope for u in usage} == {"context", "turn"}
    assert all(u.available for u in usage)


async def test_fs_methods_are_contained_to_the_workspace(harness: Harness) -> None:
    session = await harness.open(fake("fs"))
    await session.prompt("go")
    refused = harness.of("security.path_refused")
    assert len(refused) == 2
    assert not (harness.tmp / "escape.txt").exists()
    assert "root:" not in " ".join(e.to_json() for e in harness.events)


async def test_sigterm_ignoring_agent_is_still_reaped_on_close(harness: Harness) -> None:
    session = await harness.open(fake("ignore-cancel"), transport=FAST_STOP)
    assert session.process is not None
    pgid = session.process.pgid
    await session.close()
    assert group_gone(pgid)
    # The agent ignores EOF and SIGTERM: only the escalation to SIGKILL ended it.
    assert session.returncode == -signal.SIGKILL


async def test_cursor_extensions_become_canonical_events_and_durable_requests(
    harness: Harness,
) -> None:
    """The seed's wire finding: cursor/* carry ids, are answered at once, never block;
    questions and plans go through the ledger (here headless: nobody to ask)."""
    session = await harness.open(fake("cursor-ext"), family="cursor")
    outcome = await asyncio.wait_for(session.prompt("go"), 30)
    assert outcome.status == "completed"
    plans = [p for p in harness.of("plan.updated") if p.source == "cursor.update_todos"]
    assert plans and [s.content for s in plans[0].steps] == ["Write the tests", "Ship it"]
    assert harness.of("delegation.completed") or harness.of("delegation.started")
    # The image path does not exist: a visible refusal, no bytes invented.
    assert harness.of("security.path_refused") or harness.of("artifact.generated")
    kinds = sorted(p.kind for p in harness.of("request.created"))
    assert kinds == ["plan", "question"]
    answered = {p.kind: p for p in harness.of("request.answered")}
    assert answered["question"].decided_by == "headless"
    assert answered["plan"].answer["decision"] == "reject"
    assert len(harness.of("request.delivered")) == 2
    assert session.transport is not None
    replies = [
        line.split("=", 1)[1]
        for line in session.transport.stderr.tail(8192).splitlines()
        if line.startswith("cursor-reply=")
    ]
    assert any('"skipped"' in r for r in replies) and any('"rejected"' in r for r in replies)
    usage = harness.of("usage.reported")
    assert usage and not usage[-1].available and "Cursor" in (usage[-1].reason or "")


async def test_agent_death_is_seen_even_when_a_grandchild_holds_its_pipes(
    harness: Harness,
) -> None:
    """npm launchers die while their native child keeps stdout open: no EOF ever comes."""
    session = await harness.open(
        fake("die-mid-turn", "--grandchild-keeps-stdio"), transport=FAST_STOP
    )
    outcome = await asyncio.wait_for(session.prompt("go", timeout=120), 20)
    assert outcome.status == "failed"
    failed = harness.of("turn.failed")[0]
    assert failed.error_type == "AgentExited" and "exit code 3" in failed.message
