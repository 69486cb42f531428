"""The doorbell against a real workspace: event-driven, drains, ignores temps, refuses hostiles."""

from __future__ import annotations

import asyncio
import os
import sys
import textwrap
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path

import pytest

from baton.fcop_port.port import FcopPort
from baton.inbox.doorbell import Doorbell, DoorbellEvent, TaskArrived, TaskRefused

ROLES = {"PM", "DEV", "QA", "OPS"}
WAIT = 10.0


def route(recipient: str) -> str | None:
    return recipient if recipient in ROLES else None


@asynccontextmanager
async def ringing(
    port: FcopPort, tmp_path: Path, **kwargs: object
) -> AsyncIterator[tuple[Doorbell, asyncio.Queue[DoorbellEvent]]]:
    queue: asyncio.Queue[DoorbellEvent] = asyncio.Queue()
    bell = Doorbell(port, route, queue, quarantine_dir=tmp_path / "quarantine", **kwargs)  # type: ignore[arg-type]
    stop = asyncio.Event()
    task = asyncio.create_task(bell.run(stop))
    try:
        await asyncio.wait_for(bell.ready.wait(), WAIT)
        yield bell, queue
    finally:
        stop.set()
        await asyncio.wait_for(task, WAIT)


async def next_event(queue: asyncio.Queue[DoorbellEvent]) -> DoorbellEvent:
    return await asyncio.wait_for(queue.get(), WAIT)


def issues_mentioning(port: FcopPort, text: str) -> list[str]:
    return [p.stem for p in (port.fcop_dir / "issues").glob("ISSUE-*.md") if text in p.read_text()]


async def create_in_subprocess(root: Path, workspace_id: str, recipient: str, subject: str) -> str:
    code = textwrap.dedent(
        f"""
        import warnings; warnings.simplefilter("ignore")
        from fcop import Project
        r = Project({str(root)!r}).create_task(
            workspace_id={workspace_id!r}, operation_id="ext-{subject}", sender="ADMIN",
            recipient={recipient!r}, subject={subject!r}, body="from another process")
        print(r["task_id"])
        """
    )
    proc = await asyncio.create_subprocess_exec(
        sys.executable, "-c", code, stdout=asyncio.subprocess.PIPE
    )
    out, _ = await proc.communicate()
    assert proc.returncode == 0
    return out.decode().strip()


async def test_task_created_by_another_process_rings(port: FcopPort, tmp_path: Path) -> None:
    async with ringing(port, tmp_path) as (_, queue):
        assert queue.empty()
        task_id = await create_in_subprocess(port.root, port.workspace_id, "QA", "hello")
        event = await next_event(queue)
        assert isinstance(event, TaskArrived)
        assert (event.task_id, event.recipient, event.role, event.source) == (
            task_id,
            "QA",
            "QA",
            "watch",
        )
        assert event.subject == "hello" and event.sender == "ADMIN"


async def test_preexisting_inbox_is_drained_once(port: FcopPort, tmp_path: Path) -> None:
    ids = [
        port.create_task(sender="ADMIN", recipient=r, subject=f"t{r}", body="b").task_id
        for r in ("PM", "DEV")
    ]
    claimed = port.create_task(sender="ADMIN", recipient="QA", subject="taken", body="b")
    port.claim(claimed.task_id, actor="QA")  # not in the inbox any more: not drained
    async with ringing(port, tmp_path) as (bell, queue):
        got = [await next_event(queue) for _ in ids]
        assert sorted(e.task_id for e in got if isinstance(e, TaskArrived)) == sorted(ids)
        assert all(isinstance(e, TaskArrived) and e.source == "drain" for e in got)
        assert await bell.scan() == 0  # a rescan does not re-emit
        assert queue.empty()


async def test_temp_and_foreign_files_are_ignored(port: FcopPort, tmp_path: Path) -> None:
    inbox = port.stage_dir("inbox")
    async with ringing(port, tmp_path) as (_, queue):
        (inbox / ".fcop-create-TASK-abc-xyz.tmp").write_text("half a task")
        (inbox / "README.md").write_text("notes")
        (inbox / "TASK-abc.md.swp").write_text("editor")
        created = port.create_task(sender="ADMIN", recipient="OPS", subject="real", body="b")
        event = await next_event(queue)
        assert isinstance(event, TaskArrived) and event.task_id == created.task_id
        assert queue.empty()


def _write_task_like(path: Path, text: str) -> None:
    path.write_text(text)


async def test_hostile_inbox_entries_each_get_a_clear_error_and_an_issue(
    port: FcopPort, tmp_path: Path
) -> None:
    inbox = port.stage_dir("inbox")
    async with ringing(port, tmp_path, max_task_bytes=4096) as (_, queue):
        # 1. bad frontmatter
        _write_task_like(inbox / "TASK-badfrontmatter.md", "---\nthis: [is not closed\n---\nbody\n")
        bad = await next_event(queue)
        # 2. valid TASK for an unknown recipient (created through Core)
        unknown = port.create_task(sender="ADMIN", recipient="MARKETING", subject="ads", body="b")
        stranger = await next_event(queue)
        # 3. huge body
        _write_task_like(inbox / "TASK-huge.md", "---\nprotocol: fcop\n---\n" + "x" * 10_000)
        huge = await next_event(queue)
        # 4. symlink in the inbox
        secret = tmp_path / "secret.txt"
        secret.write_text("do not read me")
        os.symlink(secret, inbox / "TASK-link.md")
        link = await next_event(queue)
        # The watcher survived all of it: a good task still rings.
        good = port.create_task(sender="ADMIN", recipient="DEV", subject="fine", body="b")
        ok = await next_event(queue)

    assert isinstance(ok, TaskArrived) and ok.task_id == good.task_id
    expected = [
        (bad, "yaml_invalid", "TASK-badfrontmatter.md", True),
        (stranger, "unknown_recipient", f"{unknown.task_id}.md", False),
        (huge, "too_large", "TASK-huge.md", True),
        (link, "symlink", "TASK-link.md", True),
    ]
    for event, reason, name, quarantined in expected:
        assert isinstance(event, TaskRefused), event
        assert (event.reason, event.name) == (reason, name)
        assert event.message
        assert event.issue_id is not None
        issue = (port.fcop_dir / "issues" / f"{event.issue_id}.md").read_text()
        assert name in issue and reason in issue
        assert (event.quarantined_to is not None) == quarantined
        assert os.path.lexists(inbox / name) == (not quarantined)
    assert "MARKETING" in stranger.message  # type: ignore[union-attr]
    assert secret.read_text() == "do not read me"  # the link was moved, its target untouched
    assert os.path.islink(link.quarantined_to)  # type: ignore[union-attr, arg-type]
    # The unknown-recipient ISSUE is about that TASK; the task itself stays valid in the inbox.
    issue = (port.fcop_dir / "issues" / f"{stranger.issue_id}.md").read_text()  # type: ignore[union-attr]
    assert f"subject_ref: {unknown.task_id}" in issue
    # With the hostile files quarantined, Core's own create still works.
    port.create_task(sender="ADMIN", recipient="QA", subject="after", body="b")


async def test_unknown_recipient_is_reported_once_across_restarts(
    port: FcopPort, tmp_path: Path
) -> None:
    port.create_task(sender="ADMIN", recipient="NOBODY", subject="lost", body="b")
    async with ringing(port, tmp_path) as (bell, queue):
        first = await next_event(queue)
        assert isinstance(first, TaskRefused) and first.reason == "unknown_recipient"
        assert await bell.scan() == 0
    # The team loop stores the refusal and hands it back to the next doorbell.
    async with ringing(port, tmp_path, refused={first.name: first.issue_id}) as (bell, queue):
        assert await bell.scan() == 0 and queue.empty()
    assert len(issues_mentioning(port, "NOBODY")) == 1


async def test_task_for_the_human_is_routed_to_the_human(port: FcopPort, tmp_path: Path) -> None:
    async with ringing(port, tmp_path) as (_, queue):
        port.create_task(sender="PM", recipient="ADMIN", subject="please decide", body="b")
        event = await next_event(queue)
        assert isinstance(event, TaskArrived) and event.for_human and event.role == "ADMIN"


@pytest.mark.parametrize("quarantine", [False])
async def test_without_quarantine_hostile_files_stay_and_are_reported_once(
    port: FcopPort, tmp_path: Path, quarantine: bool
) -> None:
    inbox = port.stage_dir("inbox")
    queue: asyncio.Queue[DoorbellEvent] = asyncio.Queue()
    bell = Doorbell(port, route, queue, quarantine_dir=None)
    stop = asyncio.Event()
    task = asyncio.create_task(bell.run(stop))
    await asyncio.wait_for(bell.ready.wait(), WAIT)
    (inbox / "TASK-junk.md").write_text("junk")
    event = await next_event(queue)
    assert isinstance(event, TaskRefused) and event.quarantined_to is None
    assert await bell.scan() == 0  # not re-reported on every scan
    stop.set()
    await asyncio.wait_for(task, WAIT)
    assert (inbox / "TASK-junk.md").exists()


# ------------------------------------------------------------ the kernel watch


async def test_an_inotify_overflow_is_followed_by_a_full_listing(
    port: FcopPort, tmp_path: Path
) -> None:
    limit = int(Path("/proc/sys/fs/inotify/max_queued_events").read_text())
    if limit > 200_000:
        pytest.skip(f"max_queued_events is {limit}: too many events to overflow it here")
    inbox = port.stage_dir("inbox")
    a, b = inbox / "notes-a.txt", inbox / "notes-b.txt"
    a.write_text("a")
    b.write_text("b")
    async with ringing(port, tmp_path) as (_, queue):
        # The loop is not given a turn until the queue has overflowed, so the TASK's own
        # event is lost in the overflow: only a full listing can find it.
        for n in range(limit // 2 + 10):  # alternate, or the kernel merges equal events
            os.utime(a, ns=(n, n))
            os.utime(b, ns=(n, n))
        created = port.create_task(sender="ADMIN", recipient="DEV", subject="late", body="b")
        event = await next_event(queue)
        assert isinstance(event, TaskArrived) and event.task_id == created.task_id
        assert event.source == "rescan"
        # Re-armed: the next arrival rings through the watch again.
        after = port.create_task(sender="ADMIN", recipient="DEV", subject="next", body="b")
        event = await next_event(queue)
        assert isinstance(event, TaskArrived) and event.task_id == after.task_id
        assert event.source == "watch"


async def test_a_replaced_inbox_is_watched_again(port: FcopPort, tmp_path: Path) -> None:
    inbox = port.stage_dir("inbox")
    async with ringing(port, tmp_path) as (_, queue):
        inbox.rename(tmp_path / "old-inbox")
        inbox.mkdir()
        first = port.create_task(sender="ADMIN", recipient="QA", subject="one", body="b")
        event = await next_event(queue)
        assert isinstance(event, TaskArrived) and event.task_id == first.task_id
        second = port.create_task(sender="ADMIN", recipient="QA", subject="two", body="b")
        event = await next_event(queue)
        assert isinstance(event, TaskArrived) and event.task_id == second.task_id
        assert event.source == "watch"  # the new directory has a watch of its own
        assert queue.empty()


async def test_a_task_that_leaves_the_inbox_and_returns_rings_again(
    port: FcopPort, tmp_path: Path
) -> None:
    async with ringing(port, tmp_path) as (_, queue):
        created = port.create_task(sender="ADMIN", recipient="OPS", subject="back", body="b")
        event = await next_event(queue)
        assert isinstance(event, TaskArrived) and event.task_id == created.task_id
        path = port.stage_dir("inbox") / f"{created.task_id}.md"
        aside = tmp_path / path.name
        path.rename(aside)
        await asyncio.sleep(0.2)  # the departure is seen on its own
        assert queue.empty()
        aside.rename(path)
        event = await next_event(queue)
        assert isinstance(event, TaskArrived) and event.task_id == created.task_id


async def test_where_inotify_is_missing_watchfiles_rings(
    port: FcopPort, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import baton.inbox.doorbell as doorbell

    monkeypatch.setattr(doorbell, "open_feed", lambda root, directories: None)
    async with ringing(port, tmp_path) as (_, queue):
        task_id = await create_in_subprocess(port.root, port.workspace_id, "QA", "fallback")
        event = await next_event(queue)
        assert isinstance(event, TaskArrived) and event.task_id == task_id
        assert event.source == "watch"


async def test_settled_stays_clear_while_an_arrival_is_being_read(
    port: FcopPort, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """``baton up --until-idle`` waits on ``settled`` whenever ``settling`` is non-zero: if
    it were set while a file is being read, that wait would return at once and the loop
    would spin without ever yielding to the read it waits for."""
    import threading

    entered, release = threading.Event(), threading.Event()
    real = Doorbell._inspect

    def slow(self: Doorbell, *args: object) -> object:
        entered.set()
        release.wait(WAIT)
        return real(self, *args)  # type: ignore[arg-type]

    monkeypatch.setattr(Doorbell, "_inspect", slow)
    async with ringing(port, tmp_path) as (bell, queue):
        created = port.create_task(sender="ADMIN", recipient="DEV", subject="slow", body="b")
        assert await asyncio.to_thread(entered.wait, WAIT)
        assert bell.settling == 1 and not bell.settled.is_set()
        waiter = asyncio.create_task(bell.wait_settled())
        await asyncio.sleep(0.05)
        assert not waiter.done()
        release.set()
        await asyncio.wait_for(waiter, WAIT)
        event = await next_event(queue)
        assert isinstance(event, TaskArrived) and event.task_id == created.task_id
        assert bell.settling == 0 and bell.settled.is_set()
