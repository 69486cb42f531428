"""The permission-integrity audit, through baton's runner against the fault-injection agent.

The fake agent's fault scenarios are the field failures: an agent that edits without asking
(``skip-permission``), writes through the client unasked (``write-unasked``), opens a terminal
unasked (``terminal-unasked``) or ignores a denial (``ignore-denial``). Each must become one
``security.unapproved_mutation``; an asked-and-allowed mutation must not.
"""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

from baton.events.model import ToolExecutionCompleted
from baton.request_model.documents import (
    PermissionAnswer,
    PermissionOption,
    PermissionRequest,
    ToolCallSummary,
    ToolLocation,
)
from baton.requests.audit import PermissionAudit
from baton.requests.ledger import RequestRecord
from baton.requests.policy import Policy
from baton.requests.states import State
from tests.support.harness import Harness, fake
from tests.support.project import without_isolation

WS = "/work/space"


def _record(
    tool_call_id: str,
    kind: str,
    decision: str,
    *,
    turn: str = "t1",
    paths: tuple[str, ...] = (),
    scope: str = "once",
) -> RequestRecord:
    document = PermissionRequest(
        tool_call=ToolCallSummary(
            tool_call_id=tool_call_id,
            title="x",
            kind=kind,
            locations=tuple(ToolLocation(path=p) for p in paths),
        ),
        options=(PermissionOption(option_id="a", name="Allow", kind="allow_once"),),
    )
    fields = {f.name: None for f in dataclasses.fields(RequestRecord)}
    fields.update(
        request_id="req-1",
        kind="permission",
        state=State.ANSWERED,
        run_id="r",
        turn_id=turn,
        jsonrpc_id=1,
        title="x",
        document=document,
        document_bytes=0,
        document_sha256="",
        answer=PermissionAnswer(decision=decision, scope=scope),  # type: ignore[arg-type]
        decided_by="policy",
        rule="preset-all:allow:edit",
        created_at="",
        updated_at="",
    )
    return RequestRecord(**fields)  # type: ignore[arg-type]


def _done(tool_call_id: str, kind: str, *paths: str) -> ToolExecutionCompleted:
    return ToolExecutionCompleted(
        tool_call_id=tool_call_id,
        title="x",
        kind=kind,
        status="completed",
        locations=[{"path": p} for p in paths],  # type: ignore[misc]
    )


def test_an_allowed_tool_call_passes_and_an_unasked_one_is_found() -> None:
    audit = PermissionAudit(WS)
    audit.decided(_record("a", "edit", "allow"))
    assert audit.tool(_done("a", "edit", "x.txt"), "t1") == []
    [finding] = audit.tool(_done("b", "edit", "y.txt"), "t1")
    assert finding.mutation == "tool_call" and finding.tool_call_id == "b"
    assert finding.path == f"{WS}/y.txt" and not finding.expected
    assert audit.count("t1") == 1
    assert audit.tool(_done("b", "edit"), "t1") == [], "one finding per tool call"


def test_reads_and_other_kinds_are_not_mutations() -> None:
    audit = PermissionAudit(WS)
    assert audit.tool(_done("r", "read", "x"), "t1") == []
    assert audit.tool(_done("o", "other"), "t1") == []


def test_a_denied_call_that_completes_anyway_is_found() -> None:
    audit = PermissionAudit(WS)
    audit.decided(_record("d", "execute", "deny"))
    [finding] = audit.tool(_done("d", "execute"), "t1")
    assert "denied" in finding.reason


def test_a_decision_is_bound_to_its_turn_unless_always() -> None:
    audit = PermissionAudit(WS)
    audit.decided(_record("a", "edit", "allow", turn="t1"))
    assert audit.tool(_done("a", "edit"), "t2"), "another turn's decision does not count"
    audit.decided(_record("z", "edit", "allow", turn="t1", scope="always"))
    assert audit.tool(_done("later", "edit"), "t3") == []


def test_client_writes_need_a_decision_naming_the_path() -> None:
    audit = PermissionAudit(WS, display=lambda p: p.removeprefix(WS + "/"))
    audit.decided(_record("w", "edit", "allow", paths=(f"{WS}/a.txt",)))
    assert audit.client_write(f"{WS}/a.txt", "t1") == []
    [finding] = audit.client_write(f"{WS}/b.txt", "t1")
    assert finding.mutation == "fs_write" and finding.path == "b.txt"
    # The tool call that made the unapproved write is the same mutation: not counted twice.
    assert audit.tool(_done("w2", "edit", f"{WS}/b.txt"), "t1") == []
    assert audit.count("t1") == 1


def test_terminals_need_an_execute_decision() -> None:
    audit = PermissionAudit(WS)
    assert audit.client_terminal("rm -rf build", "t1")
    audit.decided(_record("e", "execute", "allow"))
    assert audit.client_terminal("make", "t1") == []


def test_expected_findings_are_marked() -> None:
    audit = PermissionAudit(WS, expected=True)
    [finding] = audit.tool(_done("b", "edit"), "t1")
    assert finding.expected and "agent_approves" in finding.reason


# ------------------------------------------------------------------ through the runner


async def test_an_edit_made_without_asking_is_an_unapproved_mutation(harness: Harness) -> None:
    session = await harness.open(fake("skip-permission"), preset="all")
    outcome = await session.prompt("go")
    assert (harness.workspace / "skipped.txt").exists()
    [finding] = harness.of("security.unapproved_mutation")
    assert finding.mutation == "tool_call" and finding.tool_call_id == "skip-1"
    assert finding.path == "skipped.txt"
    assert outcome.status == "completed" and outcome.unapproved_mutations == 1


async def test_an_asked_and_allowed_call_is_not_a_finding(harness: Harness) -> None:
    session = await harness.open(fake("permission"), preset="all")
    outcome = await session.prompt("go")
    assert harness.of("request.answered") and not harness.of("security.unapproved_mutation")
    assert outcome.unapproved_mutations == 0


async def test_a_denial_the_agent_ignores_is_found(harness: Harness) -> None:
    session = await harness.open(fake("ignore-denial"), preset="none")
    outcome = await session.prompt("go")
    assert harness.of("request.answered")[0].answer["decision"] == "deny"
    [finding] = harness.of("security.unapproved_mutation")
    assert "denied" in finding.reason and outcome.unapproved_mutations == 1


async def test_client_writes_are_events_and_audited(harness: Harness) -> None:
    session = await harness.open(fake("write-unasked"), preset="all")
    outcome = await session.prompt("go")
    [written] = harness.of("file.written")
    assert written.path == "unasked.txt" and written.bytes == len("written unasked\n")
    import hashlib

    assert written.sha256 == hashlib.sha256(b"written unasked\n").hexdigest()
    [finding] = harness.of("security.unapproved_mutation")
    assert finding.mutation == "fs_write" and outcome.unapproved_mutations == 1


async def test_a_client_terminal_without_a_decision_is_found(harness: Harness) -> None:
    session = await harness.open(fake("terminal-unasked"), preset="all")
    await session.prompt("go")
    [finding] = harness.of("security.unapproved_mutation")
    assert finding.mutation == "terminal" and "echo unasked" in finding.subject


async def test_a_strict_policy_cancels_the_turn(harness: Harness) -> None:
    policy = dataclasses.replace(Policy.preset("all"), audit="strict")
    session = await harness.open(fake("skip-permission", "--linger", "60"), preset=policy)
    outcome = await session.prompt("go", timeout=30)
    # The agent would linger for a minute: only the strict audit's cancel ends the turn now.
    assert outcome.status == "cancelled" and outcome.unapproved_mutations == 1
    [cancelled] = harness.of("turn.cancelled")
    assert "strict audit" in cancelled.reason and not cancelled.forced


# ------------------------------------------------------------------------- baton run


def _fake_project(tmp_path: Path, scenario: str, *extra: str) -> Path:
    import json
    import sys

    repo = tmp_path / "repo"
    repo.mkdir()
    command = [sys.executable, "-m", "baton.testing.fake_agent", "--scenario", scenario, *extra]
    (repo / "baton.toml").write_text(
        f'[profiles.fault]\ncommand = {json.dumps(command)}\nfamily = "builtin"\n'
    )
    return repo


def test_baton_run_exits_4_on_an_unapproved_mutation(tmp_path: Path) -> None:
    from tests.support.project import baton_in

    repo = _fake_project(tmp_path, "skip-permission")
    result = baton_in(repo, "run", "go", "--agent", "fault", "--approve", "all", "--json")
    assert result.returncode == 4, result.stderr
    types = [json.loads(line)["type"] for line in result.stdout.splitlines()]
    assert "security.unapproved_mutation" in types and "turn.completed" in types
    assert "without a recorded decision" in result.stderr


def test_baton_run_strict_cancels_and_exits_4(tmp_path: Path) -> None:
    from tests.support.project import baton_in

    repo = _fake_project(tmp_path, "skip-permission", "--linger", "60")
    result = baton_in(repo, "run", "go", "--agent", "fault", "--audit", "strict", "--json")
    assert result.returncode == 4, result.stderr
    events = [json.loads(line) for line in result.stdout.splitlines()]
    [cancelled] = [e for e in events if e["type"] == "turn.cancelled"]
    assert "strict audit" in cancelled["payload"]["reason"]


def test_an_asked_mutation_exits_0(tmp_path: Path) -> None:
    from tests.support.project import baton_in

    repo = _fake_project(tmp_path, "permission")
    result = baton_in(repo, "run", "go", "--agent", "fault", "--approve", "all")
    assert result.returncode == 0, result.stderr


def test_status_and_sessions_count_unapproved_mutations_per_role(tmp_path: Path) -> None:
    """A DEV role whose agent edits without asking: counted for DEV, shown by status."""
    import subprocess
    import sys

    from tests.support.project import baton_in

    repo = tmp_path / "repo"
    repo.mkdir()
    subprocess.run(["git", "init", "-q", str(repo)], check=True)
    assert baton_in(repo, "init").returncode == 0
    without_isolation(repo)
    command = [sys.executable, "-m", "baton.testing.fake_agent", "--scenario", "skip-permission"]
    text = (repo / "baton.toml").read_text()
    dev = '[team.roles.DEV]\nagent = "builtin"'
    assert dev in text
    text = text.replace(dev, '[team.roles.DEV]\nagent = "fault"')
    text += f'\n[profiles.fault]\ncommand = {json.dumps(command)}\nfamily = "builtin"\n'
    (repo / "baton.toml").write_text(text)
    (repo / "TASK.md").write_text("Make the change.\n")
    created = baton_in(
        repo, "task", "new", "--to", "DEV", "--subject", "Edit", "--body-file", "TASK.md"
    )
    assert created.returncode == 0, created.stderr
    baton_in(repo, "up", "--until-idle", "--json", timeout=300)
    rows = [json.loads(line) for line in baton_in(repo, "sessions", "--json").stdout.splitlines()]
    [dev_row] = [r for r in rows if r["role"] == "DEV"]
    assert dev_row["unapproved_mutations"] >= 1 and dev_row["approval"] == "asks"
    status = baton_in(repo, "status")
    assert status.returncode == 0, status.stderr
    [dev_line] = [line for line in status.stdout.splitlines() if line.strip().startswith("DEV")]
    assert "UNAPPROVED MUTATIONS" in dev_line
    [pm_line] = [line for line in status.stdout.splitlines() if line.strip().startswith("PM")]
    assert "UNAPPROVED" not in pm_line
    listed = baton_in(repo, "sessions")
    assert "UNAPPROVED MUTATIONS" in listed.stdout
