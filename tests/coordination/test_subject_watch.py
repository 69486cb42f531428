"""The subject index in a large folder: the kernel's news instead of a listing per change.

Real inotify (Linux), real files. ``watch_from`` is lowered so a few files make a folder
"large"; the rule is the same at 1,000.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from baton.fcop_port.lifecycle.subjects import FolderWatch, SubjectIndex
from baton.intake.feed import open_feed

pytestmark = pytest.mark.skipif(
    open_feed(Path("/"), []) is None, reason="inotify is not available here"
)


def _report(folder: Path, name: str, subject: str, attempt: str = "urn:a1") -> Path:
    path = folder / f"{name}.md"
    text = f"---\ntype: REPORT\nsubject_ref: {subject}\nattempt_id: {attempt}\n---\nbody\n"
    path.write_text(text)
    return path


def _names(paths: list[Path]) -> list[str]:
    return [p.name for p in paths]


def _world(tmp_path: Path, files: int = 3) -> tuple[Path, FolderWatch, SubjectIndex]:
    folder = tmp_path / "fcop" / "reports"
    folder.mkdir(parents=True)
    for i in range(files):
        _report(folder, f"REPORT-{i}", f"TASK-{i}")
    watch = FolderWatch(tmp_path, [folder])
    return folder, watch, SubjectIndex(folder, "REPORT-", watch=watch, watch_from=3)


def test_a_large_folder_follows_the_news_and_lists_no_more(tmp_path: Path) -> None:
    folder, _, index = _world(tmp_path)
    assert _names(index.lookup("TASK-1", None)) == ["REPORT-1.md"]  # lists; arms the watch
    assert _names(index.lookup("TASK-1", None)) == ["REPORT-1.md"]  # lists under the watch
    listed = index.listings
    reads = index.reads
    for i in range(3, 40):  # publications, each right after a look-up (the "racy" case)
        _report(folder, f"REPORT-{i}", f"TASK-{i}")
        assert _names(index.lookup(f"TASK-{i}", None)) == [f"REPORT-{i}.md"]
    os.unlink(folder / "REPORT-0.md")
    os.rename(folder / "REPORT-1.md", folder / "REPORT-1b.md")
    assert index.lookup("TASK-0", None) == []
    assert _names(index.lookup("TASK-1", None)) == ["REPORT-1b.md"]
    assert index.listings == listed, "no listing once the watch keeps the index current"
    assert index.reads == reads + 37 + 1  # each new name read once (the rename: its new name)
    (folder / ".fcop-create-REPORT-9-x.tmp").write_text("half")  # not an entry of the index
    assert _names(index.lookup("TASK-9", None)) == ["REPORT-9.md"]


def test_a_small_folder_arms_nothing(tmp_path: Path) -> None:
    folder, watch, index = _world(tmp_path, files=2)
    index.lookup("TASK-0", None)
    index.lookup("TASK-0", None)
    assert watch.poll() is None  # never wanted: no inotify instance for a small project
    _report(folder, "REPORT-7", "TASK-7")
    assert _names(index.lookup("TASK-7", None)) == ["REPORT-7.md"]  # the listing rule


def test_a_replaced_folder_is_listed_again(tmp_path: Path) -> None:
    folder, _, index = _world(tmp_path)
    index.lookup("TASK-0", None)
    index.lookup("TASK-0", None)
    before = index.listings
    os.rename(folder, tmp_path / "old-reports")  # the watch on it is gone with it
    folder.mkdir()
    _report(folder, "REPORT-new", "TASK-0")
    assert _names(index.lookup("TASK-0", None)) == ["REPORT-new.md"]
    assert index.listings == before + 1
    _report(folder, "REPORT-newer", "TASK-0")  # and the new folder is watched
    assert _names(index.lookup("TASK-0", None)) == ["REPORT-new.md", "REPORT-newer.md"]
    assert index.listings == before + 1


def test_a_file_written_after_it_was_created_is_classified_again(tmp_path: Path) -> None:
    folder, _, index = _world(tmp_path)
    index.lookup("TASK-0", None)
    index.lookup("TASK-0", None)
    empty = folder / "REPORT-late.md"
    empty.write_text("")  # unknown: offered to every look-up
    assert "REPORT-late.md" in _names(index.lookup("TASK-0", None))
    _report(folder, "REPORT-late", "TASK-5")  # same inode, now with its subject
    assert "REPORT-late.md" not in _names(index.lookup("TASK-0", None))
    assert _names(index.lookup("TASK-5", None)) == ["REPORT-late.md"]


def test_one_watch_routes_each_folders_news_to_its_index(tmp_path: Path) -> None:
    reports, reviews = tmp_path / "fcop" / "reports", tmp_path / "fcop" / "reviews"
    reports.mkdir(parents=True)
    reviews.mkdir()
    for i in range(3):
        _report(reports, f"REPORT-{i}", "TASK-a")
    watch = FolderWatch(tmp_path, [reports, reviews])
    a = SubjectIndex(reports, "REPORT-", watch=watch, watch_from=3)
    b = SubjectIndex(reviews, "REVIEW-", watch=watch, watch_from=3)
    for index in (a, b, a, b):
        index.lookup("TASK-a", None)
    listed = (a.listings, b.listings)
    _report(reviews, "REVIEW-1", "TASK-a")
    _report(reports, "REPORT-9", "TASK-b")
    assert _names(b.lookup("TASK-a", None)) == ["REVIEW-1.md"]
    assert _names(a.lookup("TASK-b", None)) == ["REPORT-9.md"]
    assert (a.listings, b.listings) == listed
    watch.close()
    _report(reports, "REPORT-10", "TASK-b")  # closed: back to listing, nothing missed
    assert _names(a.lookup("TASK-b", None)) == ["REPORT-10.md", "REPORT-9.md"]
