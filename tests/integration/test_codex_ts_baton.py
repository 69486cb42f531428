"""The official TypeScript Codex adapter (npm ``@agentclientprotocol/codex-acp``, pinned by the
tier's own profile) driven through baton, offline, against the scripted Responses server.

It runs commands in a terminal of its own (``codex app-server``'s), never baton's
``terminal/create``: the tool call's content names that terminal by the call's id, and the
command's output arrives in the updates' ``_meta`` (``terminal_output_delta``). baton keeps
that output in the tool event, marks the terminal agent-side, and notices nothing unknown.
"""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest

from tests.support.agents import codex_ts_profile
from tests.support.harness import Harness
from tests.support.model_server import Reply, Text, ToolCall
from tests.support.real_session import assert_wire_conforms, open_real
from tests.support.responses_stub import ResponsesRequest, ResponsesStub

pytestmark = [pytest.mark.slow, pytest.mark.real_agent]

COMMAND = "printf 'hello from the agent terminal\\n'; echo second line"


@pytest.fixture
async def stub(harness: Harness) -> AsyncIterator[ResponsesStub]:
    def run_a_command(req: ResponsesRequest) -> Reply:
        if req.has_tool_result:
            return Text("done")
        # Without bubblewrap Codex cannot sandbox it: escalated, it asks baton first.
        arguments = {
            "cmd": COMMAND,
            "workdir": str(harness.workspace),
            "sandbox_permissions": "require_escalated",
            "justification": "Print two lines.",
        }
        return ToolCall("exec_command", arguments, call_id="call_print")

    with ResponsesStub(cwd=harness.workspace, script=run_a_command) as s:
        yield s


async def test_a_commands_output_appears_in_its_tool_event(
    harness: Harness, stub: ResponsesStub
) -> None:
    session = await open_real(harness, codex_ts_profile(stub.base_url), preset="all")
    started = harness.of("session.started")[0]
    assert started.agent_info and started.agent_info["name"] == "@agentclientprotocol/codex-acp"
    outcome = await session.prompt("print two lines", timeout=180)
    assert outcome.status == "completed" and outcome.stop_reason == "end_turn"
    assert [c.kind for c in harness.of("request.created")] == ["permission"]
    [done] = harness.of("tool.execution.completed")
    assert done.tool_call_id == "call_print" and done.kind == "execute"
    assert done.status == "completed"
    assert done.terminal_ids == ["call_print"] and done.agent_terminal_ids == ["call_print"]
    assert done.output is not None
    assert done.output.tail == "hello from the agent terminal\nsecond line\n"
    assert not done.output.truncated
    meta_notices = [n for n in harness.of("provider.notice") if "_meta key 'terminal" in n.summary]
    assert not meta_notices, "the terminal keys are read, not unknown"
    assert_wire_conforms(harness)
