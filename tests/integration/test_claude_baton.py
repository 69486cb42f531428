"""The real Claude agent (``claude-agent-acp``, npm, pinned) driven through baton, offline.

It talks to a scripted Anthropic Messages server on loopback (``tests/support/anthropic_stub``);
everything between the stub and baton is real: the agent, the private root with baton's seeded
``settings.json``, the approval mode baton selects, ACP over stdio (recorded and checked against
the official schema), the policy, the ledger and the store.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator

import pytest

from tests.support.agents import claude_profile
from tests.support.anthropic_stub import AnthropicStub
from tests.support.harness import Harness
from tests.support.real_session import assert_cancels_cleanly, assert_wire_conforms, open_real

pytestmark = [pytest.mark.slow, pytest.mark.real_agent]


@pytest.fixture
async def stub(harness: Harness) -> AsyncIterator[AnthropicStub]:
    with AnthropicStub(cwd=harness.workspace) as s:
        yield s


async def test_an_allowed_write_is_asked_decided_and_lands(
    harness: Harness, stub: AnthropicStub
) -> None:
    session = await open_real(harness, claude_profile(stub.origin), preset="all")
    started = harness.of("session.started")[0]
    assert started.current_mode == "default"
    outcome = await session.prompt("write hello.txt", timeout=180)
    assert outcome.status == "completed" and outcome.stop_reason == "end_turn"
    assert (harness.workspace / stub.file_name).read_text() == stub.file_content
    created = harness.of("request.created")
    assert [c.kind for c in created] == ["permission"]
    answered = harness.of("request.answered")[0]
    assert answered.decided_by == "policy" and answered.answer["decision"] == "allow"
    assert len(harness.of("request.delivered")) == 1
    done = harness.of("tool.execution.completed")
    assert done and done[-1].kind == "edit" and done[-1].status == "completed"
    assert outcome.tool_calls == 1
    assert_wire_conforms(harness)


async def test_approve_none_leaves_no_file_and_records_the_denial(
    harness: Harness, stub: AnthropicStub
) -> None:
    session = await open_real(harness, claude_profile(stub.origin), preset="none")
    outcome = await session.prompt("write hello.txt", timeout=180)
    assert outcome.status == "completed"
    assert not (harness.workspace / stub.file_name).exists()
    answered = harness.of("request.answered")
    assert [a.answer["decision"] for a in answered] == ["deny"]
    assert answered[0].rule and answered[0].rule.startswith("preset-none:deny")
    assert_wire_conforms(harness)


async def test_a_human_answers_through_the_ledger(harness: Harness, stub: AnthropicStub) -> None:
    from baton.request_model.documents import PermissionAnswer

    session = await open_real(
        harness, claude_profile(stub.origin), preset="reads", wait_timeout=120
    )
    turn = asyncio.create_task(session.prompt("write hello.txt", timeout=180))
    async with asyncio.timeout(120):
        while not harness.of("request.created"):
            await asyncio.sleep(0.05)
    request_id = harness.of("request.created")[0].request_id
    await harness.ledger.answer(
        request_id, PermissionAnswer(decision="allow"), decided_by="human", rule="cli"
    )
    outcome = await turn
    assert outcome.status == "completed"
    assert (harness.workspace / stub.file_name).read_text() == stub.file_content
    answered = harness.of("request.answered")[0]
    assert answered.decided_by == "human"
    assert_wire_conforms(harness)


async def test_cancel_ends_the_turn_cancelled(harness: Harness) -> None:
    with AnthropicStub(cwd=harness.workspace, script="hang") as stub:
        await assert_cancels_cleanly(harness, stub, claude_profile(stub.origin))


# ------------------------------------------------------------- approval mode and audit


async def test_a_self_approving_mode_is_refused(harness: Harness, stub: AnthropicStub) -> None:
    from baton.errors import SecurityError

    with pytest.raises(SecurityError, match="acceptEdits"):
        await open_real(harness, claude_profile(stub.origin, mode="acceptEdits"))
    [refused] = harness.of("security.approval_refused")
    assert refused.mode == "acceptEdits"
    assert not harness.of("turn.submitted") and not stub.completions()


async def test_the_initial_mode_is_verified_too(harness: Harness, stub: AnthropicStub) -> None:
    """Without baton's seeded settings and mode, claude-agent-acp starts in `auto`: refused."""
    from baton.errors import SecurityError

    with pytest.raises(SecurityError, match="'auto'"):
        await open_real(harness, claude_profile(stub.origin, mode=None, files=()))
    assert harness.of("security.approval_refused")[0].mode == "auto"


async def test_agent_approves_runs_flagged_and_every_write_is_audited(
    harness: Harness, stub: AnthropicStub
) -> None:
    profile = claude_profile(stub.origin, mode=None, files=(), agent_approves=True)
    session = await open_real(harness, profile, preset="none")
    [bypass] = harness.of("security.approval_bypass")
    assert bypass.mode == "auto"
    outcome = await session.prompt("write hello.txt", timeout=180)
    assert (harness.workspace / stub.file_name).exists(), "auto mode writes without asking"
    assert not harness.of("request.created")
    [finding] = harness.of("security.unapproved_mutation")
    assert finding.expected and finding.kind == "edit" and finding.path == stub.file_name
    assert outcome.unapproved_mutations == 0, "expected under agent_approves: not a failure"
    assert_wire_conforms(harness)


def _allow_rule_settings() -> tuple[object, ...]:
    import json

    from baton.agent_profile import SeedFile

    settings = {"permissions": {"defaultMode": "default", "allow": ["Write"]}}
    return (SeedFile("$CLAUDE_CONFIG_DIR/settings.json", content=json.dumps(settings)),)


async def test_the_audit_catches_a_write_its_own_allow_rule_approved(
    harness: Harness, stub: AnthropicStub
) -> None:
    """Mode `default` (asks), but the agent's own allow rule lets it write unasked."""
    profile = claude_profile(stub.origin, files=_allow_rule_settings())
    session = await open_real(harness, profile, preset="none")
    assert harness.of("session.started")[0].approval == "asks"
    outcome = await session.prompt("write hello.txt", timeout=180)
    assert (harness.workspace / stub.file_name).exists()
    assert not harness.of("request.created"), "Claude never asked"
    [finding] = harness.of("security.unapproved_mutation")
    assert not finding.expected and finding.tool_call_id
    assert outcome.unapproved_mutations == 1
    assert_wire_conforms(harness)


async def test_a_strict_audit_cancels_the_turn(harness: Harness) -> None:
    import dataclasses

    from baton.requests.policy import Policy
    from tests.support.anthropic_stub import MessagesRequest
    from tests.support.model_server import Hang, Reply, ToolCall

    def script(req: MessagesRequest) -> Reply:
        # Write, then stall: only a cancel ends the turn (the stub sees the disconnect).
        if not req.has_tool_result:
            path = str(harness.workspace / "hello.txt")
            return ToolCall("Write", {"file_path": path, "content": "x\n"}, call_id="toolu_w")
        return Hang()

    with AnthropicStub(cwd=harness.workspace, script=script) as stub:
        profile = claude_profile(stub.origin, files=_allow_rule_settings())
        policy = dataclasses.replace(Policy.preset("none"), audit="strict")
        session = await open_real(harness, profile, policy=policy)
        outcome = await session.prompt("write hello.txt", timeout=180)
        stub.release()
    assert outcome.status == "cancelled" and outcome.unapproved_mutations == 1
    assert "strict audit" in harness.of("turn.cancelled")[0].reason
