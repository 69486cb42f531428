"""The real Gemini CLI (npm, pinned) driven through baton, offline.

It talks to the scripted Gemini API server (``tests/support/gemini_stub``). In ``default`` mode
(baton's choice) Gemini CLI asks ``session/request_permission`` before a write, reads the file
first through the client's ``fs/read_text_file`` (a new file is not there: ACP's
resource-not-found, -32002, which it takes for ENOENT) and then writes it through
``fs/write_text_file``: contained, recorded as ``file.written``, matched by the audit.
"""

from __future__ import annotations

import hashlib
from collections.abc import AsyncIterator

import pytest

from tests.support.agents import gemini_profile
from tests.support.gemini_stub import GeminiStub
from tests.support.harness import Harness
from tests.support.real_session import assert_cancels_cleanly, assert_wire_conforms, open_real

pytestmark = [pytest.mark.slow, pytest.mark.real_agent]

CONTENT = "hello from the scripted model\n"


@pytest.fixture
async def stub(harness: Harness) -> AsyncIterator[GeminiStub]:
    with GeminiStub(cwd=harness.workspace, file_content=CONTENT) as s:
        yield s


async def test_a_new_file_is_written_through_baton(harness: Harness, stub: GeminiStub) -> None:
    session = await open_real(harness, gemini_profile(stub.origin), preset="all")
    started = harness.of("session.started")[0]
    assert started.current_mode == "default" and started.approval == "asks"
    outcome = await session.prompt("write hello.txt", timeout=180)
    assert outcome.status == "completed", outcome
    assert (harness.workspace / "hello.txt").read_text() == CONTENT
    [written] = harness.of("file.written")
    assert written.path == "hello.txt" and written.bytes == len(CONTENT)
    assert written.sha256 == hashlib.sha256(CONTENT.encode()).hexdigest()
    assert not [e for e in harness.events if e.type.startswith("security.")], (
        "a read of a file not yet written is no security matter"
    )
    assert outcome.tool_calls == 1 and outcome.unapproved_mutations == 0
    [result] = stub.completions()[-1].body and _tool_results(stub)
    assert "error" not in str(result).lower(), result
    records = assert_wire_conforms(harness)
    missing = [r["msg"]["error"] for r in records if r["dir"] == "client" and "error" in r["msg"]]
    assert missing and all(e["code"] == -32002 for e in missing), missing


def _tool_results(stub: GeminiStub) -> list[object]:
    from tests.support.gemini_stub import GeminiRequest

    last = stub.completions()[-1]
    return GeminiRequest(last.body, 0).tool_results()


async def test_approve_none_leaves_no_file_and_records_the_denial(
    harness: Harness, stub: GeminiStub
) -> None:
    session = await open_real(harness, gemini_profile(stub.origin), preset="none")
    await session.prompt("write hello.txt", timeout=180)
    assert not (harness.workspace / "hello.txt").exists()
    assert [a.answer["decision"] for a in harness.of("request.answered")] == ["deny"]
    assert not harness.of("file.written")
    assert_wire_conforms(harness)


async def test_cancel_ends_the_turn_cancelled(harness: Harness) -> None:
    with GeminiStub(cwd=harness.workspace, script="hang") as stub:
        await assert_cancels_cleanly(harness, stub, gemini_profile(stub.origin))
