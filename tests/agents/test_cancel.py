"""Cancellation: session/cancel, prompt replacement and shutdown stop steps and leave no process."""

import re
from pathlib import Path

import pytest

from tests.agents.builtin_client import AgentProcess, Message, StartAgent, Turn, allow_once

pytestmark = pytest.mark.skipif(not Path("/proc/self/stat").exists(), reason="inspects /proc")

LONG_STEP = "```sh\necho pid=$$\nsleep 30\necho unreachable\n```\n```sh\ntouch never\n```\n"


def live_members(pgid: int) -> list[int]:
    """Processes of a process group that are alive (zombies awaiting their reaper don't count)."""
    members = []
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rsplit(")", 1)[1].split()
        except (OSError, IndexError):
            continue
        if int(fields[2]) == pgid and fields[0] != "Z":
            members.append(int(stat.parent.name))
    return members


def step_pid(message: Message) -> int | None:
    """The pid a step printed (``pid=N``), from an output update."""
    update = message.get("params", {}).get("update", {})
    for item in update.get("content") or []:
        if match := re.search(r"pid=(\d+)", item.get("content", {}).get("text", "")):
            return int(match[1])
    return None


async def test_cancel_kills_the_step_group_and_answers_cancelled(
    agent: AgentProcess, workdir: Path
) -> None:
    session_id = await agent.new_session(workdir)
    pids: list[int] = []

    async def cancel_once_running(message: Message) -> None:
        if not pids and (pid := step_pid(message)) is not None:
            pids.append(pid)
            assert pid in live_members(pid)
            await agent.notify("session/cancel", {"sessionId": session_id})

    turn = await agent.prompt(session_id, LONG_STEP, on_message=cancel_once_running)

    assert turn.stop_reason == "cancelled"
    call_id = turn.tool_updates("tool_call")[0]["toolCallId"]
    assert turn.finals() == [
        {
            "sessionUpdate": "tool_call_update",
            "toolCallId": call_id,
            "status": "failed",
            "rawOutput": {"cancelled": True},
        }
    ]
    assert live_members(pids[0]) == []
    assert (
        turn.summary()
        == "Cancelled. 0 of 2 steps succeeded; step 1 (sh: echo pid=$$; sleep 30; echo unreachable)"
        " was cancelled; step 2 was not run."
    )
    assert not (workdir / "never").exists()
    again = await agent.prompt(session_id, "```sh\ntrue\n```\n")
    assert again.stop_reason == "end_turn"


async def test_cancel_withdraws_a_pending_permission_request(
    agent: AgentProcess, workdir: Path
) -> None:
    session_id = await agent.new_session(workdir)
    prompt_id = await agent.send_request(
        "session/prompt",
        {"sessionId": session_id, "prompt": [{"type": "text", "text": "```sh\ntouch no\n```"}]},
    )
    permission: Message | None = None
    while permission is None:
        message = await agent.receive()
        if message.get("method") == "session/request_permission":
            permission = message
    await agent.notify("session/cancel", {"sessionId": session_id})

    seen, response = await agent.exchange(prompt_id)
    assert response["result"] == {"stopReason": "cancelled"}
    assert seen[0] == {
        "jsonrpc": "2.0",
        "method": "$/cancel_request",
        "params": {"requestId": permission["id"]},
    }
    assert seen[1]["params"]["update"]["rawOutput"] == {"cancelled": True}
    # The client answers the withdrawn request late, as ACP tells it to; the agent shrugs.
    await agent.send(
        {"jsonrpc": "2.0", "id": permission["id"], "result": {"outcome": {"outcome": "cancelled"}}}
    )
    assert (await agent.prompt(session_id, "```sh\ntrue\n```\n")).stop_reason == "end_turn"
    assert not (workdir / "no").exists()


async def test_a_new_prompt_replaces_the_running_one(agent: AgentProcess, workdir: Path) -> None:
    session_id = await agent.new_session(workdir)
    first_id = await agent.send_request(
        "session/prompt", {"sessionId": session_id, "prompt": [{"type": "text", "text": LONG_STEP}]}
    )
    pid = None
    while pid is None:
        message = await agent.receive()
        if "id" in message and "method" in message:
            await agent.send({"jsonrpc": "2.0", "id": message["id"], "result": allow_once(message)})
        pid = step_pid(message)

    replacing = await agent.prompt(session_id, "```sh\necho replaced\n```\n")
    # The replaced turn winds down (answering ``cancelled``) before the new one starts.
    cut = next(
        i for i, m in enumerate(replacing.messages) if m.get("id") == first_id and "method" not in m
    )
    assert replacing.messages[cut]["result"] == {"stopReason": "cancelled"}
    first = Turn(replacing.messages[:cut], replacing.messages[cut])
    second = Turn(replacing.messages[cut + 1 :], replacing.response)
    assert first.finals()[0]["rawOutput"] == {"cancelled": True}
    assert first.summary().startswith("Cancelled.")
    assert second.shape()[0] == "plan:pending"
    assert second.summary() == "1 of 1 step succeeded."
    assert live_members(pid) == []


async def test_closing_stdin_stops_running_steps_and_exits(
    start_agent: StartAgent, workdir: Path
) -> None:
    agent = await start_agent()
    await agent.initialize()
    session_id = await agent.new_session(workdir)
    prompt_id = await agent.send_request(
        "session/prompt", {"sessionId": session_id, "prompt": [{"type": "text", "text": LONG_STEP}]}
    )
    pid = None
    while pid is None:
        message = await agent.receive()
        if "id" in message and "method" in message:
            await agent.send({"jsonrpc": "2.0", "id": message["id"], "result": allow_once(message)})
        pid = step_pid(message)
    assert agent.process.stdin is not None
    agent.process.stdin.close()
    _, response = await agent.exchange(prompt_id)
    assert response["result"] == {"stopReason": "cancelled"}
    assert await agent.close() == 0
    assert live_members(pid) == []


async def test_processes_left_behind_by_a_step_are_stopped_when_it_ends(
    agent: AgentProcess, workdir: Path
) -> None:
    session_id = await agent.new_session(workdir)
    turn = await agent.prompt(session_id, "```sh\nsleep 30 &\necho pid=$$\n```\n")
    assert turn.summary() == "1 of 1 step succeeded."
    pid = step_pid({"params": {"update": turn.finals()[0]}})
    assert pid is not None and live_members(pid) == []


async def test_sigterm_cancels_the_running_turn_and_exits(
    start_agent: StartAgent, workdir: Path
) -> None:
    agent = await start_agent()
    await agent.initialize()
    session_id = await agent.new_session(workdir)
    pids: list[int] = []

    async def terminate_once_running(message: Message) -> None:
        if not pids and (pid := step_pid(message)) is not None:
            pids.append(pid)
            agent.process.terminate()

    turn = await agent.prompt(session_id, LONG_STEP, on_message=terminate_once_running)
    assert turn.stop_reason == "cancelled"
    assert await agent.close() == 0
    assert live_members(pids[0]) == []
