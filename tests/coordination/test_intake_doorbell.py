"""The doorbell reads only stable, screened files: two-chunk writes, the hostile corpus, proofs."""

from __future__ import annotations

import asyncio
import json
import os
import shutil
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import yaml

from baton.fcop_port.port import FcopPort
from baton.inbox import inspection as inbox_inspection
from baton.inbox.doorbell import DoorbellEvent, TaskArrived, TaskRefused
from baton.intake.create_fact import create_fact_name
from baton.intake.limits import IntakeLimits
from baton.intake.quarantine import reason_path
from baton.intake.screen import Screened
from baton.intake.worker import ParseWorker, Proof, WorkerResult
from tests.coordination.test_doorbell import next_event, ringing
from tests.support.hostile import CORPUS
from tests.support.project import stock_fcop_validate


def hand_written(port: FcopPort, task_id: str, body: str) -> str:
    """A TASK as a human would write it by hand: Core's fields, no operation fact."""
    created = port.create_task(sender="ADMIN", recipient="QA", subject="by hand", body="x")
    text = created.path.read_text()
    created.path.unlink()  # only its shape is wanted
    head = [
        line
        for line in text.split("\n---\n")[0].split("\n")
        if not line.startswith(("operation_id:", "operation_kind:", "normalized_request_digest:"))
    ]
    head = [f"task_id: {task_id}" if line.startswith("task_id:") else line for line in head]
    return "\n".join(head) + "\n---\n\n" + body


BODY = "Run the check.\n\n```sh\necho first-half\necho second-half\n```\n"


@pytest.mark.parametrize("cut", ["in the front matter", "in the body's sh block"])
async def test_a_task_written_in_two_chunks_is_read_whole(
    port: FcopPort, tmp_path: Path, cut: str
) -> None:
    """Failing-first: the doorbell used to claim the first chunk (a truncated sh block ran)."""
    text = hand_written(port, "TASK-twochunks", BODY)
    split = text.index("recipient:") if cut == "in the front matter" else text.index("echo second")
    path = port.stage_dir("inbox") / "TASK-twochunks.md"
    limits = IntakeLimits(settle_s=2.0)
    async with ringing(port, tmp_path, limits=limits) as (bell, queue):
        with path.open("w") as handle:
            handle.write(text[:split])
            handle.flush()
            await asyncio.sleep(0.3)  # an editor's pause, shorter than the settle window
            assert queue.empty() and bell.settling == 1
            handle.write(text[split:])
        event = await next_event(queue)
    assert isinstance(event, TaskArrived), event
    assert event.task_id == "TASK-twochunks"
    assert port.read_task("TASK-twochunks").body.endswith("echo second-half\n```\n")
    assert path.exists()  # never quarantined for being half-written


async def test_a_file_that_never_stops_changing_is_refused_as_unstable(
    port: FcopPort, tmp_path: Path
) -> None:
    path = port.stage_dir("inbox") / "TASK-forever.md"
    limits = IntakeLimits(settle_s=0.4, max_settle_s=1.5)
    async with ringing(port, tmp_path, limits=limits) as (_, queue):
        with path.open("w") as handle:
            handle.write("---\n")
            event: DoorbellEvent | None = None
            for _ in range(200):
                handle.write("k: v\n")
                handle.flush()
                try:
                    event = await asyncio.wait_for(queue.get(), 0.1)
                    break
                except TimeoutError:
                    continue
    assert isinstance(event, TaskRefused) and event.reason == "unstable", event
    assert event.quarantined_to is not None


async def test_a_task_core_created_is_proven_without_waiting_for_the_window(
    port: FcopPort, tmp_path: Path
) -> None:
    limits = IntakeLimits(settle_s=600.0)  # only the proof can let it through in time
    async with ringing(port, tmp_path, limits=limits) as (_, queue):
        created = await asyncio.to_thread(
            port.create_task, sender="ADMIN", recipient="DEV", subject="fast", body="b"
        )
        event = await next_event(queue)
    assert isinstance(event, TaskArrived) and event.task_id == created.task_id


async def test_every_hostile_class_is_refused_and_baton_keeps_serving(
    port: FcopPort, tmp_path: Path
) -> None:
    template = port.create_task(sender="ADMIN", recipient="DEV", subject="t", body="b")
    template_text = template.path.read_text()
    limits = IntakeLimits(settle_s=0.3)
    inbox = port.stage_dir("inbox")
    names = {f"TASK-hostile-{i}.md": h for i, h in enumerate(CORPUS)}
    async with ringing(port, tmp_path, limits=limits) as (_, queue):
        first = await next_event(queue)
        assert isinstance(first, TaskArrived) and first.task_id == template.task_id
        for name, hostile in names.items():
            hostile.write(inbox / name, name[:-3], template_text)
        refused: dict[str, TaskRefused] = {}
        while len(refused) < len(names):
            event = await next_event(queue)
            assert isinstance(event, TaskRefused), event
            refused[event.name] = event
        good = await asyncio.to_thread(
            port.create_task, sender="ADMIN", recipient="QA", subject="after", body="b"
        )
        arrived = await next_event(queue)
    assert isinstance(arrived, TaskArrived) and arrived.task_id == good.task_id
    for name, hostile in names.items():
        event = refused[name]
        assert event.reason == hostile.reason, (hostile.name, event)
        assert event.issue_id is not None, hostile.name
        issue = (port.fcop_dir / "issues" / f"{event.issue_id}.md").read_text()
        assert name in issue and "\x1b" not in issue and "\u202e" not in issue
        assert event.quarantined_to is not None, hostile.name
        record = json.loads(reason_path(event.quarantined_to).read_text())
        assert record["reason"] == hostile.reason
        assert record["origin"] == f"fcop/_lifecycle/inbox/{name}"
    assert sorted(p.name for p in inbox.iterdir()) == sorted(
        f"{t}.md" for t in (template.task_id, good.task_id)
    )
    assert stock_fcop_validate(port.root)["valid"] is True


async def test_a_rechecked_file_reports_how_and_when_it_was_first_seen(
    port: FcopPort, tmp_path: Path
) -> None:
    text = hand_written(port, "TASK-later", BODY)
    async with ringing(port, tmp_path, limits=IntakeLimits(settle_s=0.5)) as (_, queue):
        (port.stage_dir("inbox") / "TASK-later.md").write_text(text)
        event = await next_event(queue)
    assert isinstance(event, TaskArrived) and event.source == "watch"
    assert event.detected_at < event.emitted_at


class CountingWorker(ParseWorker):
    """The real worker, counting the full screens and the proof-only looks."""

    def __init__(self, limits: IntakeLimits) -> None:
        super().__init__(limits)
        self.screens: list[Path] = []
        self.proofs = 0

    def screen_envelope(self, path: Path, **kwargs: Any) -> WorkerResult:
        self.screens.append(path)
        return super().screen_envelope(path, **kwargs)

    def prove(self, proof: Proof, verdict: Screened) -> bool:
        self.proofs += 1
        return super().prove(proof, verdict)


def unpublished(port: FcopPort, tmp_path: Path) -> tuple[str, Path, Path, Path]:
    """A TASK Core created, taken back out of the workspace with its create fact: (id, the
    TASK's and the fact's saved copies, the fact's name in ``fcop/operations/``)."""
    created = port.create_task(sender="ADMIN", recipient="DEV", subject="two steps", body="b")
    operation = str(yaml.safe_load(created.path.read_text().split("---")[1])["operation_id"])
    fact = port.fcop_dir / "operations" / create_fact_name(port.workspace_id, operation)
    saved_task, saved_fact = tmp_path / "task.md", tmp_path / "fact.json"
    os.rename(created.path, saved_task)
    os.rename(fact, saved_fact)
    return created.task_id, saved_task, saved_fact, fact


async def until(condition: Callable[[], bool]) -> None:
    for _ in range(500):
        if condition():
            return
        await asyncio.sleep(0.01)
    raise AssertionError("condition not reached in 5 s")


@pytest.fixture
def no_timer(monkeypatch: pytest.MonkeyPatch) -> None:
    """Only the fact's arrival can re-check in time: the fallback timer waits a minute."""
    monkeypatch.setattr(inbox_inspection, "recheck_delay", lambda *a, **k: 60.0)


@pytest.mark.usefixtures("no_timer")
async def test_a_task_seen_before_its_fact_is_read_when_the_fact_lands(
    port: FcopPort, tmp_path: Path
) -> None:
    """Core links the TASK, then publishes its create fact: the first look is too early.

    The fact's arrival (the doorbell watches ``fcop/operations/``) re-checks it, and the
    re-check reads only the fact: the TASK is screened once.
    """
    task_id, saved_task, saved_fact, fact = unpublished(port, tmp_path)
    limits = IntakeLimits(settle_s=600.0)  # only a proof lets it through
    with CountingWorker(limits) as worker:
        async with ringing(port, tmp_path, limits=limits, worker=worker) as (bell, queue):
            os.link(saved_task, port.stage_dir("inbox") / f"{task_id}.md")  # as Core does
            await until(lambda: len(worker.screens) == 1 and bell.settling == 1)
            await asyncio.sleep(0.2)
            assert queue.empty()  # not proven, not settled: not read
            os.link(saved_fact, fact)
            event = await next_event(queue)
    assert isinstance(event, TaskArrived) and event.task_id == task_id
    assert len(worker.screens) == 1 and worker.proofs == 1


@pytest.mark.usefixtures("no_timer")
@pytest.mark.parametrize("change", ["touched", "rewritten"])
async def test_a_task_changed_after_its_screen_is_screened_again(
    port: FcopPort, tmp_path: Path, change: str
) -> None:
    """The proof-only re-check is for the same bytes: a TASK touched or rewritten since its
    screen is screened again, and only the bytes Core published are proven by its fact."""
    task_id, saved_task, saved_fact, fact = unpublished(port, tmp_path)
    path = port.stage_dir("inbox") / f"{task_id}.md"
    limits = IntakeLimits(settle_s=600.0)
    with CountingWorker(limits) as worker:
        async with ringing(port, tmp_path, limits=limits, worker=worker) as (bell, queue):
            shutil.copyfile(saved_task, path)
            await until(lambda: len(worker.screens) == 1 and bell.settling == 1)
            if change == "touched":  # same bytes, a new mtime
                later = path.stat().st_mtime_ns + 1_000_000_000
                os.utime(path, ns=(later, later))
            else:  # other bytes of the same size
                text = path.read_text()
                path.write_text(text.replace("\nb\n", "\nc\n"))
            await asyncio.sleep(0.2)  # no inbox event re-checks it: the timer waits a minute
            os.link(saved_fact, fact)
            if change == "touched":
                event = await next_event(queue)
                assert isinstance(event, TaskArrived) and event.task_id == task_id
            else:
                await until(lambda: len(worker.screens) == 2)
                await asyncio.sleep(0.3)
                assert queue.empty() and bell.settling == 1  # the fact proves other bytes
    assert len(worker.screens) == 2
