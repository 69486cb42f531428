"""The real Qwen Code agent (npm, pinned) driven through baton, offline.

It talks to the scripted chat-completions server (``tests/support/llm_stub``). Qwen Code starts
in ``auto`` (an LLM classifier approves for it); baton selects ``default``, in which it asks
``session/request_permission`` and then writes through the client's ``fs/write_text_file``, so
these tests also cover baton's client-side writes: contained, recorded as ``file.written``, and
matched by the audit to the decision that allowed them.
"""

from __future__ import annotations

import hashlib
from collections.abc import AsyncIterator

import pytest

from tests.support.agents import qwen_profile
from tests.support.harness import Harness
from tests.support.llm_stub import ChatRequest, LLMStub, Reply, Text, ToolCall
from tests.support.real_session import assert_cancels_cleanly, assert_wire_conforms, open_real

pytestmark = [pytest.mark.slow, pytest.mark.real_agent]

CONTENT = "hello from the scripted model\n"
QWEN_VENDOR = ("qwen/", "craft/")
"""Qwen Code's own methods, without the ``_`` prefix ACP asks of extensions."""


def write_file(req: ChatRequest, path: str) -> Reply:
    if req.has_tool_result or "write_file" not in req.tool_names:
        return Text("Done: the file is written.")
    return ToolCall("write_file", {"file_path": path, "content": CONTENT})


@pytest.fixture
async def stub(harness: Harness) -> AsyncIterator[LLMStub]:
    target = str(harness.workspace / "hello.txt")
    with LLMStub(cwd=harness.workspace, script=lambda req: write_file(req, target)) as s:
        yield s


async def test_an_allowed_write_goes_through_baton(harness: Harness, stub: LLMStub) -> None:
    session = await open_real(harness, qwen_profile(stub.base_url), preset="all")
    started = harness.of("session.started")[0]
    assert started.current_mode == "default" and started.approval == "asks"
    outcome = await session.prompt("write hello.txt", timeout=180)
    assert outcome.status == "completed"
    assert (harness.workspace / "hello.txt").read_text() == CONTENT
    assert [c.kind for c in harness.of("request.created")] == ["permission"]
    [written] = harness.of("file.written")
    assert written.path == "hello.txt" and written.bytes == len(CONTENT)
    assert written.sha256 == hashlib.sha256(CONTENT.encode()).hexdigest()
    assert outcome.files_written == ("hello.txt",)
    assert not harness.of("security.unapproved_mutation"), "the write matched its decision"
    assert outcome.tool_calls == 1 and outcome.unapproved_mutations == 0
    assert_wire_conforms(harness, vendor=QWEN_VENDOR)


async def test_approve_none_leaves_no_file_and_records_the_denial(
    harness: Harness, stub: LLMStub
) -> None:
    session = await open_real(harness, qwen_profile(stub.base_url), preset="none")
    await session.prompt("write hello.txt", timeout=180)
    assert not (harness.workspace / "hello.txt").exists()
    assert [a.answer["decision"] for a in harness.of("request.answered")] == ["deny"]
    assert not harness.of("file.written")
    assert_wire_conforms(harness, vendor=QWEN_VENDOR)


async def test_its_initial_auto_mode_is_refused_without_baton_selecting(
    harness: Harness, stub: LLMStub
) -> None:
    from baton.errors import SecurityError

    with pytest.raises(SecurityError, match="'auto'"):
        await open_real(harness, qwen_profile(stub.base_url, mode=None))
    assert harness.of("security.approval_refused")[0].mode == "auto"


async def test_yolo_with_agent_approves_runs_flagged_and_audited(
    harness: Harness, stub: LLMStub
) -> None:
    profile = qwen_profile(stub.base_url, mode="yolo", agent_approves=True)
    session = await open_real(harness, profile, preset="none")
    assert harness.of("security.approval_bypass")[0].mode == "yolo"
    outcome = await session.prompt("write hello.txt", timeout=180)
    assert (harness.workspace / "hello.txt").exists() and not harness.of("request.created")
    findings = harness.of("security.unapproved_mutation")
    assert findings and all(f.expected for f in findings)
    assert outcome.unapproved_mutations == 0


async def test_cancel_ends_the_turn_cancelled(harness: Harness) -> None:
    with LLMStub(cwd=harness.workspace, script="hang") as stub:
        await assert_cancels_cleanly(harness, stub, qwen_profile(stub.base_url), vendor=QWEN_VENDOR)
