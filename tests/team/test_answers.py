"""The human's attention in the team loop: a notice for every new request (once), and an
agent's request that reaches its deadline settling work instead of hanging it."""

from __future__ import annotations

import json
import sys
from pathlib import Path

from baton.fcop_port.port import FcopPort
from baton.request_model.documents import ElicitationAnswer
from baton.requests.ledger import Ledger
from baton.requests.notify import Notifier, NotifyConfig
from baton.store import team_sql
from baton.team.contract import TurnResult
from baton.team.loop import TeamLoop
from baton.team.records import QuestionRecord
from baton.team.views import task_views
from tests.coordination.fakes import Agent, runbook_agent
from tests.team.conftest import Team

APPEND = (
    "import json, sys\n"
    "data = json.load(sys.stdin)\n"
    "with open(sys.argv[1], 'a') as f:\n"
    "    f.write(json.dumps({'id': data['id'], 'kind': data['kind'], "
    "'answer_with': data['answer_with']}) + '\\n')\n"
)


def _notifier(team: Team, log: Path) -> Notifier:
    config = NotifyConfig(command=(sys.executable, "-c", APPEND, str(log)))
    return Notifier(config, store=team.store, project="demo")


def _notices(log: Path) -> list[dict[str, str]]:
    if not log.exists():
        return []
    return [json.loads(line) for line in log.read_text().splitlines()]


async def _run(team: Team, loop: TeamLoop, notifier: Notifier) -> None:
    await team.run_idle(loop)
    await notifier.drain()


async def test_every_new_human_request_of_the_team_is_announced_once(
    team: Team, port: FcopPort, tmp_path: Path
) -> None:
    log = tmp_path / "notices.ndjson"
    review = port.create_task(sender="ADMIN", recipient="QA", subject="Check", body="b")
    asking = port.create_task(sender="ADMIN", recipient="DEV", subject="Pick", body="b")
    silent = port.create_task(sender="ADMIN", recipient="OPS", subject="Silent", body="b")

    def dev(agent: Agent, prompt: str) -> None:
        agent.call("ask_human", question="Postgres or SQLite?")

    factory = team.factory({"DEV": dev, "OPS": lambda agent, prompt: None})
    notifier = _notifier(team, log)
    await _run(team, team.loop(factory, notifier=notifier), notifier)
    records = {r.task_id: r for r in task_views(team.store)}
    expected = {
        records[review.task_id].review_request,
        records[silent.task_id].attention_request,
    }
    rows = team.store.read_tx(lambda tx: team_sql.questions_in_states(tx, ("pending",)))
    (question,) = (QuestionRecord.from_row(row) for row in rows)
    assert question.task_id == asking.task_id and question.request_id is not None
    expected.add(question.request_id)
    notices = _notices(log)
    ids = [n["id"] for n in notices]
    assert sorted(ids) == sorted(expected), notices  # each once, nothing else
    by_id = {n["id"]: n["kind"] for n in notices}
    assert by_id[records[review.task_id].review_request] == "review"
    assert all(n["answer_with"].startswith(f"baton answer {n['id']}") for n in notices)

    # A restarted loop watches the same requests again: nobody is told twice.
    team.reopen()
    again = _notifier(team, log)
    await _run(team, team.loop(team.factory({"DEV": dev}), notifier=again), again)
    assert [n["id"] for n in _notices(log)] == ids


async def test_a_failing_notifier_is_an_event_and_never_blocks_the_loop(
    team: Team, port: FcopPort
) -> None:
    task = port.create_task(sender="ADMIN", recipient="QA", subject="Check", body="b")
    reports: list[object] = []

    async def report(payload: object) -> None:
        reports.append(payload)

    config = NotifyConfig(command=("/nonexistent/notifier",))
    notifier = Notifier(config, store=team.store, report=report)
    summary = await team.run_idle(team.loop(team.factory(), notifier=notifier))
    await notifier.drain()
    assert summary.waiting_human == (task.task_id,)
    [diagnostic] = reports
    assert getattr(diagnostic, "category", None) == "notification"
    assert "could not start" in getattr(diagnostic, "summary", "")


async def test_a_request_refused_at_its_deadline_is_recorded_and_told_to_the_leader(
    team: Team, port: FcopPort
) -> None:
    root = port.create_task(
        sender="ADMIN", recipient="PM", subject="Release", body="- [ ] @QA run the tests\n"
    )
    refusal = "permission 'pytest -q': no answer within 3600s"

    def qa(agent: Agent, prompt: str) -> TurnResult:
        agent.call("write_report", result="done", body="ran what I could")
        return TurnResult("completed", stop_reason="end_turn", tool_calls=1, refusals=(refusal,))

    factory = team.factory({"QA": qa})
    await team.run_idle(team.loop(factory))
    (child,) = port.children(root.task_id)
    turns = team.store.read_tx(lambda tx: team_sql.turns_of(tx, child.task_id))
    errors = [row for row in turns if any(refusal in str(v) for v in row)]
    assert errors, "the turn row records the refusal"
    pm_prompts = factory.prompts_for("PM")
    assert len(pm_prompts) == 2
    assert "got no answer from the human by their deadline" in pm_prompts[1]
    assert child.task_id in pm_prompts[1] and refusal in pm_prompts[1]
    assert "deadline" not in pm_prompts[0]
    # Told once: a later leader turn does not repeat it.
    root2 = port.create_task(sender="ADMIN", recipient="PM", subject="Next", body="nothing")
    again = team.factory()
    await team.run_idle(team.loop(again))
    later = [p for p in again.prompts_for("PM") if root2.task_id in p]
    assert later and all("deadline" not in p for p in later)


async def test_an_attention_answer_still_works_with_a_notifier(
    team: Team, port: FcopPort, tmp_path: Path
) -> None:
    task = port.create_task(sender="ADMIN", recipient="OPS", subject="Silent", body="b")
    notifier = _notifier(team, tmp_path / "n.ndjson")
    factory = team.factory({"OPS": lambda agent, prompt: None})
    await _run(team, team.loop(factory, notifier=notifier), notifier)
    record = {r.task_id: r for r in task_views(team.store)}[task.task_id]
    assert record.attention_request is not None
    await Ledger(team.store).answer(
        record.attention_request,
        ElicitationAnswer(action="accept", content={"note": "try again"}),
        decided_by="human",
    )
    again = team.factory({"OPS": runbook_agent})
    await team.run_idle(team.loop(again, notifier=_notifier(team, tmp_path / "n.ndjson")))
    assert port.read_task(task.task_id).stage == "review"
