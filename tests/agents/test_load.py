"""Persistence: session/load replays a session's history in a new agent process."""

import json
from pathlib import Path

import pytest

from tests.agents.builtin_client import AgentError, StartAgent


async def test_session_load_replays_history_after_a_restart(
    start_agent: StartAgent, workdir: Path, state_dir: Path
) -> None:
    first = await start_agent()
    await first.initialize()
    session_id = await first.new_session(workdir)
    prompts = ["Build it.\n```sh\necho built\n```\n", "```sh\nexit 4\n```\n```sh\ntrue\n```\n"]
    turns = [await first.prompt(session_id, prompt) for prompt in prompts]
    assert await first.close() == 0

    second = await start_agent()
    await second.initialize()
    request_id = await second.send_request(
        "session/load", {"sessionId": session_id, "cwd": str(workdir), "mcpServers": []}
    )
    replayed, response = await second.exchange(request_id)

    assert response["result"] == {}
    assert all(
        m["method"] == "session/update" and m["params"]["sessionId"] == session_id for m in replayed
    )
    expected = []
    for number, (prompt, turn) in enumerate(zip(prompts, turns, strict=True), start=1):
        user = {"type": "text", "text": prompt}
        expected.append(
            {
                "sessionUpdate": "user_message_chunk",
                "content": user,
                "messageId": f"msg-{number}-user",
            }
        )
        for opening, final in zip(turn.tool_updates("tool_call"), turn.finals(), strict=True):
            expected += [opening, final]
        expected += turn.tool_updates("agent_message_chunk")
    assert [m["params"]["update"] for m in replayed] == expected

    third = await second.prompt(session_id, "```sh\ntrue\n```\n")
    assert third.tool_updates("agent_message_chunk")[0]["messageId"] == "msg-3-1"
    stored = json.loads((state_dir / "sessions" / f"{session_id}.json").read_text())
    assert [t["number"] for t in stored["turns"]] == [1, 2, 3]


async def test_loading_an_unknown_session_is_resource_not_found(
    start_agent: StartAgent, workdir: Path
) -> None:
    agent = await start_agent()
    await agent.initialize()
    for session_id in ["rb-" + "0" * 32, "../../etc/passwd"]:
        with pytest.raises(AgentError) as error:
            await agent.call(
                "session/load", {"sessionId": session_id, "cwd": str(workdir), "mcpServers": []}
            )
        assert error.value.code == -32002
    with pytest.raises(AgentError) as wrong_type:  # not a session id at all: invalid params
        await agent.call("session/load", {"sessionId": 42, "cwd": str(workdir), "mcpServers": []})
    assert wrong_type.value.code == -32602
