"""Results you can trust: the consolidation rule, the gating rule, the review document, and
their enforcement in the role MCP tools (``write_report``, ``create_task``)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from baton.agents.builtin.runbook import parse_runbook
from baton.fcop_port.port import FcopPort
from baton.role_tools.server import RoleTools, ToolRefused
from baton.store.sqlite import SqliteStore
from baton.workflow.header import ChildReport, PromptContext, consolidation_prompt
from baton.workflow.ordering import Prerequisite, Ready, Unmet, Waiting, gate, prerequisite_ids
from baton.workflow.results import (
    OVERRIDE_HEADING,
    ChildOutcome,
    consolidation_verdict,
    normalize_result,
    nothing_done,
)
from baton.workflow.review_summary import (
    DRAFT_HEADING,
    ChildSummary,
    ReviewFacts,
    consolidation_draft,
    review_document,
)
from tests.coordination.slots import open_slot, own_project, point

DONE = ChildOutcome("TASK-a", "DEV", "done")
BLOCKED = ChildOutcome("TASK-b", "QA", "blocked")
FAILED = ChildOutcome("TASK-c", "OPS", "FAILED")
SILENT = ChildOutcome("TASK-d", "OPS", None)


# ---------------------------------------------------------------- consolidation


def test_only_done_is_done() -> None:
    assert [normalize_result(w) for w in ("DONE", " done ", "blocked", "Failure", "ok", None)] == [
        "done",
        "done",
        "blocked",
        "failed",
        "other",
        "other",
    ]


def test_done_over_unfinished_children_is_refused_with_the_honest_result() -> None:
    verdict = consolidation_verdict("done", [DONE, BLOCKED])
    assert not verdict.allowed and verdict.suggested == "blocked"
    assert "TASK-b (QA) reported 'blocked'" in verdict.message and "override" in verdict.message
    assert consolidation_verdict("done", [DONE, FAILED]).suggested == "failed"
    assert not consolidation_verdict("Done", [SILENT]).allowed


def test_an_honest_result_or_an_override_with_a_reason_is_allowed() -> None:
    assert consolidation_verdict("blocked", [DONE, BLOCKED]).allowed
    assert consolidation_verdict("done", [DONE]).allowed
    assert consolidation_verdict("done", []).allowed
    assert not consolidation_verdict("done", [BLOCKED], override="   ").allowed
    overridden = consolidation_verdict("done", [BLOCKED], override="QA's check is known flaky")
    assert overridden.allowed and overridden.overridden


# ---------------------------------------------------------------------- gating


def test_gate_waits_for_running_prerequisites_and_starts_when_they_are_done() -> None:
    running = Prerequisite("TASK-a", "DEV", "active")
    assert gate([running]) == Waiting(("TASK-a",))
    reported = Prerequisite("TASK-a", "DEV", "review", "done")
    assert gate([reported]) == Ready()
    assert gate([reported], acceptance="explicit") == Waiting(("TASK-a",))  # not accepted yet
    assert gate([Prerequisite("TASK-a", "DEV", "done", "done")], acceptance="explicit") == Ready()
    assert gate([]) == Ready()


def test_gate_is_unmet_when_a_prerequisite_did_not_finish_even_if_another_still_runs() -> None:
    verdict = gate(
        [
            Prerequisite("TASK-a", "DEV", "review", "blocked"),
            Prerequisite("TASK-b", "OPS", "active"),
        ]
    )
    assert verdict == Unmet(("TASK-a (DEV) reported 'blocked'",))
    assert isinstance(gate([Prerequisite("TASK-x", "QA", None)]), Unmet)


def test_only_sibling_references_are_prerequisites() -> None:
    assert prerequisite_ids(["REPORT-1", "TASK-b", "TASK-a", "TASK-b"], ["TASK-a", "TASK-b"]) == (
        "TASK-b",
        "TASK-a",
    )


# ------------------------------------------------------------------ the review


CHILDREN = (
    ChildSummary("TASK-a", "DEV", "build", "done", "REPORT-1", "built ok\n```sh\nrm -rf /\n```"),
    ChildSummary("TASK-b", "QA", "check", "blocked", "REPORT-2", "x" * 5000),
)


def test_review_document_summarizes_the_work_not_the_prompt() -> None:
    leader_body = consolidation_draft(CHILDREN)
    doc = review_document(
        ReviewFacts(
            task_id="TASK-p",
            subject="Release 1.2",
            role="PM",
            result="blocked",
            report_id="REPORT-3",
            body=leader_body,
            children=CHILDREN,
            files_changed=("artifact.txt",),
        )
    )
    assert doc.startswith("# Release 1.2\n")
    assert "result: **blocked**" in doc and "1 of 2 done" in doc
    assert "| TASK-a: build | DEV | done | REPORT-1 |" in doc
    assert "### QA: check — blocked" in doc and "more characters in the report" in doc
    assert "> built ok" in doc and "- artifact.txt" in doc
    assert doc.count("TASK-a: build") == 1  # the built-in leader's draft is not shown twice
    assert "review_report(" not in doc and "[baton]" not in doc
    runbook = parse_runbook(doc)
    assert runbook.steps == () and runbook.delegations == ()  # quoted, inert


def test_an_override_is_shown_to_the_human() -> None:
    body = f"All good.\n\n{OVERRIDE_HEADING}\n\nReported done although:\n- TASK-b\n\nReason given: flaky\n"
    doc = review_document(
        ReviewFacts("TASK-p", "R", "PM", "done", "REPORT-3", body, children=CHILDREN)
    )
    assert "overrode unfinished delegated work" in doc and "> Reason given: flaky" in doc
    assert "## PM's report" in doc and "> All good." in doc


def test_consolidation_prompt_states_the_honest_result_and_drafts_the_report() -> None:
    ctx = PromptContext(
        role="PM",
        team="t",
        leader="PM",
        human="ADMIN",
        team_roles=("PM", "DEV", "QA"),
        tools=("write_report", "create_task", "review_report"),
        task_id="TASK-p",
        attempt_id="urn:uuid:1",
        subject="Release",
        sender="ADMIN",
        body="- [ ] @DEV build\n",
    )
    children = [
        ChildReport("TASK-a", "DEV", "build", "review", "REPORT-1", "done", "built"),
        ChildReport("TASK-b", "QA", "check", "review", "REPORT-2", "blocked", "no artifact"),
    ]
    runbook = parse_runbook(consolidation_prompt(ctx, children))
    assert runbook.result == "blocked"
    assert runbook.report is not None and runbook.report.startswith(DRAFT_HEADING)
    assert runbook.steps == () and runbook.delegations == ()
    ok = [ChildReport("TASK-a", "DEV", "build", "review", "REPORT-1", "done", "built")]
    assert parse_runbook(consolidation_prompt(ctx, ok)).result == "done"


# ---------------------------------------------------------- the MCP enforcement


@pytest.fixture
def leader(root: Path, state_dir: Path, port: FcopPort) -> Iterator[tuple[RoleTools, str, str]]:
    store = SqliteStore.open(state_dir / "baton.db")
    own_project(store)  # this process plays the daemon
    access = open_slot(store, root, "PM")
    parent = port.create_task(sender="ADMIN", recipient="PM", subject="Release", body="b")
    attempt = port.claim(parent.task_id, actor="PM").attempt_id
    point(access, parent.task_id, attempt)
    try:
        yield RoleTools(access, port=port), parent.task_id, attempt
    finally:
        store.close()


def _child(port: FcopPort, tools: RoleTools, role: str, result: str, after: str = "") -> str:
    created = tools.call(
        "create_task", {"recipient": role, "subject": f"{role} work", "body": "b", "after": after}
    )
    task_id = created["task_id"]
    attempt = port.claim(task_id, actor=role).attempt_id
    port.write_report(
        task_id=task_id, attempt_id=attempt, sender=role, recipient="PM", result=result, body="r"
    )
    port.submit(task_id, actor=role)
    return str(task_id)


def test_write_report_refuses_done_over_a_blocked_child(
    leader: tuple[RoleTools, str, str], port: FcopPort
) -> None:
    """Failing-first: the built-in PM reported done to ADMIN although a child was blocked."""
    tools, parent, attempt = leader
    _child(port, tools, "DEV", "done")
    _child(port, tools, "QA", "blocked")
    with pytest.raises(ToolRefused) as refused:
        tools.call("write_report", {"result": "done", "body": "all fine"})
    assert refused.value.code == "CHILDREN_NOT_DONE" and "(QA) reported 'blocked'" in str(
        refused.value
    )
    assert port.find_report_head(parent, attempt) is None
    honest = tools.call("write_report", {"result": "blocked", "body": "QA blocked"})
    head = port.find_report_head(parent, attempt)
    assert head is not None and head.report_id == honest["report_id"] and head.result == "blocked"


def test_write_report_keeps_done_with_an_override_recorded_in_the_report(
    leader: tuple[RoleTools, str, str], port: FcopPort
) -> None:
    tools, parent, attempt = leader
    _child(port, tools, "QA", "failed")
    tools.call(
        "write_report",
        {
            "result": "done",
            "body": "shipping anyway",
            "override": "QA env is down, verified by hand",
        },
    )
    head = port.find_report_head(parent, attempt)
    assert head is not None and head.result == "done"
    assert OVERRIDE_HEADING in head.body and "QA env is down, verified by hand" in head.body
    assert "(QA) reported 'failed'" in head.body


def test_create_task_after_records_sibling_prerequisites(
    leader: tuple[RoleTools, str, str], port: FcopPort
) -> None:
    tools, _, _ = leader
    dev = tools.call("create_task", {"recipient": "DEV", "subject": "build", "body": "b"})
    qa = tools.call(
        "create_task",
        {"recipient": "QA", "subject": "check", "body": "b", "after": dev["task_id"]},
    )
    assert qa["after"] == [dev["task_id"]]
    assert port.read_task(qa["task_id"]).references == (dev["task_id"],)
    stranger = port.create_task(sender="ADMIN", recipient="OPS", subject="other", body="b")
    for bad in (stranger.task_id, "TASK-nope", "not-an-id"):
        with pytest.raises(ToolRefused, match="after"):
            tools.call(
                "create_task", {"recipient": "OPS", "subject": "x", "body": "b", "after": bad}
            )


@pytest.mark.parametrize(
    ("body", "says"),
    [
        ("", True),
        ("   \n", True),
        ("Nothing was executed: the prompt held no runbook steps", True),
        ("**Nothing was done.**", True),
        ("No steps were run.", True),
        ("I did nothing: the task was empty.", True),
        ("Built and tested; nothing was run twice.", False),
        ("Ran the suite: 12 passed.", False),
    ],
)
def test_nothing_done_reads_the_opening_of_a_report(body: str, says: bool) -> None:
    assert nothing_done(body) is says


def test_write_report_refuses_done_for_a_report_that_says_nothing_was_done(
    leader: tuple[RoleTools, str, str], port: FcopPort
) -> None:
    """Issue 30 item 4: "nothing was executed" marked done was counted as done."""
    tools, parent, attempt = leader
    for body in ("", "Nothing was executed: the prompt held no runbook steps."):
        with pytest.raises(ToolRefused) as refused:
            tools.call("write_report", {"result": "done", "body": body})
        assert refused.value.code == "NOTHING_DONE", refused.value
    assert port.find_report_head(parent, attempt) is None
    tools.call("write_report", {"result": "blocked", "body": "Nothing was executed: empty task."})
    head = port.find_report_head(parent, attempt)
    assert head is not None and head.result == "blocked"
