"""Reading git's machine output (``-z`` forms), pure: bytes already decoded in, records out.

Every parser takes the NUL-split fields of one command and rejects what it does not
understand (a :class:`GitOutputUnreadable`), never guesses: a path is authoritative
data (a review lists it, a merge is refused over it).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from baton.worktrees.git import GitError

__all__ = [
    "ChangedFile",
    "GitOutputUnreadable",
    "StatusEntry",
    "changed_files",
    "conflicted_paths",
    "status_entries",
    "worktree_paths",
]


class GitOutputUnreadable(GitError):
    """git answered in a shape this parser does not know (a newer git, or a bug)."""


@dataclass(frozen=True, slots=True)
class ChangedFile:
    """One file of a diff: its status letter, path (and where it came from), +/- lines."""

    status: str
    """``A`` added, ``M`` modified, ``D`` deleted, ``R`` renamed, ``C`` copied, ``T`` type."""
    path: str
    old_path: str | None = None
    added: int | None = None
    """Lines added (None: a binary file)."""
    removed: int | None = None

    @property
    def binary(self) -> bool:
        return self.added is None


def changed_files(name_status: Sequence[str], numstat: Sequence[str]) -> list[ChangedFile]:
    """``diff --name-status -z -M`` and ``diff --numstat -z -M`` of one range, joined.

    name-status: ``STATUS\\0PATH\\0`` (``R100\\0OLD\\0NEW\\0`` for a rename or copy);
    numstat: ``ADDED\\tREMOVED\\tPATH\\0`` (``ADDED\\tREMOVED\\t\\0OLD\\0NEW\\0`` for one).
    """
    files: list[ChangedFile] = []
    i = 0
    while i < len(name_status):
        status = name_status[i]
        if not status or status[0] not in "ACDMRTUX":
            raise GitOutputUnreadable(f"unexpected name-status field {status[:40]!r}")
        if status[0] in "RC":
            if i + 2 >= len(name_status):
                raise GitOutputUnreadable("a rename without its two paths")
            files.append(ChangedFile(status[0], name_status[i + 2], old_path=name_status[i + 1]))
            i += 3
        else:
            if i + 1 >= len(name_status):
                raise GitOutputUnreadable("a status without its path")
            files.append(ChangedFile(status[0], name_status[i + 1]))
            i += 2
    counts: dict[str, tuple[int | None, int | None]] = {}
    i = 0
    while i < len(numstat):
        head = numstat[i].split("\t")
        if len(head) != 3:
            raise GitOutputUnreadable(f"unexpected numstat field {numstat[i][:40]!r}")
        added, removed, path = head
        if path == "":  # a rename: the two paths follow
            if i + 2 >= len(numstat):
                raise GitOutputUnreadable("a numstat rename without its two paths")
            path = numstat[i + 2]
            i += 3
        else:
            i += 1
        counts[path] = (_count(added), _count(removed))
    out = []
    for f in files:
        added_n, removed_n = counts.get(f.path, (0, 0))
        out.append(ChangedFile(f.status, f.path, f.old_path, added_n, removed_n))
    return out


def _count(text: str) -> int | None:
    if text == "-":
        return None  # binary
    if not text.isdigit():
        raise GitOutputUnreadable(f"unexpected line count {text[:20]!r}")
    return int(text)


@dataclass(frozen=True, slots=True)
class StatusEntry:
    """One path ``git status --porcelain=v1 -z`` lists: index and worktree letters."""

    index: str
    worktree: str
    path: str
    old_path: str | None = None

    @property
    def untracked(self) -> bool:
        return self.index == "?"


def status_entries(fields: Sequence[str]) -> list[StatusEntry]:
    """``status --porcelain=v1 -z --untracked-files=all``: ``XY PATH\\0`` (+ ``OLD\\0`` on a rename)."""
    out: list[StatusEntry] = []
    i = 0
    while i < len(fields):
        entry = fields[i]
        if len(entry) < 4 or entry[2] != " ":
            raise GitOutputUnreadable(f"unexpected status entry {entry[:40]!r}")
        x, y, path = entry[0], entry[1], entry[3:]
        old = None
        if x in "RC" or y in "RC":
            if i + 1 >= len(fields):
                raise GitOutputUnreadable("a rename without its source path")
            old = fields[i + 1]
            i += 1
        out.append(StatusEntry(x, y, path, old))
        i += 1
    return out


def conflicted_paths(fields: Sequence[str]) -> tuple[str | None, tuple[str, ...]]:
    """``merge-tree --write-tree --name-only -z``: the tree, then the conflicted paths.

    Clean (exit 0): ``TREE\\0``. Conflicted (exit 1): ``TREE\\0PATH\\0…\\0\\0`` then
    informational messages, which are not read. Returns (tree or None, paths).
    """
    if not fields or not fields[0]:
        raise GitOutputUnreadable("merge-tree printed no tree")
    tree = fields[0]
    paths: list[str] = []
    for field in fields[1:]:
        if field == "":
            break  # the end of the conflicted-file list; messages follow
        if field not in paths:
            paths.append(field)
    return tree, tuple(paths)


def worktree_paths(fields: Sequence[str]) -> dict[str, str | None]:
    """``worktree list --porcelain -z``: each worktree's path and its branch (None: detached)."""
    out: dict[str, str | None] = {}
    current: str | None = None
    for field in fields:
        if field.startswith("worktree "):
            current = field[len("worktree ") :]
            out[current] = None
        elif field.startswith("branch ") and current is not None:
            out[current] = field[len("branch ") :]
    return out
