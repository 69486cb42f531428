"""The real Codex agent (Zed ``codex-acp``, npm, pinned) driven through baton, offline.

It talks to a scripted OpenAI Responses server on loopback (``tests/support/responses_stub``),
configured by a ``config.toml`` seeded into its private ``CODEX_HOME``. Without bubblewrap Codex
cannot sandbox a command, so the scripted model asks to run its write escalated, which Codex
sends to the client as a permission request before the tool call.
"""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest

from tests.support.agents import codex_profile
from tests.support.harness import Harness
from tests.support.real_session import assert_cancels_cleanly, assert_wire_conforms, open_real
from tests.support.responses_stub import ResponsesStub

pytestmark = [pytest.mark.slow, pytest.mark.real_agent]


@pytest.fixture
async def stub(harness: Harness) -> AsyncIterator[ResponsesStub]:
    with ResponsesStub(cwd=harness.workspace) as s:
        yield s


async def test_an_allowed_command_is_asked_decided_and_writes(
    harness: Harness, stub: ResponsesStub
) -> None:
    session = await open_real(harness, codex_profile(stub.base_url), preset="all")
    assert harness.of("session.started")[0].current_mode == "read-only"
    outcome = await session.prompt("write hello.txt", timeout=180)
    assert outcome.status == "completed" and outcome.stop_reason == "end_turn"
    assert (harness.workspace / stub.file_name).read_text() == stub.file_content
    created = harness.of("request.created")
    assert [c.kind for c in created] == ["permission"]
    answered = harness.of("request.answered")[0]
    assert answered.decided_by == "policy" and answered.answer["decision"] == "allow"
    done = harness.of("tool.execution.completed")
    assert done and done[-1].kind == "execute" and done[-1].status == "completed"
    assert outcome.tool_calls == 1
    assert_wire_conforms(harness)


async def test_approve_none_leaves_no_file_and_records_the_denial(
    harness: Harness, stub: ResponsesStub
) -> None:
    session = await open_real(harness, codex_profile(stub.base_url), preset="none")
    outcome = await session.prompt("write hello.txt", timeout=180)
    assert outcome.status in ("completed", "cancelled")
    assert not (harness.workspace / stub.file_name).exists()
    answered = harness.of("request.answered")
    assert [a.answer["decision"] for a in answered] == ["deny"]
    assert_wire_conforms(harness)


async def test_cancel_ends_the_turn_cancelled(harness: Harness) -> None:
    with ResponsesStub(cwd=harness.workspace, script="hang") as stub:
        await assert_cancels_cleanly(harness, stub, codex_profile(stub.base_url))


# ------------------------------------------------------------- approval mode and audit


async def test_a_self_approving_preset_is_refused(harness: Harness, stub: ResponsesStub) -> None:
    from baton.errors import SecurityError

    with pytest.raises(SecurityError, match="'auto'"):
        await open_real(harness, codex_profile(stub.base_url, mode="auto"))
    assert harness.of("security.approval_refused")[0].mode == "auto"
    assert not stub.completions()


async def test_a_config_that_approves_itself_is_caught_at_start(
    harness: Harness, stub: ResponsesStub
) -> None:
    """Codex's own config.toml can make the session start in full access: that is verified."""
    from baton.errors import SecurityError
    from tests.support.agents import codex_config

    config = 'approval_policy = "never"\nsandbox_mode = "danger-full-access"\n'
    profile = codex_profile(stub.base_url, mode=None, config=config + codex_config(stub.base_url))
    with pytest.raises(SecurityError, match="full-access"):
        await open_real(harness, profile)


async def test_full_access_with_agent_approves_runs_flagged_and_audited(
    harness: Harness, stub: ResponsesStub
) -> None:
    from tests.support.model_server import Reply, Text, ToolCall
    from tests.support.responses_stub import ResponsesRequest, shell_quote

    def plain_command(req: ResponsesRequest) -> Reply:
        # No sandbox escalation: in full access Codex just runs it.
        if req.has_tool_result:
            return Text("done")
        command = f"printf %s {shell_quote(stub.file_content)} > {stub.file_name}"
        return ToolCall("exec_command", {"cmd": command, "workdir": str(harness.workspace)})

    stub.script = plain_command
    profile = codex_profile(stub.base_url, mode="full-access", agent_approves=True)
    session = await open_real(harness, profile, preset="none")
    assert harness.of("security.approval_bypass")[0].mode == "full-access"
    outcome = await session.prompt("write hello.txt", timeout=180)
    assert (harness.workspace / stub.file_name).exists(), "full access runs without asking"
    assert not harness.of("request.created")
    [finding] = harness.of("security.unapproved_mutation")
    assert finding.expected and finding.kind == "execute"
    assert outcome.unapproved_mutations == 0
    assert_wire_conforms(harness)
