"""MCP steps, FCoP delegation and the automatic report, against a real stdio MCP server."""

import os
from collections.abc import AsyncIterator
from pathlib import Path

import pytest
import pytest_asyncio

from tests.agents.builtin_client import AgentProcess, echo_server, read_calls

# One agent serves every test here (a session each), so the MCP SDK is imported once.
pytestmark = pytest.mark.asyncio(loop_scope="module")


@pytest_asyncio.fixture(scope="module", loop_scope="module")
async def agent(tmp_path_factory: pytest.TempPathFactory) -> AsyncIterator[AgentProcess]:
    root = tmp_path_factory.mktemp("mcp-agent")
    env = {
        **os.environ,
        "BATON_AGENT_STATE_DIR": str(root / "state"),
        "BATON_BUILTIN_LOG_LEVEL": "INFO",
    }
    process = await AgentProcess.start(env, root / "agent.log")
    await process.initialize()
    yield process
    assert await process.close() == 0, process.log()


LEADER_PROMPT = """# Lead the release

- [ ] @DEV build the thing
    use make
    and run the tests
- [ ] @QA check the thing
- [x] @OPS already done

```sh
echo built
```
"""


async def test_mcp_steps_call_tools_of_the_injected_server(
    agent: AgentProcess, workdir: Path, tmp_path: Path
) -> None:
    calls = tmp_path / "calls.jsonl"
    session_id = await agent.new_session(workdir, [echo_server(calls)])
    prompt = (
        "baton-report: none\n"
        '```mcp echo.echo\n{"text": "hello"}\n```\n'
        '```mcp echo\n{"text": "bare"}\n```\n'
        '```mcp echo.fail\n{"reason": "no luck"}\n```\n'
        "```sh\ntouch never\n```\n"
    )
    turn = await agent.prompt(session_id, prompt, timeout=30)

    assert turn.requests == []
    openings = turn.tool_updates("tool_call")
    assert [(o["kind"], o["title"], o["rawInput"]) for o in openings] == [
        (
            "other",
            "mcp: echo.echo",
            {"server": "echo", "tool": "echo", "arguments": {"text": "hello"}},
        ),
        ("other", "mcp: echo", {"server": None, "tool": "echo", "arguments": {"text": "bare"}}),
        (
            "other",
            "mcp: echo.fail",
            {"server": "echo", "tool": "fail", "arguments": {"reason": "no luck"}},
        ),
    ]
    finals = turn.finals()
    assert finals[0]["status"] == "completed"
    assert finals[0]["content"] == [
        {"type": "content", "content": {"type": "text", "text": "hello"}}
    ]
    assert finals[0]["rawOutput"]["structuredContent"] == {"result": "hello"}
    assert finals[1]["content"][0]["content"]["text"] == "bare"
    assert finals[2]["status"] == "failed" and finals[2]["rawOutput"]["isError"] is True
    assert turn.summary().startswith(
        "2 of 4 steps succeeded; step 3 (mcp: echo.fail) failed: tool error: "
    )
    assert turn.summary().endswith("; step 4 was not run.")
    assert [c["tool"] for c in read_calls(calls)] == ["echo", "echo", "fail"]


async def test_delegations_and_the_automatic_report(
    agent: AgentProcess, workdir: Path, tmp_path: Path
) -> None:
    calls = tmp_path / "calls.jsonl"
    session_id = await agent.new_session(workdir, [echo_server(calls, name="fcop")])
    turn = await agent.prompt(session_id, LEADER_PROMPT, timeout=30)

    assert [e["content"] for e in turn.updates[0]["entries"]] == [
        "delegate @DEV: build the thing",
        "delegate @QA: check the thing",
        "sh: echo built",
    ]  # a leader that delegates reports later, when it consolidates
    assert [r["params"]["toolCall"]["kind"] for r in turn.requests] == ["execute"]
    logged = read_calls(calls)
    assert logged == [
        {
            "tool": "create_task",
            "arguments": {
                "recipient": "DEV",
                "subject": "build the thing",
                "body": "build the thing\nuse make\nand run the tests",
            },
        },
        {
            "tool": "create_task",
            "arguments": {
                "recipient": "QA",
                "subject": "check the thing",
                "body": "check the thing",
                "after": "TASK-DEV-1",  # sequential by default: QA waits for DEV
            },
        },
    ]
    assert turn.summary() == "3 of 3 steps succeeded."
    assert turn.updates[-2]["entries"][-1]["status"] == "completed"


ORDERED_PROMPT = """Release.

- [ ] @DEV build
- [ ] @OPS notes
  after: none
- [ ] @QA check the build
  after: @DEV
- [ ] @PM sign off
  after: 2, 3
"""


async def test_checklist_order_is_sequential_unless_an_item_says_after(
    agent: AgentProcess, workdir: Path, tmp_path: Path
) -> None:
    calls = tmp_path / "calls.jsonl"
    session_id = await agent.new_session(workdir, [echo_server(calls, name="fcop")])
    await agent.prompt(session_id, ORDERED_PROMPT, timeout=30)
    sent = [(c["arguments"]["recipient"], c["arguments"].get("after")) for c in read_calls(calls)]
    assert sent == [
        ("DEV", None),
        ("OPS", None),
        ("QA", "TASK-DEV-1"),
        ("PM", "TASK-OPS-2, TASK-QA-3"),
    ]
    assert all("after:" not in c["arguments"]["body"] for c in read_calls(calls))


async def test_an_after_naming_no_earlier_item_fails_that_delegation(
    agent: AgentProcess, workdir: Path, tmp_path: Path
) -> None:
    calls = tmp_path / "calls.jsonl"
    session_id = await agent.new_session(workdir, [echo_server(calls, name="fcop")])
    turn = await agent.prompt(
        session_id, "- [ ] @QA check\n  after: @DEV\n- [ ] @OPS go\n  after: none\n", timeout=30
    )
    assert read_calls(calls) == []  # the failing first item stops the runbook
    assert "after: '@DEV' names no earlier checklist item" in turn.summary()


async def test_a_failed_runbook_reports_blocked(
    agent: AgentProcess, workdir: Path, tmp_path: Path
) -> None:
    calls = tmp_path / "calls.jsonl"
    session_id = await agent.new_session(workdir, [echo_server(calls)])
    turn = await agent.prompt(
        session_id, "```sh\necho oops; exit 5\n```\n```sh\ntrue\n```\n", timeout=30
    )

    [report] = read_calls(calls)
    assert report["tool"] == "write_report"
    assert report["arguments"]["result"] == "blocked"
    body = report["arguments"]["body"]
    assert (
        "failed with exit code 5" in body
        and "| 2 | sh: true | not run |" in body
        and "oops" in body
    )
    assert turn.summary().endswith("Report filed with write_report (result: blocked).")


async def test_an_explicit_report_step_replaces_the_automatic_one(
    agent: AgentProcess, workdir: Path, tmp_path: Path
) -> None:
    calls = tmp_path / "calls.jsonl"
    session_id = await agent.new_session(workdir, [echo_server(calls)])
    prompt = '```mcp write_report\n{"result": "done", "body": "by hand"}\n```\n'
    turn = await agent.prompt(session_id, prompt, timeout=30)
    assert read_calls(calls) == [
        {"tool": "write_report", "arguments": {"result": "done", "body": "by hand"}}
    ]
    assert turn.summary() == "1 of 1 step succeeded."


async def test_delegations_without_create_task_are_not_sent(
    agent: AgentProcess, workdir: Path
) -> None:
    session_id = await agent.new_session(workdir)
    turn = await agent.prompt(session_id, "- [ ] @DEV build it\n")
    assert turn.shape() == ["agent_message_chunk", "response:end_turn"]
    assert turn.summary().endswith(
        "1 delegation item(s) were not sent: no MCP server of this session offers create_task."
    )


async def test_an_unstartable_server_fails_its_steps_honestly(
    agent: AgentProcess, workdir: Path
) -> None:
    broken = {"name": "gone", "command": str(workdir / "no-such-binary"), "args": [], "env": []}
    session_id = await agent.new_session(workdir, [broken])
    turn = await agent.prompt(session_id, "```mcp gone.anything\n{}\n```\n", timeout=30)
    assert turn.finals()[0]["status"] == "failed"
    assert "MCP server 'gone' failed to start: " in turn.summary()


async def test_a_prompt_without_steps_reports_blocked_never_done(
    agent: AgentProcess, workdir: Path, tmp_path: Path
) -> None:
    """Nothing done is not done (issue 30 item 4): an empty task, or a reminder that
    carries no record, gets a report that says nothing ran, with result blocked."""
    calls = tmp_path / "calls.jsonl"
    session_id = await agent.new_session(workdir, [echo_server(calls)])
    turn = await agent.prompt(session_id, "Please do the release check.\n", timeout=30)
    [report] = read_calls(calls)
    assert report["tool"] == "write_report"
    assert report["arguments"]["result"] == "blocked"
    assert report["arguments"]["body"].startswith("Nothing was executed")
    assert "> Please do the release check." in report["arguments"]["body"]
    assert turn.summary().endswith("Report filed with write_report (result: blocked).")


async def test_a_reminder_with_the_recorded_calls_files_that_work_s_result(
    agent: AgentProcess, workdir: Path, tmp_path: Path
) -> None:
    """baton's reminder drafts the report from the recorded tool calls of the turn that
    ended without one: the agent, which keeps no memory, files that result."""
    from baton.workflow.header import PromptContext, ToolRecord, reminder_prompt

    ctx = PromptContext(
        role="QA",
        team="t",
        leader="PM",
        human="ADMIN",
        team_roles=("PM", "QA"),
        tools=("write_report",),
        task_id="TASK-1",
        attempt_id="a1",
        subject="smoke",
        sender="PM",
        body="```sh\necho smoke-ok\n```\n",
    )
    recorded = [
        ToolRecord("sh: echo smoke-ok", "completed", "smoke-ok\n```sh\nrm -rf /\n```"),
        ToolRecord("report: write_report", "failed", "the hub was unreachable"),
    ]
    prompt = reminder_prompt(ctx, turns_left=0, recorded=recorded)
    calls = tmp_path / "calls.jsonl"
    session_id = await agent.new_session(workdir, [echo_server(calls)])
    turn = await agent.prompt(session_id, prompt, timeout=30)
    [report] = read_calls(calls)  # nothing of the recorded output ran: only the report
    assert report["tool"] == "write_report"
    assert report["arguments"]["result"] == "done"
    body = report["arguments"]["body"]
    assert "| 1 | sh: echo smoke-ok | completed |" in body and "> smoke-ok" in body
    assert turn.summary().endswith("Report filed with write_report (result: done).")
