"""The REPORT/REVIEW subject index: a listing is reused only when it provably still holds."""

from __future__ import annotations

import os
from pathlib import Path

from baton.fcop_port.authority import TrustedAuthority
from baton.fcop_port.lifecycle.subjects import MAX_READ, RACY_NS, SubjectIndex
from baton.fcop_port.port import FcopPort
from baton.fcop_port.workspace import init_workspace
from tests.coordination.test_lifecycle import _opened_under


def _envelope(folder: Path, name: str, subject: str, attempt: str | None = "urn:a1") -> Path:
    lines = ["---", "type: REPORT", f"subject_ref: {subject}"]
    if attempt is not None:
        lines.append(f"attempt_id: {attempt}")
    path = folder / f"{name}.md"
    path.write_text("\n".join([*lines, "---", "body", ""]))
    return path


def _aged(folder: Path) -> None:
    """Move the folder's mtime well outside the racy window (as time passing would)."""
    info = os.stat(folder)
    os.utime(folder, ns=(info.st_atime_ns, info.st_mtime_ns - 10 * RACY_NS))


def test_lookups_offer_only_the_subjects_files_and_reuse_an_unchanged_listing(
    tmp_path: Path,
) -> None:
    for i in range(5):
        _envelope(tmp_path, f"REPORT-{i}", f"TASK-{i % 2}", attempt=f"urn:a{i}")
    _aged(tmp_path)
    index = SubjectIndex(tmp_path, "REPORT-")
    assert [p.name for p in index.lookup("TASK-0", None)] == [
        "REPORT-0.md",
        "REPORT-2.md",
        "REPORT-4.md",
    ]
    assert [p.name for p in index.lookup("TASK-1", "urn:a3")] == ["REPORT-3.md"]
    assert index.lookup("TASK-9", None) == []
    assert (index.listings, index.reads) == (1, 5)  # one listing, each file read once


def test_a_new_file_is_seen_and_a_racy_listing_is_not_trusted(tmp_path: Path) -> None:
    _envelope(tmp_path, "REPORT-a", "TASK-1")
    now = [os.stat(tmp_path).st_mtime_ns + RACY_NS // 2]  # listing in the same "tick"
    index = SubjectIndex(tmp_path, "REPORT-", wall_ns=lambda: now[0])
    assert len(index.lookup("TASK-1", None)) == 1
    # The folder's mtime was too close to the listing: the next look-up lists again, even
    # though a change in that tick could not have moved the mtime.
    assert len(index.lookup("TASK-1", None)) == 1
    assert index.listings == 2
    now[0] += 10 * RACY_NS
    index.lookup("TASK-1", None)
    index.lookup("TASK-1", None)
    assert index.listings == 3  # trusted from then on
    _envelope(tmp_path, "REPORT-b", "TASK-1")
    assert [p.name for p in index.lookup("TASK-1", None)] == ["REPORT-a.md", "REPORT-b.md"]
    assert index.reads == 2  # only the new file was read


def test_a_replaced_or_vanished_file_is_read_again_or_dropped(tmp_path: Path) -> None:
    path = _envelope(tmp_path, "REPORT-a", "TASK-1")
    _aged(tmp_path)
    index = SubjectIndex(tmp_path, "REPORT-")
    assert index.lookup("TASK-1", None)
    other = _envelope(tmp_path, "tmp", "TASK-2")
    os.replace(other, path)  # published over the old name: a new inode
    assert index.lookup("TASK-1", None) == []
    assert [p.name for p in index.lookup("TASK-2", None)] == ["REPORT-a.md"]
    path.unlink()
    assert index.lookup("TASK-2", None) == []


def test_an_in_place_rewrite_is_seen_once_the_sweeper_says_so(tmp_path: Path) -> None:
    path = _envelope(tmp_path, "REPORT-a", "TASK-1")
    _aged(tmp_path)
    index = SubjectIndex(tmp_path, "REPORT-")
    assert index.lookup("TASK-1", None)
    with open(path, "r+") as stream:  # same inode: FCoP's append-only rule broken
        stream.write(path.read_text().replace("TASK-1", "TASK-2"))
    _aged(tmp_path)
    assert index.lookup("TASK-2", None) == []  # the index alone cannot know
    listings = index.listings
    index.forget("REPORT-a.md")
    assert [p.name for p in index.lookup("TASK-2", None)] == ["REPORT-a.md"]
    assert index.lookup("TASK-1", None) == []
    assert index.listings == listings  # one file read again, the listing still trusted
    index.forget("REPORT-new.md")  # not known: left to the next listing
    assert index.listings == listings


def test_what_cannot_be_classified_is_offered_to_every_look_up(tmp_path: Path) -> None:
    _envelope(tmp_path, "REPORT-ok", "TASK-1")
    (tmp_path / "REPORT-broken.md").write_text("---\nsubject_ref: [unclosed\n---\n")
    (tmp_path / "REPORT-big.md").write_bytes(b"---\nsubject_ref: TASK-2\n---\n" + b"x" * MAX_READ)
    (tmp_path / "REPORT-link.md").symlink_to(tmp_path / "REPORT-ok.md")
    (tmp_path / "REPORT-dir.md").mkdir()
    (tmp_path / "notes.md").write_text("not an envelope name")
    _aged(tmp_path)
    index = SubjectIndex(tmp_path, "REPORT-")
    unknown = ["REPORT-big.md", "REPORT-broken.md", "REPORT-dir.md", "REPORT-link.md"]
    assert [p.name for p in index.lookup("TASK-3", None)] == unknown
    assert [p.name for p in index.lookup("TASK-1", "urn:a1")] == sorted([*unknown, "REPORT-ok.md"])


def test_a_missing_folder_offers_nothing(tmp_path: Path) -> None:
    index = SubjectIndex(tmp_path / "absent", "REPORT-")
    assert index.lookup("TASK-1", None) == []


def test_children_come_from_the_index_and_equal_the_full_scan(
    tmp_path: Path, authority: TrustedAuthority
) -> None:
    root = tmp_path / "ws"
    root.mkdir()
    init_workspace(root, authority)
    port = FcopPort(root, authority=authority)
    parents = [
        port.create_task(sender="ADMIN", recipient="PM", subject=f"p{i}", body="b").task_id
        for i in range(3)
    ]
    kids = {
        p: [
            port.create_task(
                sender="PM", recipient="DEV", subject=f"{p} {j}", body="b", parent=p
            ).task_id
            for j in range(2)
        ]
        for p in parents
    }
    port.claim(kids[parents[0]][0], actor="DEV")  # a child in another stage, moved by a claim
    scan = FcopPort(root, authority=authority)
    scan._lifecycle = None  # the fallback: every TASK of every stage

    def ids(p: FcopPort, parent: str) -> list[str]:
        return [t.task_id for t in p.children(parent)]

    for parent in parents:
        assert ids(port, parent) == ids(scan, parent) and sorted(ids(port, parent)) == sorted(
            kids[parent]
        )
    opened = _opened_under(root, lambda: port.children(parents[1]))
    tasks_opened = {path.rsplit("/", 1)[-1][: -len(".md")] for path in opened if "TASK-" in path}
    assert tasks_opened <= {parents[1], *kids[parents[1]]}, (opened, parents, kids)


def test_the_sweeper_tells_the_index_of_an_in_place_rewrite(
    tmp_path: Path, authority: TrustedAuthority
) -> None:
    """The daemon's wiring: intake's sweep judges a changed REPORT and the index reads it again."""
    from baton.intake.sweep import Sweeper
    from baton.intake.worker import shared_worker

    root = tmp_path / "ws"
    root.mkdir()
    init_workspace(root, authority)
    port = FcopPort(root, authority=authority)
    lifecycle = port.lifecycle
    assert lifecycle is not None
    tasks = []
    for subject in ("one", "two"):
        task = port.create_task(sender="ADMIN", recipient="DEV", subject=subject, body="b").task_id
        tasks.append((task, port.claim(task, actor="DEV").attempt_id))
    report = port.write_report(
        task_id=tasks[0][0],
        attempt_id=tasks[0][1],
        sender="DEV",
        recipient="ADMIN",
        result="done",
        body="r",
    )
    sweeper = Sweeper(
        root,
        worker=shared_worker(),
        watch=True,
        require_stable=False,
        on_change=lifecycle.forget,
    )
    try:
        sweeper.sweep()
        assert port.find_report_head(*tasks[0]) is not None
        path = root / "fcop" / "reports" / f"{report.report_id}.md"
        text = path.read_text()
        with open(path, "r+") as stream:  # an agent edits the REPORT in place
            stream.write(text.replace(tasks[0][0], tasks[1][0]).replace(tasks[0][1], tasks[1][1]))
        assert [p.name for p in lifecycle.candidates("REPORT", *tasks[1])] == []  # not yet
        sweeper.sweep()
        assert [p.name for p in lifecycle.candidates("REPORT", *tasks[1])] == [path.name]
        assert lifecycle.candidates("REPORT", *tasks[0]) == []
    finally:
        sweeper.close()


def test_warm_reads_every_folder_once_so_look_ups_read_nothing(
    tmp_path: Path, authority: TrustedAuthority
) -> None:
    root = tmp_path / "ws"
    root.mkdir()
    init_workspace(root, authority)
    port = FcopPort(root, authority=authority)
    parent = port.create_task(sender="ADMIN", recipient="PM", subject="p", body="b").task_id
    child = port.create_task(
        sender="PM", recipient="DEV", subject="c", body="b", parent=parent
    ).task_id
    attempt = port.claim(child, actor="DEV").attempt_id
    port.write_report(
        task_id=child, attempt_id=attempt, sender="DEV", recipient="PM", result="done", body="r"
    )
    fresh = FcopPort(root, authority=authority)  # a daemon starting on this workspace
    lifecycle = fresh.lifecycle
    assert lifecycle is not None
    asked: list[int] = []
    lifecycle.warm(stop=lambda: bool(asked.append(1)) and False)
    indexes = list(lifecycle.workspace._subjects.values())
    assert len(asked) == len(indexes)  # asked before each folder
    reads = sum(index.reads for index in indexes)
    assert reads == 3  # the two TASKs and the REPORT, each once
    assert [t.task_id for t in fresh.children(parent)] == [child]
    assert fresh.find_report_head(child, attempt) is not None
    assert sum(index.reads for index in indexes) == reads  # nothing read again
    stopped = FcopPort(root, authority=authority).lifecycle
    assert stopped is not None
    stopped.warm(stop=lambda: True)
    assert sum(index.reads for index in stopped.workspace._subjects.values()) == 0
