"""The real Gemini CLI (npm, pinned) driven through baton, offline.

It talks to the scripted Gemini API server (``tests/support/gemini_stub``). In ``default`` mode
(baton's choice) Gemini CLI reads the file through the client's ``fs/read_text_file`` before it
asks ``session/request_permission``, reads it again, and writes it through
``fs/write_text_file``: contained, recorded as ``file.written``, matched by the audit.

A new file is not there when it is read. ACP's answer is resource-not-found (-32002), and
Gemini CLI 0.61.0 fails its ``write_file`` on it (on any error answer: its ACP library rejects
with the plain error object, which its fs service does not take for ENOENT), so its profile
answers that read with empty content (``missing_file_reads = "empty"``).
:func:`test_with_acps_answer_gemini_cannot_write_a_new_file` pins that reason: when Gemini CLI
learns to read -32002, it fails, and the profile can drop the exception.
"""

from __future__ import annotations

import hashlib
import json
import os
import subprocess
import sys
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from baton.providers.catalog import GEMINI
from tests.support.agents import AGENTS_DIR, gemini_profile, require_agent
from tests.support.gemini_stub import GeminiRequest, GeminiStub
from tests.support.harness import Harness
from tests.support.real_session import assert_cancels_cleanly, assert_wire_conforms, open_real

pytestmark = [pytest.mark.slow, pytest.mark.real_agent]

CONTENT = "hello from the scripted model\n"
BATON_RUN = (sys.executable, "-m", "baton", "run")


@pytest.fixture
async def stub(harness: Harness) -> AsyncIterator[GeminiStub]:
    with GeminiStub(cwd=harness.workspace, file_content=CONTENT) as s:
        yield s


def _client_errors(records: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [r["msg"]["error"] for r in records if r["dir"] == "client" and "error" in r["msg"]]


async def test_a_new_file_is_written_through_baton(harness: Harness, stub: GeminiStub) -> None:
    session = await open_real(harness, gemini_profile(stub.origin), preset="all")
    started = harness.of("session.started")[0]
    assert started.current_mode == "default" and started.approval == "asks"
    outcome = await session.prompt("write hello.txt", timeout=180)
    assert outcome.status == "completed" and outcome.stop_reason == "end_turn"
    assert (harness.workspace / "hello.txt").read_text() == CONTENT
    [written] = harness.of("file.written")
    assert written.path == "hello.txt" and written.bytes == len(CONTENT)
    assert written.sha256 == hashlib.sha256(CONTENT.encode()).hexdigest()
    assert outcome.files_written == ("hello.txt",)
    assert [c.kind for c in harness.of("request.created")] == ["permission"]
    assert not [e for e in harness.events if e.type.startswith("security.")]
    assert outcome.tool_calls == 1 and outcome.unapproved_mutations == 0
    [done] = harness.of("tool.execution.completed")
    assert done.status == "completed" and done.kind == "edit"
    [compat] = [n for n in harness.of("provider.notice") if n.category == "compatibility"]
    assert "empty content" in compat.summary and compat.severity == "info"
    records = assert_wire_conforms(harness)
    assert not _client_errors(records)
    reads = [r for r in records if r["msg"].get("method") == "fs/read_text_file"]
    assert reads, "Gemini CLI read the file through baton first"


async def test_with_acps_answer_gemini_cannot_write_a_new_file(
    harness: Harness, stub: GeminiStub
) -> None:
    profile = gemini_profile(stub.origin, missing_file_reads="not-found")
    session = await open_real(harness, profile, preset="all")
    await session.prompt("write hello.txt", timeout=180)
    records = assert_wire_conforms(harness)
    errors = _client_errors(records)
    assert errors and all(e["code"] == -32002 for e in errors), errors
    assert not [e for e in harness.events if e.type.startswith("security.")]
    assert not (harness.workspace / "hello.txt").exists() and not harness.of("file.written")
    [result] = GeminiRequest(stub.completions()[-1].body, 0).tool_results()
    assert "Error checking existing file" in json.dumps(result), result


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


def test_baton_run_exits_0_with_the_write_recorded(tmp_path: Path) -> None:
    """The user's view: ``baton run`` with a Gemini profile of the project, in a fresh
    project, exits 0 and reports the client write as a ``file.written`` event."""
    project = tmp_path / "project"
    project.mkdir()
    env = {
        "PATH": os.environ["PATH"],
        "HOME": str(tmp_path / "home"),
        "XDG_STATE_HOME": str(tmp_path / "xdg"),
        "BATON_TOOLS_DIR": str(AGENTS_DIR),
        "GEMINI_API_KEY": "gemini-offline-test-key",
    }
    require_agent(GEMINI)
    with GeminiStub(cwd=project, file_content=CONTENT) as stub:
        (project / "baton.toml").write_text(
            "[profiles.gemini-local]\n"
            'extends = "gemini"\n'
            f'env = {{ GOOGLE_GEMINI_BASE_URL = "{stub.origin}" }}\n'
            'credentials = ["GEMINI_API_KEY"]\n'
        )
        done = subprocess.run(
            [*BATON_RUN, "--agent", "gemini-local", "--approve", "all", "--json", "write it"],
            cwd=project,
            env=env,
            capture_output=True,
            text=True,
            timeout=600,
        )
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    assert (project / "hello.txt").read_text() == CONTENT
    events = [json.loads(line) for line in done.stdout.splitlines() if line.startswith("{")]
    written = [e["payload"] for e in events if e.get("type") == "file.written"]
    assert [w["path"] for w in written] == ["hello.txt"], done.stdout[-3000:]
    assert not [e for e in events if str(e.get("type")).startswith("security.")]
