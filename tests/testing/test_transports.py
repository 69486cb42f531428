"""The shipped transports: in-memory pipes, in-memory agents, recorded traces replayed."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

import pytest

from baton.acp.transport import Launch
from baton.errors import AgentError
from baton.providers.approval import OPENCODE_ASK
from baton.testing import (
    AgentEnd,
    InMemoryTransport,
    MemoryPipe,
    ScenarioAgent,
    in_memory,
    load_trace,
    replay,
)
from baton.testing.memory import KILLED, PIPE_CAPACITY
from tests.support.harness import Harness

TRACES = Path(__file__).resolve().parents[1] / "traces" / "opencode"


async def test_a_pipe_holds_back_a_writer_until_the_reader_takes_the_bytes() -> None:
    pipe = MemoryPipe()
    pipe.write(b"x" * (2 * PIPE_CAPACITY))
    drained = asyncio.create_task(pipe.drain())
    await asyncio.sleep(0)
    assert not drained.done(), "more than a pipe's worth is unread"
    assert len(await pipe.read(PIPE_CAPACITY + 1)) == PIPE_CAPACITY + 1
    await asyncio.wait_for(drained, 1)
    pipe.close()
    assert len(await pipe.read()) == PIPE_CAPACITY - 1
    assert await pipe.read() == b"", "EOF once the writer closed and the rest was read"


async def test_a_pipe_whose_reader_left_breaks_the_writer() -> None:
    pipe = MemoryPipe()
    pipe.write(b"x" * (2 * PIPE_CAPACITY))
    drained = asyncio.create_task(pipe.drain())
    await asyncio.sleep(0)
    pipe.break_()
    with pytest.raises(BrokenPipeError):
        await drained
    assert pipe.is_closing()
    with pytest.raises(BrokenPipeError):
        pipe.write(b"more")


class Echo:
    """The smallest agent object: one answer per line, then done."""

    def __init__(self) -> None:
        self.lines: list[bytes] = []

    async def serve(self, end: AgentEnd) -> int | None:
        while (line := await end.receive_line()) is not None:
            self.lines.append(line)
            await end.write(b"ack " + line + b"\n")
        return 7


async def test_an_agent_object_talks_and_its_exit_status_is_kept() -> None:
    agent = Echo()
    transport = await in_memory(agent)(Launch(["echo"]))
    transport.writer.write(b"one\ntwo")
    await transport.writer.drain()
    assert await transport.reader.read(100) == b"ack one\n", "a partial line waits"
    transport.writer.write(b"\n")
    assert await transport.close() == 7, "EOF ends the agent, its status is the exit code"
    assert agent.lines == [b"one", b"two"]
    assert await transport.reader.read(100) == b"ack two\n"
    assert await transport.reader.read(100) == b""


class Stubborn:
    async def serve(self, end: AgentEnd) -> int | None:
        await asyncio.Event().wait()
        return 0


async def test_an_agent_that_ignores_eof_is_killed_after_the_grace() -> None:
    transport = InMemoryTransport(Stubborn(), Launch(["x"]), close_grace=0.01)
    assert await transport.close() == KILLED
    assert transport.returncode == KILLED


class Broken:
    async def serve(self, end: AgentEnd) -> int | None:
        await end.receive_line()
        raise RuntimeError("a bug in the test agent")


async def test_a_bug_in_an_agent_object_is_a_crash_baton_can_see(harness: Harness) -> None:
    with pytest.raises(AgentError):
        await harness.open(["broken"], transport=in_memory(Broken))
    failed = harness.of("session.failed")
    assert failed and "RuntimeError: a bug in the test agent" in failed[0].stderr_preview


def test_scenarios_that_need_a_process_say_so() -> None:
    with pytest.raises(ValueError, match="subprocess transport"):
        ScenarioAgent("spawn-grandchild")
    with pytest.raises(ValueError, match="replay"):
        ScenarioAgent("replay")


async def test_a_recorded_opencode_trace_drives_the_whole_runner(harness: Harness) -> None:
    """permission-ask: OpenCode asked, baton allowed, OpenCode wrote through fs/."""
    session = await harness.open(
        ["opencode", "acp"],
        transport=replay(TRACES / "permission-ask.ndjson"),
        family="opencode",
        preset="all",
        # The built-in profile's asking permission config (else baton refuses the session).
        env={"OPENCODE_PERMISSION": json.dumps(dict(OPENCODE_ASK), sort_keys=True)},
    )
    outcome = await session.prompt("Write hello.txt, please.")
    assert outcome.status == "completed" and outcome.stop_reason == "end_turn"
    assert (harness.workspace / "hello.txt").read_text() == "hello from the scripted model\n"
    assert outcome.files_written == ("hello.txt",)
    assert [p.kind for p in harness.of("request.created")] == ["permission"]
    assert harness.of("request.answered")[0].answer["decision"] == "allow"
    assert len(harness.of("request.delivered")) == 1
    assert harness.of("session.started")[0].agent_session_id == "ses_0001"


async def test_a_replay_answers_what_the_trace_never_saw_with_an_error(harness: Harness) -> None:
    records: list[dict[str, Any]] = load_trace(TRACES / "write-file.ndjson")[:2]  # initialize only
    with pytest.raises(AgentError, match="session/new"):
        await harness.open(["opencode"], transport=replay(records), family="opencode")


def test_a_bad_trace_is_refused_before_any_launch(tmp_path: Path) -> None:
    bad = tmp_path / "bad.ndjson"
    bad.write_text('{"dir": "sideways", "msg": {}}\n')
    with pytest.raises(ValueError, match="bad trace record"):
        replay(bad)
