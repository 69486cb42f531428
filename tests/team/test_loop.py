"""``baton up``'s loop against fake sessions acting through the real role tools, a real FCoP
workspace and a real store: delegation, consolidation, reviews, questions, restarts, stops."""

from __future__ import annotations

import asyncio
import contextlib
from pathlib import Path
from typing import Any

import pytest

from baton.fcop_port.port import FcopPort
from baton.request_model.documents import ElicitationAnswer, ReviewAnswer
from baton.requests.states import State
from baton.team.contract import TurnResult, Usage
from baton.team.jobs import Job
from baton.team.states import TaskState
from baton.team.views import slot_views, task_views, team_view
from tests.coordination.fakes import Agent, runbook_agent
from tests.team.conftest import WAIT, Team

CHECKLIST = """Ship release 1.2.

- [ ] @QA run the smoke tests
- [ ] @OPS deploy to staging
"""


def records(team: Team) -> dict[str, Any]:
    return {r.task_id: r for r in task_views(team.store)}


async def review_request(team: Team, task_id: str) -> Any:
    record = records(team)[task_id]
    assert record.review_request is not None, record
    from baton.requests.ledger import Ledger

    return await Ledger(team.store).get(record.review_request)


async def answer_review(team: Team, task_id: str, decision: str, reason: str) -> None:
    from baton.requests.ledger import Ledger

    request = await review_request(team, task_id)
    await Ledger(team.store).answer(
        request.request_id,
        ReviewAnswer(decision=decision, reason=reason),
        decided_by="human",  # type: ignore[arg-type]
    )


async def test_full_loop_pm_delegates_children_report_pm_consolidates_admin_review(
    team: Team, port: FcopPort
) -> None:
    root = port.create_task(sender="ADMIN", recipient="PM", subject="Release 1.2", body=CHECKLIST)
    factory = team.factory()
    factory.usage = Usage(input_tokens=10, output_tokens=5)
    summary = await team.run_idle(team.loop(factory))

    parent = port.read_task(root.task_id)
    assert parent.stage == "review" and parent.claims == 1
    children = port.children(root.task_id)
    assert sorted(c.recipient for c in children) == ["OPS", "QA"]
    for child in children:
        assert child.stage == "done" and child.sender == "PM" and child.claims == 1
        assert child.last_transition["tool"] == "approve_task"
        assert child.last_transition["by"] == "PM"
    pm_prompts = factory.prompts_for("PM")
    assert len(pm_prompts) == 2
    assert "--- task body ---" in pm_prompts[0] and "Consolidate" in pm_prompts[1]
    for child in children:
        assert child.task_id in pm_prompts[1]
    assert len(factory.prompts_for("QA")) == 1 and len(factory.prompts_for("OPS")) == 1
    # The final report to ADMIN is a review request in the inbox, committed with the record.
    request = await review_request(team, root.task_id)
    assert request.state is State.PENDING and request.kind == "review"
    assert "consolidated" in request.document.summary  # type: ignore[union-attr]
    assert summary.waiting_human == (root.task_id,)
    assert set(summary.done) == {c.task_id for c in children}
    assert summary.stalled == () and summary.blocked == ()
    slots = {s.name: s for s in slot_views(team.store)}
    pm = slots["PM"]
    assert pm.turns == 2 and pm.tool_calls_count == 4 and pm.status == "closed"
    assert pm.usage["availability"] == "reported" and pm.usage["input_tokens"] == 20
    assert pm.session_id == "fake-PM-0"
    assert slots["DEV"].status == "idle" and slots["DEV"].turns == 0  # no work, no wake
    assert slots["QA"].last_report_ref is None or slots["QA"].turns == 1
    # The human approves (any process): the next loop applies it (T4, human authority).
    await answer_review(team, root.task_id, "approve", "ship it")
    view = team_view(team.store, team.loop(team.factory()).team, port)
    assert [t.baton_status for t in view.tasks if t.task_id == root.task_id] == ["review_answered"]
    await team.run_idle(team.loop(team.factory()))
    assert port.read_task(root.task_id).stage == "done"
    assert (await review_request(team, root.task_id)).state is State.DELIVERED
    assert records(team)[root.task_id].state is TaskState.SETTLED


async def test_human_rejection_sends_the_task_back_with_its_reason(
    team: Team, port: FcopPort
) -> None:
    task = port.create_task(sender="ADMIN", recipient="QA", subject="Check", body="check it")
    factory = team.factory()
    await team.run_idle(team.loop(factory))
    assert port.read_task(task.task_id).stage == "review"
    await answer_review(team, task.task_id, "reject", "also check the docs")
    await team.run_idle(team.loop(factory))
    after = port.read_task(task.task_id)
    assert after.stage == "review" and after.claims == 1
    prompts = factory.prompts_for("QA")
    assert len(prompts) == 2 and "> also check the docs" in prompts[1]
    request = await review_request(team, task.task_id)
    assert request.state is State.PENDING  # a fresh review for the new attempt


async def test_two_tasks_for_a_role_with_limit_1_run_one_after_the_other(
    team: Team, port: FcopPort
) -> None:
    ids = [
        port.create_task(sender="ADMIN", recipient="QA", subject=f"t{i}", body="b").task_id
        for i in (1, 2)
    ]
    active = 0
    peak = 0
    both_queued = asyncio.Event()

    async def qa(agent: Agent, prompt: str) -> None:
        nonlocal active, peak
        active += 1
        peak = max(peak, active)
        await asyncio.wait_for(both_queued.wait(), WAIT)
        for _ in range(50):
            await asyncio.sleep(0)  # the second task gets every chance to start, if it could
        active -= 1
        await asyncio.to_thread(runbook_agent, agent, prompt)

    factory = team.factory({"QA": qa})
    loop = team.loop(factory)
    qa_jobs: list[str] = []

    class SpyQueue(asyncio.Queue[Job]):
        """QA's role queue, noting each TASK the first time it is queued."""

        def put_nowait(self, job: Job) -> None:
            super().put_nowait(job)
            if job.task_id not in qa_jobs:
                qa_jobs.append(job.task_id)
                if len(qa_jobs) == 2:
                    both_queued.set()

    loop._queues["QA"] = SpyQueue()
    await team.run_idle(loop)
    assert peak == 1
    qa_log = [e for e in loop.dispatch_log if e[0].startswith("QA")]
    assert [e[2] for e in qa_log] == qa_jobs
    assert sorted(qa_jobs) == sorted(ids)
    assert all(port.read_task(i).stage == "review" for i in ids)


async def test_limit_2_runs_them_together(team: Team, port: FcopPort) -> None:
    for i in (1, 2):
        port.create_task(sender="ADMIN", recipient="QA", subject=f"t{i}", body="b")
    started = 0
    both_started = asyncio.Event()

    async def qa(agent: Agent, prompt: str) -> None:
        nonlocal started
        started += 1
        if started == 2:
            both_started.set()
        await asyncio.wait_for(both_started.wait(), WAIT)  # deadlocks unless parallel
        await asyncio.to_thread(runbook_agent, agent, prompt)

    factory = team.factory({"QA": qa})
    await team.run_idle(team.loop(factory, concurrency={"QA": 2}))
    assert set(factory.sessions) >= {"QA", "QA-2"}


async def _run_until(team: Team, loop: Any, event: asyncio.Event) -> None:
    """Run ``loop`` until ``event``, then stop it the way a signal does."""
    running = asyncio.create_task(loop.run())
    await asyncio.wait_for(event.wait(), WAIT)
    loop.stop("stopped by SIGTERM")
    await asyncio.wait_for(running, WAIT)


async def test_restart_after_report_written_submits_without_reprompt_or_reclaim(
    team: Team, port: FcopPort
) -> None:
    task = port.create_task(sender="ADMIN", recipient="QA", subject="Crashy", body="b")
    reported = asyncio.Event()

    async def report_then_hang(agent: Agent, prompt: str) -> None:
        await asyncio.to_thread(agent.call, "write_report", result="done", body="before the stop")
        reported.set()
        await asyncio.Event().wait()

    await _run_until(team, team.loop(team.factory({"QA": report_then_hang})), reported)
    assert records(team)[task.task_id].state is TaskState.INTERRUPTED
    before = port.read_task(task.task_id)
    report = port.find_report_head(task.task_id, before.attempt_id)  # type: ignore[arg-type]
    assert before.stage == "active" and report is not None

    team.reopen()
    factory = team.factory()
    fresh = team.port()
    summary = await team.run_idle(team.loop(factory, port=fresh))
    after = fresh.read_task(task.task_id)
    assert factory.prompts_for("QA") == []  # settled from FCoP, not re-prompted
    assert after.stage == "review" and after.claims == 1
    assert after.last_transition["evidence_ref"] == [report.report_id]
    assert summary.waiting_human == (task.task_id,)


async def test_an_interrupted_turn_is_re_prompted_with_its_context_never_reclaimed(
    team: Team, port: FcopPort
) -> None:
    task = port.create_task(sender="ADMIN", recipient="DEV", subject="Long", body="b")
    started = asyncio.Event()

    async def hang(agent: Agent, prompt: str) -> None:
        started.set()
        await asyncio.Event().wait()

    await _run_until(team, team.loop(team.factory({"DEV": hang})), started)
    assert port.read_task(task.task_id).stage == "active"
    team.reopen()
    factory = team.factory()
    await team.run_idle(team.loop(factory))
    after = port.read_task(task.task_id)
    assert after.stage == "review" and after.claims == 1
    (prompt,) = factory.prompts_for("DEV")
    assert (
        prompt.startswith("[baton] Continue an interrupted task") and "--- task body ---" in prompt
    )


async def test_a_failed_turn_after_one_child_re_prompts_and_creates_only_the_missing_one(
    team: Team, port: FcopPort
) -> None:
    """Issue 9: a failed leader turn that delegated is no longer taken as a finished delegation."""
    root = port.create_task(sender="ADMIN", recipient="PM", subject="Ship", body=CHECKLIST)
    turns = 0

    def pm(agent: Agent, prompt: str) -> TurnResult | None:
        nonlocal turns
        turns += 1
        if turns == 1:
            agent.call(
                "create_task",
                recipient="QA",
                subject="run the smoke tests",
                body="run the smoke tests",
            )
            return TurnResult("failed", error="the agent crashed")
        runbook_agent(agent, prompt)
        return None

    factory = team.factory({"PM": pm})
    await team.run_idle(team.loop(factory))
    children = port.children(root.task_id)
    assert sorted(c.recipient for c in children) == ["OPS", "QA"]  # none lost, none doubled
    assert all(c.stage == "done" for c in children)
    assert factory.prompts_for("PM")[1].startswith("[baton] Continue an interrupted task")
    assert port.read_task(root.task_id).stage == "review"


async def test_killed_mid_delegation_the_resumed_leader_creates_only_the_missing_child(
    team: Team, port: FcopPort
) -> None:
    root = port.create_task(sender="ADMIN", recipient="PM", subject="Ship", body=CHECKLIST)
    created = asyncio.Event()

    async def pm(agent: Agent, prompt: str) -> None:
        await asyncio.to_thread(
            agent.call,
            "create_task",
            recipient="QA",
            subject="run the smoke tests",
            body="run the smoke tests",
        )
        created.set()
        await asyncio.Event().wait()

    await _run_until(team, team.loop(team.factory({"PM": pm})), created)
    team.reopen()
    fresh = team.port()
    await team.run_idle(team.loop(team.factory(), port=fresh))
    children = fresh.children(root.task_id)
    assert sorted(c.recipient for c in children) == ["OPS", "QA"]
    assert all(c.stage == "done" and c.claims == 1 for c in children)


async def test_no_report_gets_one_reminder_then_needs_attention(team: Team, port: FcopPort) -> None:
    task = port.create_task(sender="ADMIN", recipient="OPS", subject="Silent", body="b")
    factory = team.factory({"OPS": lambda agent, prompt: None})  # chats, never calls a tool
    summary = await team.run_idle(team.loop(factory))
    prompts = factory.prompts_for("OPS")
    assert len(prompts) == 2 and prompts[1].startswith("[baton] Reminder")
    assert summary.stalled == (task.task_id,)
    record = records(team)[task.task_id]
    assert record.state is TaskState.NEEDS_ATTENTION and record.issue_id is not None
    assert record.attention_request is not None
    issue = (port.fcop_dir / "issues" / f"{record.issue_id}.md").read_text()
    assert "needs attention" in issue and f"subject_ref: {task.task_id}" in issue
    assert port.read_task(task.task_id).stage == "active"  # visible, not silently dropped
    # The human asks for a retry from the inbox: baton prompts again.
    from baton.requests.ledger import Ledger

    await Ledger(team.store).answer(
        record.attention_request,
        ElicitationAnswer(action="accept", content={"note": "try again"}),
        decided_by="human",
    )
    again = team.factory()
    await team.run_idle(team.loop(again))
    assert port.read_task(task.task_id).stage == "review"
    assert len(again.prompts_for("OPS")) == 1


async def test_zero_tool_call_breaker_pauses_the_role(team: Team, port: FcopPort) -> None:
    port.create_task(sender="ADMIN", recipient="OPS", subject="a", body="b")
    port.create_task(sender="ADMIN", recipient="OPS", subject="c", body="d")
    factory = team.factory({"OPS": lambda agent, prompt: None})
    loop = team.loop(factory, zero_tool_limit=2, zero_tool_cooldown=3600)
    summary = await team.run_idle(loop)
    assert summary.paused_roles == ("OPS",)
    assert len(factory.prompts_for("OPS")) == 2  # task a + its reminder; task c is parked
    assert any(
        "zero-tool-call breaker" in p.read_text() for p in (port.fcop_dir / "issues").glob("*.md")
    )


async def test_turn_limit_stops_a_runaway_task(team: Team, port: FcopPort) -> None:
    task = port.create_task(sender="ADMIN", recipient="DEV", subject="loop", body="b")

    def busy_without_report(agent: Agent, prompt: str) -> None:
        agent.call("read_task")

    factory = team.factory({"DEV": busy_without_report})
    summary = await team.run_idle(team.loop(factory, turn_limit=1, reminder_turns=3))
    assert len(factory.prompts_for("DEV")) == 1
    assert summary.stalled == (task.task_id,)
    assert "turn limit" in (records(team)[task.task_id].reason or "")


async def test_explicit_review_rejects_then_approves_each_child(team: Team, port: FcopPort) -> None:
    root = port.create_task(
        sender="ADMIN", recipient="PM", subject="Feature", body="- [ ] @DEV implement the feature\n"
    )
    reviews = 0

    def pm(agent: Agent, prompt: str) -> None:
        nonlocal reviews
        if "[baton] Review a report" in prompt:
            reviews += 1
            report_id = prompt.split("Report ", 1)[1].split(",", 1)[0]
            decision = "reject" if reviews == 1 else "approve"
            agent.call("review_report", report_id=report_id, decision=decision, reason="add tests")
            return
        runbook_agent(agent, prompt)

    factory = team.factory({"PM": pm})
    summary = await team.run_idle(team.loop(factory, child_acceptance="explicit"))
    (child,) = port.children(root.task_id)
    assert child.stage == "done" and child.claims == 1
    assert child.last_transition["by"] == "PM"
    dev_prompts = factory.prompts_for("DEV")
    assert len(dev_prompts) == 2 and "> add tests" in dev_prompts[1]  # revision after T5
    assert port.read_task(root.task_id).stage == "review"
    assert summary.waiting_human == (root.task_id,)


async def test_ask_human_waits_for_the_answer_and_delivers_it_as_a_turn(
    team: Team, port: FcopPort
) -> None:
    task = port.create_task(sender="ADMIN", recipient="DEV", subject="Pick", body="b")

    def dev(agent: Agent, prompt: str) -> None:
        if "[baton] Answer from ADMIN" in prompt:
            agent.call("write_report", result="done", body="used SQLite")
        else:
            agent.call("ask_human", question="Postgres or SQLite?")  # and stops

    factory = team.factory({"DEV": dev})
    summary = await team.run_idle(team.loop(factory))
    view = team_view(team.store, team.loop(team.factory()).team)
    (question,) = view.questions
    assert question["question"] == "Postgres or SQLite?" and question["task_id"] == task.task_id
    assert summary.waiting_human == (task.task_id,) and summary.stalled == ()
    assert len(factory.prompts_for("DEV")) == 1  # no reminder while waiting for the human
    from baton.requests.ledger import Ledger

    await Ledger(team.store).answer(
        question["request_id"],
        ElicitationAnswer(action="accept", content={"answer": "SQLite"}),
        decided_by="human",
    )
    team.reopen()
    again = team.factory({"DEV": dev})
    await team.run_idle(team.loop(again))
    (prompt,) = again.prompts_for("DEV")
    assert "> SQLite" in prompt and "> Postgres or SQLite?" in prompt
    assert port.read_task(task.task_id).stage == "review"
    request = await Ledger(team.store).get(question["request_id"])
    assert request.state is State.DELIVERED


async def test_a_review_is_in_the_inbox_exactly_when_pending(team: Team, port: FcopPort) -> None:
    """Issue 9: the record and its request commit together; a lost request is re-opened."""
    task = port.create_task(sender="ADMIN", recipient="QA", subject="Check", body="b")
    await team.run_idle(team.loop(team.factory()))
    first = await review_request(team, task.task_id)
    assert first.state is State.PENDING
    # Simulate a request that vanished (a store from before this rule): baton opens it again.
    from baton.requests.ledger import Ledger

    await Ledger(team.store).expire(first.request_id, "lost")
    await team.run_idle(team.loop(team.factory()))
    second = await review_request(team, task.task_id)
    assert second.request_id != first.request_id and second.state is State.PENDING
    pending = [r for r in await Ledger(team.store).pending() if r.kind == "review"]
    assert [r.request_id for r in pending] == [second.request_id]


async def test_until_idle_returns_with_nothing_to_do(team: Team) -> None:
    summary = await team.run_idle(team.loop(team.factory()))
    assert summary.done == () and summary.waiting_human == () and summary.stalled == ()


async def test_a_second_up_on_the_project_is_refused(team: Team, port: FcopPort) -> None:
    import os

    from baton.team.loop import TeamLoopBusy
    from tests.coordination.slots import own_project

    sleeper = await asyncio.create_subprocess_exec("sleep", "60")
    try:
        own_project(team.store, sleeper.pid)
        import socket

        from baton.store import team_sql

        host = socket.gethostname()
        boot = ""
        with contextlib.suppress(OSError):
            boot = Path("/proc/sys/kernel/random/boot_id").read_text().strip()
        team.store.write_sync(lambda tx: team_sql.OWNER.update(tx, 1, {"host": host, "boot": boot}))
        loop = team.loop(team.factory())
        try:
            await asyncio.wait_for(loop.run(until_idle=True), WAIT)
        except TeamLoopBusy as exc:
            assert str(sleeper.pid) in str(exc)
        else:
            raise AssertionError("a second baton up ran")
    finally:
        sleeper.kill()
        await sleeper.wait()
    assert os.getpid() > 0


async def test_a_stop_before_the_loop_runs_is_kept(team: Team) -> None:
    """A Ctrl-C between building the loop and running it (``baton up``'s start-up)."""
    loop = team.loop(team.factory())
    loop.stop("stopped by SIGINT")
    summary = await asyncio.wait_for(loop.run(), WAIT)  # not until_idle: only a stop ends it
    assert summary.stopped


@pytest.mark.parametrize(
    "step",
    [
        "recovery.migrate",
        "sweeps.sweep",
        "recovery.recover",
        "_open_slots",
        "recovery.reevaluate_all",
        "outbox.drain",
    ],
)
async def test_a_stop_during_start_up_ends_the_run(
    team: Team, step: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Whatever start-up step a signal lands in, the loop stops instead of waiting forever."""
    loop = team.loop(team.factory())
    *path, name = step.split(".")
    owner: Any = loop
    for part in path:
        owner = getattr(owner, part)
    original = getattr(owner, name)
    reached = asyncio.Event()

    async def stopped_here(*args: Any, **kwargs: Any) -> Any:
        loop.stop("stopped by SIGINT")
        reached.set()
        return await original(*args, **kwargs)

    monkeypatch.setattr(owner, name, stopped_here)
    summary = await asyncio.wait_for(loop.run(), WAIT)
    assert reached.is_set() and summary.stopped
    assert loop.sweeper.feed is None  # its inotify instance is closed with the run
    # it let go of the project: the next ``baton up`` runs
    again = await asyncio.wait_for(team.run_idle(team.loop(team.factory())), WAIT)
    assert not again.stopped


async def test_a_turn_the_human_cancels_needs_attention_and_a_retry_re_prompts(
    team: Team, port: FcopPort
) -> None:
    """Issue 14: the dashboard's Cancel turn on a team run's role (a control row)."""
    from baton.requests.ledger import Ledger
    from baton.role_tools.binding import OutboxRecord, SlotAccess
    from baton.store import team_sql
    from baton.team.controls import ControlRefused, request_cancel
    from baton.team.records import SlotRecord, TurnRecord

    task = port.create_task(sender="ADMIN", recipient="DEV", subject="Long", body="b")
    working = asyncio.Event()

    async def dev(agent: Agent, prompt: str) -> TurnResult | None:
        if "[baton] Retry" in prompt or "asked to retry" in prompt or working.is_set():
            agent.call("write_report", result="done", body="done on the second go")
            return None
        working.set()
        await agent.cancelled.wait()
        return TurnResult("cancelled", stop_reason="cancelled")

    factory = team.factory({"DEV": dev})
    run = asyncio.create_task(team.run_idle(team.loop(factory)))
    await asyncio.wait_for(working.wait(), WAIT)
    # What the page can get wrong is refused before anything reaches the daemon.
    with pytest.raises(ControlRefused, match="no longer on TASK-x"):
        request_cancel(team.store, "DEV", task_id="TASK-x", reason="", via="dashboard")
    with pytest.raises(ControlRefused, match="QA is idle"):
        request_cancel(team.store, "QA", task_id=None, reason="", via="dashboard")
    with pytest.raises(ControlRefused, match="no role slot"):
        request_cancel(team.store, "NOPE", task_id=None, reason="", via="dashboard")
    with pytest.raises(ControlRefused, match="over 500"):
        request_cancel(team.store, "DEV", task_id=None, reason="x" * 501, via="dashboard")
    # The daemon checks again: a row for an earlier dispatch of the slot cancels nothing.
    slot = SlotRecord.from_row(team.store.read_tx(lambda tx: team_sql.SLOTS.get(tx, "DEV")))
    SlotAccess(team.store, "DEV").post(
        OutboxRecord(
            kind="cancel_turn",
            role="DEV",
            task_id=task.task_id,
            attempt_id=None,
            data={"pointer_seq": slot.pointer_seq - 1, "via": "dashboard", "reason": "late"},
        )
    )

    async def consumed() -> None:
        while team.store.read_tx(team_sql.open_outbox):
            await asyncio.sleep(0.01)

    await asyncio.wait_for(consumed(), WAIT)
    assert factory.sessions["DEV"].cancels == [] and not run.done()
    posted = request_cancel(
        team.store, "DEV", task_id=task.task_id, reason="wrong approach", via="dashboard"
    )
    assert posted["task_id"] == task.task_id
    summary = await run
    session = factory.sessions["DEV"]
    said = "ADMIN cancelled the turn from the dashboard: wrong approach"
    assert session.cancels == [said]
    assert len(factory.prompts_for("DEV")) == 1  # not re-prompted behind the human's back
    assert summary.stalled == (task.task_id,)
    record = records(team)[task.task_id]
    assert record.state is TaskState.NEEDS_ATTENTION and said in (record.reason or "")
    turn = TurnRecord.from_row(team.store.read_tx(lambda tx: team_sql.TURNS.last(tx, task.task_id)))
    assert turn.outcome == "cancelled" and turn.cancelled_by == said
    # The cancel row was consumed: a second daemon does not cancel anything again.
    assert team.store.read_tx(team_sql.open_outbox) == []
    # The human's retry re-prompts the task (with its context), which now reports.
    assert record.attention_request is not None
    await Ledger(team.store).answer(
        record.attention_request,
        ElicitationAnswer(action="accept", content={"note": "go on"}),
        decided_by="human",
    )
    again = team.factory({"DEV": dev})
    await team.run_idle(team.loop(again))
    assert len(again.prompts_for("DEV")) == 1 and again.sessions["DEV"].cancels == []
    assert port.read_task(task.task_id).stage == "review"


async def test_a_review_turn_the_human_cancels_needs_attention_and_a_retry_reviews_again(
    team: Team, port: FcopPort
) -> None:
    """A review turn's finish leaves the TASK's record as it was: the rule still holds."""
    from baton.requests.ledger import Ledger
    from baton.team.controls import request_cancel

    root = port.create_task(
        sender="ADMIN", recipient="PM", subject="Feature", body="- [ ] @DEV implement it\n"
    )
    reviewing = asyncio.Event()

    async def pm(agent: Agent, prompt: str) -> None:
        if "[baton] Review a report" not in prompt:
            runbook_agent(agent, prompt)
            return
        if not reviewing.is_set():
            reviewing.set()
            await agent.cancelled.wait()
            return
        report_id = prompt.split("Report ", 1)[1].split(",", 1)[0]
        agent.call("review_report", report_id=report_id, decision="approve", reason="fine")

    factory = team.factory({"PM": pm})
    run = asyncio.create_task(team.run_idle(team.loop(factory, child_acceptance="explicit")))
    await asyncio.wait_for(reviewing.wait(), WAIT)
    (child,) = port.children(root.task_id)
    request_cancel(team.store, "PM", task_id=root.task_id, reason="", via="dashboard")
    summary = await run
    assert child.task_id in summary.stalled
    record = records(team)[child.task_id]
    assert record.state is TaskState.NEEDS_ATTENTION
    assert "ADMIN cancelled the turn from the dashboard (no review was filed)" in (
        record.reason or ""
    )
    reviews = [p for p in factory.prompts_for("PM") if "[baton] Review a report" in p]
    assert len(reviews) == 1  # not re-prompted behind the human's back
    assert record.attention_request is not None
    await Ledger(team.store).answer(
        record.attention_request,
        ElicitationAnswer(action="accept", content={"note": "review it"}),
        decided_by="human",
    )
    again = team.factory({"PM": pm})
    await team.run_idle(team.loop(again, child_acceptance="explicit"))
    assert port.read_task(child.task_id).stage == "done"
    assert len([p for p in again.prompts_for("PM") if "[baton] Review a report" in p]) == 1
