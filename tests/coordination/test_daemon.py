"""``baton up`` against the fake session factory and a real FCoP workspace."""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
from pathlib import Path
from typing import Any

from baton.coordination.authority import TrustedAuthority
from baton.coordination.daemon import Daemon, Job, RecordingHumanSink, Usage
from baton.coordination.fcop_port import FcopPort
from baton.coordination.state import CoordinationState
from baton.coordination.team import TeamConfig, default_team
from tests.coordination.conftest import KEY
from tests.coordination.fakes import Agent, FakeFactory, runbook_agent

WAIT = 60.0
CHECKLIST = """Ship release 1.2.

- [ ] @QA run the smoke tests
- [ ] @OPS deploy to staging
"""


def team(**changes: Any) -> TeamConfig:
    base = default_team()
    roles = dict(base.roles)
    for name, concurrency in changes.pop("concurrency", {}).items():
        roles[name] = dataclasses.replace(roles[name], concurrency=concurrency)
    return dataclasses.replace(base, roles=roles, **changes)


def daemon_for(
    port: FcopPort, state_dir: Path, factory: FakeFactory, **team_changes: Any
) -> Daemon:
    return Daemon(
        port=port,
        team=team(**team_changes),
        factory=factory,
        state_dir=state_dir,
        human_sink=RecordingHumanSink(),
    )


async def run_idle(daemon: Daemon) -> Any:
    return await asyncio.wait_for(daemon.run(until_idle=True), WAIT)


async def test_full_loop_pm_delegates_children_report_pm_consolidates_admin_review(
    port: FcopPort, state_dir: Path
) -> None:
    root = port.create_task(sender="ADMIN", recipient="PM", subject="Release 1.2", body=CHECKLIST)
    factory = FakeFactory()
    factory.usage = Usage(input_tokens=10, output_tokens=5)
    daemon = daemon_for(port, state_dir, factory)

    summary = await run_idle(daemon)

    parent = port.read_task(root.task_id)
    assert parent.stage == "review" and parent.claims == 1
    children = port.children(root.task_id)
    assert sorted(c.recipient for c in children) == ["OPS", "QA"]
    for child in children:
        assert child.stage == "done" and child.sender == "PM" and child.claims == 1
        assert (
            child.last_transition["tool"] == "approve_task" and child.last_transition["by"] == "PM"
        )
        head = port.find_report_head(child.task_id, child.attempt_id)  # type: ignore[arg-type]
        assert head is not None and head.sender == child.recipient and head.recipient == "PM"
    # PM: a task prompt (delegation; its early report refused), then one consolidation prompt.
    pm_prompts = factory.prompts_for("PM")
    assert len(pm_prompts) == 2
    assert "--- task body ---" in pm_prompts[0] and "Consolidate" in pm_prompts[1]
    for child in children:
        assert child.task_id in pm_prompts[1]
    pm_calls = [(c.name, c.error is None) for c in factory.sessions["PM"].agent.calls]
    assert pm_calls[:3] == [("create_task", True), ("create_task", True), ("write_report", False)]
    assert pm_calls[3] == ("write_report", True)
    assert len(factory.prompts_for("QA")) == 1 and len(factory.prompts_for("OPS")) == 1
    # The final report to ADMIN became a human request.
    sink = daemon.human_sink
    assert isinstance(sink, RecordingHumanSink)
    assert [r.task_id for r in sink.reviews] == [root.task_id]
    assert sink.reviews[0].role == "PM" and "consolidated" in sink.reviews[0].body
    assert summary.waiting_human == (root.task_id,)
    assert set(summary.done) == {c.task_id for c in children}
    assert summary.stalled == () and summary.blocked == ()
    # Per-session records, also on disk for `baton status` / `baton sessions`.
    saved = CoordinationState.load(daemon.paths.state_file)
    pm = saved.sessions["PM"]
    assert pm.turns == 2 and pm.tool_calls_count == 4 and pm.status == "closed"
    assert pm.usage.availability == "reported" and pm.usage.input_tokens == 20
    assert (
        saved.sessions["DEV"].status == "idle" and saved.sessions["DEV"].turns == 0
    )  # no work, no wake
    assert saved.sessions["QA"].last_report_ref is not None
    # The human approves: T4 with the human's authority.
    done = await daemon.human_review(root.task_id, "approve", "ship it")
    assert done is not None and port.read_task(root.task_id).stage == "done"


async def test_human_rejection_sends_the_leader_back_to_work(
    port: FcopPort, state_dir: Path
) -> None:
    root = port.create_task(sender="ADMIN", recipient="QA", subject="Check", body="check it")
    factory = FakeFactory()
    daemon = daemon_for(port, state_dir, factory)
    await run_idle(daemon)
    assert port.read_task(root.task_id).stage == "review"
    await daemon.human_review(root.task_id, "reject", "also check the docs")
    await run_idle(daemon)
    task = port.read_task(root.task_id)
    assert task.stage == "review" and task.claims == 1
    prompts = factory.prompts_for("QA")
    assert len(prompts) == 2 and "> also check the docs" in prompts[1]


async def test_rejection_survives_a_restart_with_its_reason(
    port: FcopPort, root: Path, state_dir: Path
) -> None:
    task = port.create_task(sender="ADMIN", recipient="OPS", subject="Deploy", body="deploy")
    first = daemon_for(port, state_dir, FakeFactory())
    await run_idle(first)
    await first.human_review(task.task_id, "reject", "use the blue cluster")  # daemon stopped
    factory = FakeFactory()
    await run_idle(daemon_for(FcopPort(root, authority=TrustedAuthority(KEY)), state_dir, factory))
    (prompt,) = factory.prompts_for("OPS")
    assert "sent your last report back" in prompt and "> use the blue cluster" in prompt
    assert port.read_task(task.task_id).stage == "review"


async def test_two_tasks_for_a_role_with_limit_1_run_one_after_the_other(
    port: FcopPort, state_dir: Path
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
        await asyncio.wait_for(both_queued.wait(), WAIT)  # the second task is waiting...
        for _ in range(50):
            await asyncio.sleep(0)  # ...and gets every chance to start, if it could
        active -= 1
        await asyncio.to_thread(runbook_agent, agent, prompt)

    factory = FakeFactory({"QA": qa})
    daemon = daemon_for(port, state_dir, factory)
    enqueue = daemon._enqueue
    qa_jobs: list[str] = []

    def spy(role: str, job: Job) -> bool:
        queued = enqueue(role, job)
        if role == "QA" and job.kind == "work" and queued:
            qa_jobs.append(job.task_id)
            if len(qa_jobs) == 2:
                both_queued.set()
        return queued

    daemon._enqueue = spy  # type: ignore[method-assign]
    await run_idle(daemon)
    assert peak == 1
    assert [e for e in daemon.dispatch_log if e[0].startswith("QA")] == [
        ("QA", "work", qa_jobs[0]),
        ("QA", "work", qa_jobs[1]),
    ]
    assert sorted(qa_jobs) == sorted(ids)
    assert all(port.read_task(i).stage == "review" for i in ids)


async def test_limit_2_runs_them_together(port: FcopPort, state_dir: Path) -> None:
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

    factory = FakeFactory({"QA": qa})
    await run_idle(daemon_for(port, state_dir, factory, concurrency={"QA": 2}))
    assert set(factory.sessions) >= {"QA", "QA-2"}


async def test_restart_after_report_written_submits_without_reprompt_or_reclaim(
    port: FcopPort, root: Path, state_dir: Path
) -> None:
    task = port.create_task(sender="ADMIN", recipient="QA", subject="Crashy", body="b")
    reported = asyncio.Event()

    async def report_then_hang(agent: Agent, prompt: str) -> None:
        await asyncio.to_thread(
            agent.call, "write_report", result="done", body="written before crash"
        )
        reported.set()
        await asyncio.Event().wait()  # the daemon dies here

    first = daemon_for(port, state_dir, FakeFactory({"QA": report_then_hang}))
    running = asyncio.create_task(first.run())
    await asyncio.wait_for(reported.wait(), WAIT)
    running.cancel()
    with contextlib.suppress(asyncio.CancelledError):
        await asyncio.wait_for(running, WAIT)
    before = port.read_task(task.task_id)
    assert before.stage == "active" and before.claims == 1
    report = port.find_report_head(task.task_id, before.attempt_id)  # type: ignore[arg-type]
    assert report is not None

    factory = FakeFactory()
    fresh = FcopPort(root, authority=TrustedAuthority(KEY))
    second = daemon_for(fresh, state_dir, factory)
    summary = await run_idle(second)
    after = fresh.read_task(task.task_id)
    assert factory.prompts_for("QA") == []  # settled from FCoP, not re-prompted
    assert after.stage == "review" and after.claims == 1
    assert after.last_transition["evidence_ref"] == [report.report_id]  # the report was not lost
    assert summary.waiting_human == (task.task_id,)


async def test_restart_mid_turn_resumes_without_reclaiming(
    port: FcopPort, root: Path, state_dir: Path
) -> None:
    task = port.create_task(sender="ADMIN", recipient="DEV", subject="Long", body="b")
    started = asyncio.Event()

    async def hang(agent: Agent, prompt: str) -> None:
        started.set()
        await asyncio.Event().wait()

    first = daemon_for(port, state_dir, FakeFactory({"DEV": hang}))
    running = asyncio.create_task(first.run())
    await asyncio.wait_for(started.wait(), WAIT)
    running.cancel()
    with contextlib.suppress(asyncio.CancelledError):
        await asyncio.wait_for(running, WAIT)
    assert port.read_task(task.task_id).stage == "active"
    factory = FakeFactory()
    await run_idle(daemon_for(FcopPort(root, authority=TrustedAuthority(KEY)), state_dir, factory))
    after = port.read_task(task.task_id)
    assert after.stage == "review" and after.claims == 1
    assert (
        len(factory.prompts_for("DEV")) == 1
        and "--- task body ---" in factory.prompts_for("DEV")[0]
    )


async def test_no_report_gets_one_reminder_then_an_issue_and_a_stall(
    port: FcopPort, state_dir: Path
) -> None:
    task = port.create_task(sender="ADMIN", recipient="OPS", subject="Silent", body="b")
    factory = FakeFactory({"OPS": lambda agent, prompt: None})  # chats, never calls a tool
    daemon = daemon_for(port, state_dir, factory)
    summary = await run_idle(daemon)
    prompts = factory.prompts_for("OPS")
    assert len(prompts) == 2 and prompts[1].startswith("[baton] Reminder")
    assert summary.stalled == (task.task_id,)
    stall = daemon.state.stalls[-1]
    assert stall.task_id == task.task_id and stall.issue_id is not None
    issue = (port.fcop_dir / "issues" / f"{stall.issue_id}.md").read_text()
    assert "stalled" in issue and f"subject_ref: {task.task_id}" in issue
    assert port.read_task(task.task_id).stage == "active"  # visible, not silently dropped


async def test_zero_tool_call_breaker_pauses_the_role(port: FcopPort, state_dir: Path) -> None:
    first = port.create_task(sender="ADMIN", recipient="OPS", subject="a", body="b")
    port.create_task(sender="ADMIN", recipient="OPS", subject="c", body="d")
    factory = FakeFactory({"OPS": lambda agent, prompt: None})
    daemon = daemon_for(port, state_dir, factory, zero_tool_limit=2, zero_tool_cooldown=3600)
    summary = await run_idle(daemon)
    assert summary.paused_roles == ("OPS",)
    assert len(factory.prompts_for("OPS")) == 2  # task a + its reminder; task c is parked
    assert any(
        "zero-tool-call breaker" in p.read_text() for p in (port.fcop_dir / "issues").glob("*.md")
    )
    assert daemon.state.tasks[first.task_id].status == "paused"


async def test_turn_limit_stops_a_runaway_task(port: FcopPort, state_dir: Path) -> None:
    task = port.create_task(sender="ADMIN", recipient="DEV", subject="loop", body="b")

    def busy_without_report(agent: Agent, prompt: str) -> None:
        agent.call("read_task")

    factory = FakeFactory({"DEV": busy_without_report})
    daemon = daemon_for(port, state_dir, factory, turn_limit=1, reminder_turns=3)
    summary = await run_idle(daemon)
    assert len(factory.prompts_for("DEV")) == 1
    assert summary.stalled == (task.task_id,)
    assert "turn limit" in daemon.state.stalls[-1].reason


async def test_explicit_review_rejects_then_approves_each_child(
    port: FcopPort, state_dir: Path
) -> None:
    root = port.create_task(
        sender="ADMIN", recipient="PM", subject="Feature", body="- [ ] @DEV implement the feature\n"
    )
    reviews = 0

    def pm(agent: Agent, prompt: str) -> None:
        nonlocal reviews
        if prompt.startswith("[baton] Review a report"):
            reviews += 1
            report_id = prompt.split("Report ", 1)[1].split(",", 1)[0]
            decision = "reject" if reviews == 1 else "approve"
            agent.call("review_report", report_id=report_id, decision=decision, reason="add tests")
            return
        runbook_agent(agent, prompt)

    factory = FakeFactory({"PM": pm})
    daemon = daemon_for(port, state_dir, factory, child_acceptance="explicit")
    summary = await run_idle(daemon)
    (child,) = port.children(root.task_id)
    assert child.stage == "done" and child.claims == 1
    assert child.last_transition["by"] == "PM"
    dev_prompts = factory.prompts_for("DEV")
    assert len(dev_prompts) == 2 and "> add tests" in dev_prompts[1]  # revision after T5
    assert port.read_task(root.task_id).stage == "review"
    assert summary.waiting_human == (root.task_id,)


async def test_ask_human_waits_for_the_answer_and_delivers_it_as_a_turn(
    port: FcopPort, root: Path, state_dir: Path
) -> None:
    task = port.create_task(sender="ADMIN", recipient="DEV", subject="Pick", body="b")

    def dev(agent: Agent, prompt: str) -> None:
        if "[baton] Answer from ADMIN" in prompt:
            agent.call("write_report", result="done", body="used SQLite")
        else:
            agent.call("ask_human", question="Postgres or SQLite?")  # and stops

    factory = FakeFactory({"DEV": dev})
    daemon = daemon_for(port, state_dir, factory)
    summary = await run_idle(daemon)
    sink = daemon.human_sink
    assert isinstance(sink, RecordingHumanSink)
    (question,) = sink.questions
    assert question.question == "Postgres or SQLite?" and question.task_id == task.task_id
    assert summary.waiting_human == (task.task_id,) and summary.stalled == ()
    assert len(factory.prompts_for("DEV")) == 1  # no reminder while waiting for the human
    assert await daemon.human_answer(question.request_id, "SQLite")
    # The answer survives a restart: a new daemon delivers it.
    factory2 = FakeFactory({"DEV": dev})
    again = daemon_for(FcopPort(root, authority=TrustedAuthority(KEY)), state_dir, factory2)
    await run_idle(again)
    (prompt,) = factory2.prompts_for("DEV")
    assert "> SQLite" in prompt and "> Postgres or SQLite?" in prompt
    assert port.read_task(task.task_id).stage == "review"
    assert again.state.questions[question.request_id].status == "delivered"


async def test_until_idle_returns_with_nothing_to_do(port: FcopPort, state_dir: Path) -> None:
    summary = await run_idle(daemon_for(port, state_dir, FakeFactory()))
    assert summary.done == () and summary.waiting_human == () and summary.stalled == ()
