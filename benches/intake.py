"""Hostile task files: time to refusal and memory, through the real read path.

Issue 9's target: every hostile file (alias bomb, deep nesting, huge file, two-chunk
write, invalid UTF-8, control characters in subjects, and the rest of
``tests/support/hostile.py``) is refused within 2 s and 200 MB, with baton still
serving. Two tables:

1. **The doorbell.** A real :class:`~baton.inbox.doorbell.Doorbell` (its
   :class:`~baton.intake.worker.ParseWorker` subprocess, the default
   limits: a 1 s settle window for files not proven by Core) on a real FCoP 4.0
   workspace. Each class gets a fresh doorbell and worker; the file is written into
   the inbox and timed from the end of the write to the ``TaskRefused`` event.
   "worker peak" is the worker's ``VmHWM``; "baton +RSS" is the growth of this
   process's peak RSS. The baseline row is a valid hand-written TASK (same settle
   window, read and routed); the ratio column compares each refusal with it. A good
   task created right after each refusal must arrive ("serving").
2. **The commands.** ``baton status``, ``baton task new`` and ``baton up
   --until-idle`` as subprocesses on a project with hostile files in every place
   Core reads, against the same commands on the clean project; peak RSS is the whole
   process tree's (``ru_maxrss`` of the waited descendants).
"""

from __future__ import annotations

import asyncio
import os
import resource
import secrets
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

from baton.fcop_port.authority import TrustedAuthority
from baton.fcop_port.port import FcopPort
from baton.fcop_port.workspace import init_workspace
from baton.inbox.doorbell import Doorbell, DoorbellEvent, TaskArrived, TaskRefused
from baton.intake.limits import DEFAULT_LIMITS
from baton.intake.worker import ParseWorker
from benches.common import print_table
from tests.support.hostile import CORPUS, Hostile, alias_bomb, run_measured, with_header
from tests.support.project import git_repo, stock_fcop_validate

WAIT = 60.0


def _peak_mib() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def _vm_hwm_mib(pid: int | None) -> float:
    if pid is None:
        return float("nan")
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) / 1024
    except OSError:
        pass
    return float("nan")


def _hand_written(template: str, task_id: str) -> str:
    head, _, body = template.partition("\n---\n")
    lines = [
        f"task_id: {task_id}" if line.startswith("task_id:") else line
        for line in head.split("\n")
        if not line.startswith(("operation_id:", "operation_kind:", "normalized_request_digest:"))
    ]
    return "\n".join(lines) + "\n---\n" + body


async def _one(
    port: FcopPort, name: str, write: object, expect_refusal: bool
) -> tuple[float, float, float, bool, str]:
    """(seconds to the verdict, worker peak MiB, baton RSS growth MiB, still serving, reason)."""
    queue: asyncio.Queue[DoorbellEvent] = asyncio.Queue()
    worker = ParseWorker()
    bell = Doorbell(
        port,
        lambda r: r if r in ("DEV", "QA") else None,
        queue,
        quarantine_dir=port.root / ".baton" / "quarantine",
        worker=worker,
    )
    stop = asyncio.Event()
    task = asyncio.create_task(bell.run(stop))
    try:
        await asyncio.wait_for(bell.ready.wait(), WAIT)
        while not queue.empty():
            queue.get_nowait()
        before = _peak_mib()
        path = port.stage_dir("inbox") / f"{name}.md"
        await asyncio.to_thread(write, path)  # type: ignore[arg-type]
        written = time.monotonic()
        event = await asyncio.wait_for(queue.get(), WAIT)
        seconds = time.monotonic() - written
        worker_peak = _vm_hwm_mib(worker.pid)
        grown = _peak_mib() - before
        good = await asyncio.to_thread(
            port.create_task, sender="ADMIN", recipient="QA", subject=f"after {name}", body="b"
        )
        arrived = await asyncio.wait_for(queue.get(), WAIT)
        serving = isinstance(arrived, TaskArrived) and arrived.task_id == good.task_id
        await asyncio.to_thread(port.claim, good.task_id, actor="QA")  # out of the inbox
        if isinstance(event, TaskArrived):
            await asyncio.to_thread(port.claim, event.task_id, actor="QA")
        reason = event.reason if isinstance(event, TaskRefused) else "read and routed"
        ok = isinstance(event, TaskRefused) == expect_refusal
        return seconds, worker_peak, grown, serving and ok, reason
    finally:
        stop.set()
        await asyncio.wait_for(task, WAIT)
        worker.close()


async def _doorbell_rows(port: FcopPort, template: str) -> list[list[str]]:
    rows: list[list[str]] = []

    def baseline(path: Path) -> None:
        path.write_text(_hand_written(template, path.stem))

    base, base_peak, base_grown, base_ok, _ = await _one(port, "TASK-valid", baseline, False)
    rows.append(
        [
            "valid hand-written TASK (baseline)",
            "read and routed",
            f"{base:.2f}",
            "1.00",
            f"{base_peak:.0f}",
            f"{base_grown:.1f}",
            "yes" if base_ok else "NO",
        ]
    )
    classes: list[tuple[str, str, Callable[[Path], None]]] = []
    for n, hostile in enumerate(CORPUS):
        task_id = f"TASK-hostile-{n}"

        def write(path: Path, h: Hostile = hostile, t: str = task_id) -> None:
            h.write(path.with_name(f"{t}.md"), t, template)

        classes.append((hostile.name, task_id, write))

    def two_chunks(path: Path) -> None:
        text = _hand_written(template, path.stem)
        cut = text.index("recipient:")
        with path.open("w") as handle:
            handle.write(text[:cut])
            handle.flush()
            time.sleep(0.3)
            handle.write(text[cut:])

    for name, task_id, writer in classes:
        seconds, peak, grown, ok, reason = await _one(port, task_id, writer, True)
        rows.append(
            [
                name,
                reason,
                f"{seconds:.2f}",
                f"{seconds / base:.2f}",
                f"{peak:.0f}",
                f"{grown:.1f}",
                "yes" if ok else "NO",
            ]
        )
    seconds, peak, grown, ok, reason = await _one(port, "TASK-twochunk", two_chunks, False)
    rows.append(
        [
            "two-chunk write (0.3 s pause)",
            f"{reason}, whole",
            f"{seconds:.2f}",
            f"{seconds / base:.2f}",
            f"{peak:.0f}",
            f"{grown:.1f}",
            "yes" if ok else "NO",
        ]
    )
    return rows


def _baton(repo: Path, *args: str) -> tuple[int, str, float, float]:
    env = {
        "PATH": os.environ["PATH"],
        "HOME": str(repo.parent / "home"),
        "XDG_STATE_HOME": str(repo.parent / "xdg"),
        "COLUMNS": "200",
    }
    done = run_measured([sys.executable, "-m", "baton", *args], cwd=repo, env=env, timeout=600)
    return done.code, done.err, done.seconds, done.peak_mib


def _plant(repo: Path) -> None:
    code, _, _, _ = _baton(repo, "task", "new", "--to", "DEV", "--subject", "template")
    assert code == 0
    fcop = repo / "fcop"
    [inbox_task] = (fcop / "_lifecycle" / "inbox").glob("TASK-*.md")
    template = inbox_task.read_text()
    placed = {
        "inbox/TASK-bomb.md": alias_bomb(),
        "active/TASK-deep.md": "d: " + "[" * 5000 + "]" * 5000,
        "review/TASK-rec.md": "loop: &l [*l]",
    }
    for rel, extra in placed.items():
        path = fcop / "_lifecycle" / rel
        path.write_text(with_header(template, path.stem, extra))
    subject = '"\\e]0;owned\\a\\e[2J"'
    (fcop / "_lifecycle" / "active" / "TASK-ansi.md").write_text(
        with_header(template, "TASK-ansi", subject=subject)
    )
    with (fcop / "_lifecycle" / "done" / "TASK-huge.md").open("wb") as handle:
        handle.truncate(2 * 1024**3)
    (fcop / "operations" / "create-deep.json").write_text("[" * 100_000 + "]" * 100_000)
    (fcop / "reports" / "REPORT-bomb.md").write_text(
        "---\ntype: REPORT\nreport_id: REPORT-bomb\n" + alias_bomb() + "\n---\n"
    )


def _command_rows(tmp: Path) -> list[list[str]]:
    rows: list[list[str]] = []
    results: dict[str, dict[str, tuple[int, float, float]]] = {}
    for kind in ("clean", "hostile"):
        (tmp / kind).mkdir()
        repo = git_repo(tmp / kind)
        assert _baton(repo, "init")[0] == 0
        if kind == "hostile":
            _plant(repo)
        else:
            assert _baton(repo, "task", "new", "--to", "DEV", "--subject", "template")[0] == 0
        measured: dict[str, tuple[int, float, float]] = {}
        for label, args in (
            ("status", ("status", "--json")),
            ("task new", ("task", "new", "--to", "QA", "--subject", "next")),
            ("up --until-idle", ("up", "--until-idle")),
            ("task new after up", ("task", "new", "--to", "QA", "--subject", "later")),
        ):
            code, _, seconds, peak = _baton(repo, *args)
            measured[label] = (code, seconds, peak)
        results[kind] = measured
    for label in results["clean"]:
        c_code, c_s, c_peak = results["clean"][label]
        h_code, h_s, h_peak = results["hostile"][label]
        rows.append(
            [
                label,
                f"{c_code}",
                f"{h_code}",
                f"{c_s:.2f}",
                f"{h_s:.2f}",
                f"{h_s / c_s:.2f}",
                f"{c_peak:.0f}",
                f"{h_peak:.0f}",
            ]
        )
    return rows


def run(quick: bool = False) -> None:
    with tempfile.TemporaryDirectory(prefix="baton-intake-bench-") as name:
        tmp = Path(name)
        root = tmp / "ws"
        root.mkdir()
        authority = TrustedAuthority(secrets.token_bytes(32))
        init_workspace(root, authority)
        port = FcopPort(root, authority=authority)
        created = port.create_task(sender="ADMIN", recipient="DEV", subject="t", body="b")
        template = created.path.read_text()
        port.claim(created.task_id, actor="DEV")
        rows = asyncio.run(_doorbell_rows(port, template))
        print_table(
            f"Hostile inbox files through the doorbell (settle window {DEFAULT_LIMITS.settle_s:g} s, "
            f"parse budget {DEFAULT_LIMITS.parse_deadline_s:g} CPU-s)",
            [
                "file",
                "verdict",
                "seconds",
                "x baseline",
                "worker peak MiB",
                "baton +MiB",
                "serving",
            ],
            rows,
        )
        if quick:
            return
        print_table(
            "Commands on a project with hostile files everywhere Core reads (vs. clean)",
            [
                "command",
                "exit clean",
                "exit hostile",
                "s clean",
                "s hostile",
                "x clean",
                "peak MiB clean",
                "peak MiB hostile",
            ],
            _command_rows(tmp),
        )
        valid = stock_fcop_validate(tmp / "hostile" / "repo")["valid"]
        print(f"\nstock `fcop validate` on the hostile project after `baton up`: valid={valid}")
