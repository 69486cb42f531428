"""Across processes: the CLI answers while this process waits; a killed daemon loses nothing."""

from __future__ import annotations

import asyncio
import json
import os
import signal
import sys
import textwrap
from pathlib import Path

import pytest

from baton.request_model.documents import PermissionAnswer, PlanRequest, check_limits
from baton.requests.ledger import Ledger, RequestRecord
from baton.requests.states import State
from baton.store.sqlite import SqliteStore
from baton.store.wake import WakeChannel, wake_dir_for
from tests.requests.reqbuild import META, cursor_plan, permission

CLI = "from baton.cli.requests_cmds import app; app()"


class ObservedLedger(Ledger):
    """Signals each read, so a test knows the waiter is parked before answering."""

    def __init__(self, *args: object, **kwargs: object) -> None:
        super().__init__(*args, **kwargs)  # type: ignore[arg-type]
        self.reads = asyncio.Queue[str]()

    async def get(self, request_id: str) -> RequestRecord:
        record = await super().get(request_id)
        self.reads.put_nowait(record.state.value)
        return record


async def _cli(*args: str) -> tuple[int, str, str]:
    proc = await asyncio.create_subprocess_exec(
        sys.executable,
        "-c",
        CLI,
        *args,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
    )
    out, err = await asyncio.wait_for(proc.communicate(), 60)
    assert proc.returncode is not None
    return proc.returncode, out.decode(), err.decode()


async def test_cli_answer_in_another_process_wakes_the_waiter(db_path: Path) -> None:
    db = SqliteStore.open(db_path)
    # recheck once an hour: only the doorbell can wake the waiter within the test
    ledger = ObservedLedger(db, recheck_interval=3600)
    try:
        record = await ledger.create(permission(), jsonrpc_id=5, **META)
        waiter = asyncio.create_task(ledger.wait_answer(record.request_id, timeout=60))
        assert await asyncio.wait_for(ledger.reads.get(), 10) == "pending"  # parked

        code, out, err = await _cli("inbox", "--json", "--db", str(db_path))
        assert code == 0, err
        listed = [json.loads(line) for line in out.splitlines()]
        assert [r["request_id"] for r in listed] == [record.request_id]
        assert listed[0]["document"]["tool_call"]["command"] == "rm -rf build"

        code, out, err = await _cli(
            "answer", record.request_id[:12], "--allow", "--json", "--db", str(db_path)
        )
        assert code == 0, err
        assert json.loads(out)["state"] == "answered"

        got = await asyncio.wait_for(waiter, 10)
        assert got.state is State.ANSWERED
        assert got.answer == PermissionAnswer(decision="allow", option_id="allow-once")
        assert got.decided_by == "human"

        # a second, different answer from yet another process is refused, clearly
        code, out, err = await _cli("answer", record.request_id, "--deny", "--db", str(db_path))
        assert code == 1 and "already answered" in err and "AnswerConflict" not in err
    finally:
        await ledger.aclose()
        db.close()


DAEMON = textwrap.dedent(
    """
    import asyncio, sys
    from pathlib import Path
    sys.path.insert(0, {tests!r})
    from reqbuild import META, cursor_plan
    from baton.requests.ledger import Ledger

    async def main():
        ledger = Ledger.open(Path({db!r}))
        record = await ledger.create(cursor_plan({markdown!r}), jsonrpc_id=9, **META)
        await ledger.store.listener()
        print(record.request_id, flush=True)
        await ledger.wait_answer(record.request_id, None)

    asyncio.run(main())
    """
)


async def test_killed_daemon_request_comes_back_expired_with_nothing_lost(db_path: Path) -> None:
    markdown = "# Plan ✓\n\nשלום 👩‍👩‍👧 e\u0301\n"
    script = DAEMON.format(tests=str(Path(__file__).parent), db=str(db_path), markdown=markdown)
    proc = await asyncio.create_subprocess_exec(
        sys.executable, "-c", script, stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE
    )
    assert proc.stdout is not None
    line = await asyncio.wait_for(proc.stdout.readline(), 60)
    request_id = line.decode().strip()
    assert request_id.startswith("req-"), (await proc.stderr.read()).decode()  # type: ignore[union-attr]
    fifos = list(wake_dir_for(db_path).glob("*.fifo"))
    assert len(fifos) == 1
    proc.send_signal(signal.SIGKILL)
    await proc.wait()

    ledger = Ledger.open(db_path)  # the restarted baton
    try:
        before = await ledger.get(request_id)
        assert before.state is State.PENDING
        expired = await ledger.expire_orphans(
            set(), "baton restarted; the agent connection is gone"
        )
        assert [r.request_id for r in expired] == [request_id]
        after = await ledger.get(request_id)
        assert after.state is State.EXPIRED
        assert after.reason == "baton restarted; the agent connection is gone"
        plan = cursor_plan(markdown)
        assert after.document == plan and after.document_json == check_limits(plan)
        assert isinstance(after.document, PlanRequest) and after.revision == plan.revision
        # the dead daemon's doorbell was cleaned up by the first ring after it died
        assert not fifos[0].exists()
    finally:
        await ledger.aclose()


def test_ring_removes_dead_fifos_and_skips_non_fifos(tmp_path: Path) -> None:
    channel = WakeChannel(directory=tmp_path / "wake")
    channel.directory.mkdir()
    dead = channel.directory / "123-dead.fifo"
    os.mkfifo(dead)
    (channel.directory / "not-a-fifo.fifo").write_text("x")
    assert channel.ring(["req-1"]) == 0
    assert not dead.exists()


async def test_listener_routes_rings_by_request_id(tmp_path: Path) -> None:
    channel = WakeChannel(directory=tmp_path / "wake")
    listener = await channel.listen()
    try:
        mine = listener.subscribe("req-a")
        other = listener.subscribe("req-b")
        assert channel.ring(["req-a"]) == 1
        await asyncio.wait_for(mine.wait(), 10)
        assert not other.is_set()
        channel.ring(["*"])
        await asyncio.wait_for(other.wait(), 10)
    finally:
        listener.close()
    assert not listener.path.exists()


@pytest.mark.parametrize("count", [200])
async def test_ring_many_ids_in_chunks(tmp_path: Path, count: int) -> None:
    channel = WakeChannel(directory=tmp_path / "wake")
    listener = await channel.listen()
    try:
        events = [listener.subscribe(f"req-{i:04d}") for i in range(count)]
        channel.ring([f"req-{i:04d}" for i in range(count)])
        await asyncio.wait_for(asyncio.gather(*(e.wait() for e in events)), 10)
    finally:
        listener.close()
