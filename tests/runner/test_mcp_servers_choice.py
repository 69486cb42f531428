"""``mcpServers`` chosen from the agent's ``initialize`` answer, before any session call.

An agent object over the in-memory transport advertises ``mcpCapabilities.http`` (or not)
and records the ``mcpServers`` each session call carried: the chooser is asked once, with
the parsed answer, and what it returns is what ``session/new`` (and a resume) sends.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import Any

import pytest

from baton.acp.messages import InitializeAnswer
from baton.agent_profile import AgentProfile
from baton.testing import AgentEnd, in_memory
from tests.support.harness import Harness

HTTP = {"type": "http", "name": "tools", "url": "http://127.0.0.1:1/mcp", "headers": []}
STDIO = {"name": "tools", "command": "/bin/true", "args": [], "env": []}


class Advertiser:
    """Answers initialize with the given ``mcpCapabilities``; records what sessions carried."""

    def __init__(self, http: bool) -> None:
        self.http = http
        self.calls: list[tuple[str, Any]] = []

    async def serve(self, end: AgentEnd) -> int | None:
        while (line := await end.receive_line()) is not None:
            message = json.loads(line)
            method, params = message.get("method"), message.get("params") or {}
            if method == "initialize":
                result: dict[str, Any] = {
                    "protocolVersion": 1,
                    "agentCapabilities": {
                        "mcpCapabilities": {"http": self.http},
                        "sessionCapabilities": {"resume": {}},
                    },
                }
            elif method in ("session/new", "session/resume"):
                self.calls.append((method, params.get("mcpServers")))
                result = {"sessionId": params.get("sessionId", "s-1")}
            else:
                continue
            await end.send({"jsonrpc": "2.0", "id": message["id"], "result": result})
        return 0


@pytest.mark.parametrize("http", [True, False])
@pytest.mark.parametrize("resume", [None, "s-0"])
async def test_the_chooser_sees_the_initialize_answer_and_its_choice_is_sent(
    harness: Harness, http: bool, resume: str | None
) -> None:
    agent = Advertiser(http)
    asked: list[InitializeAnswer] = []

    async def choose(answer: InitializeAnswer) -> Sequence[Mapping[str, Any]]:
        asked.append(answer)
        advertised = bool(answer.capabilities and answer.capabilities.mcp_http)
        return [HTTP if advertised else STDIO]

    profile = AgentProfile(name="adv", title="adv", command=("adv",), family="generic")
    session = await harness.baton.open_session(
        profile,
        run=await harness.run(),
        requests=harness.baton.broker("all", notify=False),
        workspace=harness.workspace,
        environ={},
        mcp_servers=choose,
        resume_session_id=resume,
        transport=in_memory(lambda: agent),
    )
    harness.sessions.append(session)
    assert len(asked) == 1
    assert agent.calls == [
        ("session/resume" if resume else "session/new", [HTTP if http else STDIO])
    ]


async def test_a_plain_list_is_sent_as_it_is(harness: Harness) -> None:
    agent = Advertiser(True)
    profile = AgentProfile(name="adv", title="adv", command=("adv",), family="generic")
    session = await harness.baton.open_session(
        profile,
        run=await harness.run(),
        requests=harness.baton.broker("all", notify=False),
        workspace=harness.workspace,
        environ={},
        mcp_servers=[STDIO],
        transport=in_memory(lambda: agent),
    )
    harness.sessions.append(session)
    assert agent.calls == [("session/new", [STDIO])]
