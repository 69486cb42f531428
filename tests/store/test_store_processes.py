"""Several processes on one store: a reader beside a writer, two writers, a crash."""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import textwrap
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest

from baton.events.model import CanonicalEvent
from baton.store import Store
from baton.store.sqlite import SqliteStore

from .conftest import event, run_record

PRELUDE = textwrap.dedent(
    """
    import json, sys
    from pathlib import Path
    from baton.events.model import CanonicalEvent, TranscriptAssistant
    from baton.store import RunRecord, SqliteStore

    def ev(seq, run_id):
        return CanonicalEvent(
            type="transcript.assistant", seq=seq, run_id=run_id, session_id="s", turn_id="t",
            ts="2026-01-01T00:00:00.000Z",
            payload=TranscriptAssistant(message_id="m", text=f"chunk {seq} ünïcödé 🙂"),
        )

    def say(*parts):
        print(*parts, flush=True)
    """
)


@contextmanager
def child(code: str, *args: str) -> Iterator[subprocess.Popen[str]]:
    proc = subprocess.Popen(
        [sys.executable, "-c", PRELUDE + textwrap.dedent(code), *args],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        yield proc
    finally:
        if proc.poll() is None:
            proc.kill()
        proc.wait()
        for stream in (proc.stdin, proc.stdout):
            if stream is not None:
                stream.close()


def readline(proc: subprocess.Popen[str]) -> str:
    assert proc.stdout is not None
    line = proc.stdout.readline()
    assert line, f"child exited early with {proc.wait()}"
    return line.strip()


def assert_contiguous(store: Store, run_id: str) -> list[CanonicalEvent]:
    events = list(store.iter_events(run_id))
    assert [e.seq for e in events] == list(range(1, len(events) + 1))
    return events


READER = """
    store = SqliteStore.open(Path(sys.argv[1]))
    say("ready")
    for line in sys.stdin:
        if line.strip() == "done":
            break
        acked = int(line)
        lines = list(store.iter_event_json("run-1"))
        seqs = [json.loads(l)["seq"] for l in lines]
        assert seqs == list(range(1, len(seqs) + 1)), "gap or disorder"
        assert len(seqs) >= acked, (len(seqs), acked)
        say("ok", len(seqs))
    store.close()
"""


@pytest.mark.sqlite_only("a child process opens the SQLite file")
def test_another_process_reads_while_we_write(store: Store, db_path: Path) -> None:
    with child(READER, str(db_path)) as proc:
        assert proc.stdin is not None
        assert readline(proc) == "ready"
        acked: list[int] = []
        seq = 0
        for _ in range(20):
            for _ in range(500):
                seq += 1
                store.append(event(seq))
            store.flush_sync()
            acked.append(seq)
            proc.stdin.write(f"{seq}\n")  # the child reads while we write the next chunk
            proc.stdin.flush()
        proc.stdin.write("done\n")
        proc.stdin.flush()
        seen = [int(readline(proc).split()[1]) for _ in acked]
        assert proc.wait() == 0
    assert all(s >= a for s, a in zip(seen, acked, strict=True))
    assert len(assert_contiguous(store, "run-1")) == 10_000


WRITER = """
    store = SqliteStore.open(Path(sys.argv[1]))
    store.create_run(RunRecord("child-run", "run", "fake", "/w", "running", "2026"))
    say("ready")
    assert sys.stdin.readline().strip() == "go"
    for seq in range(1, 5001):
        store.append(ev(seq, "child-run"))
        if seq % 250 == 0:
            store.flush_sync()
    store.execute_write(
        lambda c: c.execute("UPDATE runs SET status = 'completed' WHERE run_id = 'run-1'")
    ).result()
    store.close()
    say("done")
"""


@pytest.mark.sqlite_only("child processes open the SQLite file")
def test_two_processes_write_the_same_store(store: Store, db_path: Path) -> None:
    with child(WRITER, str(db_path)) as proc:
        assert proc.stdin is not None
        assert readline(proc) == "ready"
        proc.stdin.write("go\n")
        proc.stdin.flush()
        for seq in range(1, 5001):
            store.append(event(seq))
            if seq % 250 == 0:
                store.flush_sync()
        assert readline(proc) == "done"
        assert proc.wait() == 0
    assert len(assert_contiguous(store, "run-1")) == 5000
    assert len(assert_contiguous(store, "child-run")) == 5000
    run = store.get_run("run-1")
    assert run is not None and run.status == "completed"


CRASHER = """
    store = SqliteStore.open(Path(sys.argv[1]))
    store.create_run(RunRecord("crash", "run", "fake", "/w", "running", "2026"))
    seq = 0
    while True:
        for _ in range(300):
            seq += 1
            store.append(ev(seq, "crash"))
        store.flush_sync()
        say("acked", seq)
"""


def test_acknowledged_events_survive_sigkill(db_path: Path) -> None:
    db_path.parent.mkdir(parents=True)
    with child(CRASHER, str(db_path)) as proc:
        acked = 0
        while acked < 6000:
            word, number = readline(proc).split()
            assert word == "acked"
            acked = int(number)
        # The child is already appending (and flushing) the next chunks.
        proc.send_signal(signal.SIGKILL)
        assert proc.wait() == -signal.SIGKILL

    with SqliteStore.open(db_path) as store:
        assert store.read(lambda c: c.execute("PRAGMA integrity_check").fetchall()) == [("ok",)]
        assert store.read(lambda c: c.execute("PRAGMA foreign_key_check").fetchall()) == []
        events = assert_contiguous(store, "crash")
        assert len(events) >= acked  # everything acknowledged is there
        lines = list(store.iter_event_json("crash"))
        assert [json.loads(line)["seq"] for line in lines] == [e.seq for e in events]
        # And the run continues where the durable log ends.
        store.append(event(len(events) + 1, "crash"))
        store.flush_sync()
        assert store.last_seq("crash") == len(events) + 1


def test_throughput_sanity(tmp_path: Path) -> None:
    """Prints a rough ingest rate (run with -s to see it); asserts only correctness."""
    import time

    count = 20_000
    with SqliteStore.open(tmp_path / "bench.db") as store:
        store.create_run(run_record())
        start = time.perf_counter()
        for seq in range(1, count + 1):
            store.append(event(seq))
        store.flush_sync()
        elapsed = time.perf_counter() - start
        assert store.last_seq("run-1") == count
    print(f"\nstore ingest: {count / elapsed:,.0f} events/s (build + append + flush)")


FORGETFUL = """
    store = SqliteStore.open(Path(sys.argv[1]))
    store.create_run(RunRecord("forgot", "run", "fake", "/w", "running", "2026"))
    for seq in range(1, 1001):
        store.append(ev(seq, "forgot"))
    # No flush, no close: a clean interpreter exit still drains the queue.
"""


def test_a_clean_exit_drains_an_unclosed_store(db_path: Path) -> None:
    db_path.parent.mkdir(parents=True)
    with child(FORGETFUL, str(db_path)) as proc:
        assert proc.wait() == 0
    with SqliteStore.open(db_path) as store:
        assert len(assert_contiguous(store, "forgot")) == 1000
