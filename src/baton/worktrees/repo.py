"""A task tree's git operations on the user's repository, each idempotent, all through git.

:class:`Repository` is the main checkout (the one the user works in). It makes a task
tree's branch and worktree, commits what a turn left (a *checkpoint*), tells the
change against the base (files, commits, a bounded unified diff), previews a merge
(``git merge-tree``: against the base tip and every other live task branch) and
performs it, and saves a dropped tree's exact head before its worktree goes.

Every operation can be run again after a crash at any point and reaches the same end
(creating a branch that exists, committing a clean tree, saving a ref that is saved,
merging what the base already holds): the lifecycle in :mod:`baton.worktrees.states`
records intent before each and the result after, and :mod:`baton.worktrees.recovery`
finishes or undoes what a crash interrupted by asking git, never by guessing.

No ref moves on a value it was not decided on: every ``update-ref`` names the value it
expects, and removing a merged or salvaged tree keeps (returns as :class:`Kept`) work that
landed after the decision read the branch instead of deleting it with the branch.

The main checkout is never half-merged: the merge commit is computed without
touching any checkout (``merge-tree --write-tree``, ``commit-tree``), and the base
then moves in one step: a fast-forward of the main checkout (only when none of the
files it changes has an uncommitted edit there) or, when the base is not checked out,
a compare-and-swap ``update-ref``.

Length: the operations share one repository handle and their preconditions; split,
each half would re-derive the other's (what "merged", "clean", "the base" mean).
"""

from __future__ import annotations

import shutil
import tempfile
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path

from baton.worktrees.git import BATON_IDENTITY, Git, GitFailed, GitOutputTooLarge
from baton.worktrees.model import MergeRule, WorktreeRecord
from baton.worktrees.naming import kept_ref
from baton.worktrees.parse import (
    ChangedFile,
    changed_files,
    conflicted_paths,
    status_entries,
    worktree_paths,
)

__all__ = [
    "Commit",
    "Kept",
    "MergeRefused",
    "Preflight",
    "Repository",
    "TreeChange",
    "kept_note",
]

MAX_REVIEW_DIFF_BYTES = 256 * 1024
"""The unified diff a review carries; a larger one says where to read the whole."""
MAX_COMMITS = 200
PREFLIGHT_WORKERS = 4
"""``git merge-tree`` processes a preflight runs at once."""
LEFTOVER_MESSAGE = "baton: what the worktree of {task} held when it was removed"
CAS_ATTEMPTS = 3
"""Compare-and-set tries of one ref move while something else moves the ref too."""
MAX_SAVE_NAMES = 20


class MergeRefused(GitFailed):
    """The merge cannot happen now; ``reason`` says why and ``paths`` which files."""

    def __init__(self, reason: str, paths: Sequence[str] = ()) -> None:
        self.reason = reason
        self.paths = tuple(paths)
        super().__init__(("merge",), 1, reason)

    def __str__(self) -> str:
        return self.reason


@dataclass(frozen=True, slots=True)
class Kept:
    """Work a removal found past the head its decision was made on: kept, never deleted."""

    ref: str
    """The branch left where it is, or the kept ref a worktree's own head was saved under."""
    commit: str


def kept_note(record: WorktreeRecord, kept: Sequence[Kept]) -> str:
    """What the human is told of work a merged tree's removal kept (the record's reason)."""
    merged = (record.head_commit or "?")[:10]
    where = []
    for k in kept:
        if k.ref.startswith("refs/heads/"):
            branch = k.ref.removeprefix("refs/heads/")
            where.append(
                f"on {branch} (at {k.commit[:10]}): merge them (`git merge {branch}`) "
                f"or delete it (`git branch -D {branch}`)"
            )
        else:
            where.append(
                f"under {k.ref} (at {k.commit[:10]}): `git branch NAME {k.ref}` brings them back"
            )
    return (
        f"needs attention: work landed in {record.branch} after {merged} was merged into "
        f"{record.base_branch}; the commits the merge did not take are kept " + "; and ".join(where)
    )


@dataclass(frozen=True, slots=True)
class Commit:
    commit: str
    author: str
    subject: str


@dataclass(frozen=True, slots=True)
class TreeChange:
    """A task branch against its base: what a human reviews."""

    branch: str
    base: str
    """The base branch's name."""
    merge_base: str
    head: str
    files: tuple[ChangedFile, ...]
    commits: tuple[Commit, ...]
    diff: str | None
    """The unified diff, or None when it is larger than the bound (see ``note``)."""
    note: str = ""

    @property
    def added(self) -> int:
        return sum(f.added or 0 for f in self.files)

    @property
    def removed(self) -> int:
        return sum(f.removed or 0 for f in self.files)


@dataclass(frozen=True, slots=True)
class Preflight:
    """A merge tried without touching anything: against the base tip and the live branches."""

    base_tip: str
    base_conflicts: tuple[str, ...]
    branch_conflicts: dict[str, tuple[str, ...]] = field(default_factory=dict)
    """Per other live task branch, the files this one conflicts with it in."""

    @property
    def clean(self) -> bool:
        """Mergeable into the base now (conflicts with other branches only warn)."""
        return not self.base_conflicts

    def rebase_prompt(self, base: str) -> str:
        """What the role owning the branch is told when it is sent back to rebase."""
        files = ", ".join(self.base_conflicts[:20]) + (
            f" (and {len(self.base_conflicts) - 20} more)" if len(self.base_conflicts) > 20 else ""
        )
        return (
            f"Your branch conflicts with {base}, which moved since you branched, in: {files}. "
            f"Merge {base} into your branch in this worktree (`git merge {base}`), resolve "
            "every conflict, commit, run the checks again, and report."
        )


@dataclass(frozen=True)
class Repository:
    """The user's main checkout (its top level)."""

    root: Path
    git: Git

    @classmethod
    def find(cls, path: Path) -> Repository | None:
        """The repository whose work tree holds ``path``, or None (not a git repository)."""
        probe = Git(path)
        result = probe.run("rev-parse", "--show-toplevel", check=False)
        if result.returncode != 0:
            return None
        top = Path(result.stdout.decode("utf-8", "surrogateescape").strip())
        return cls(top, Git(top))

    # ----------------------------------------------------------------- facts

    def checked_out_branch(self) -> tuple[str, str] | None:
        """``(refs/heads/X, its commit)`` checked out in the main checkout, or None
        (detached, unborn)."""
        result = self.git.run("symbolic-ref", "-q", "HEAD", check=False)
        ref = result.stdout.decode().strip()
        if result.returncode != 0 or not ref.startswith("refs/heads/"):
            return None
        commit = self.resolve(ref)
        return (ref, commit) if commit is not None else None

    def resolve(self, ref: str) -> str | None:
        """The commit ``ref`` names, or None."""
        result = self.git.run("rev-parse", "--verify", "-q", f"{ref}^{{commit}}", check=False)
        return result.stdout.decode().strip() or None if result.returncode == 0 else None

    def is_ancestor(self, commit: str, of: str) -> bool:
        return self.git.ok("merge-base", "--is-ancestor", commit, of)

    def worktrees(self) -> dict[Path, str | None]:
        """Every registered worktree's path (resolved) and its branch ref."""
        fields = self.git.zsplit("worktree", "list", "--porcelain", "-z")
        return {Path(p).resolve(): b for p, b in worktree_paths(fields).items()}

    def head(self, worktree: Path) -> str:
        return self.inside(worktree).text("rev-parse", "HEAD")

    def inside(self, worktree: Path) -> Git:
        """``git`` in a worktree and nowhere else: a folder whose ``.git`` file is gone (an
        agent deleted it) is an error, never the repository above it (discovery stops at the
        worktree: ``GIT_CEILING_DIRECTORIES``), so no ``add -A`` or ``clean`` there ever
        reaches the user's checkout."""
        ceiling = {"GIT_CEILING_DIRECTORIES": str(worktree.resolve().parent)}
        return Git(worktree, {**self.git.env, **ceiling}, self.git.timeout)

    # --------------------------------------------------------------- create

    def create(self, record: WorktreeRecord) -> None:
        """The branch at ``base_commit`` and its worktree at ``path``; done if they exist.

        A first dispatch (no folder yet) is one ``worktree add -b``; when git refuses
        it (the branch exists, a folder deleted by hand is still registered...), the
        worktrees are pruned and the branch and folder made from what exists."""
        path = record.worktree
        if not path.exists():
            path.parent.mkdir(parents=True, exist_ok=True)
            fresh = self.git.run(
                "worktree",
                "add",
                "-q",
                "-b",
                record.branch,
                str(path),
                record.base_commit,
                check=False,
            )
            if fresh.returncode == 0:
                return
        ref = f"refs/heads/{record.branch}"
        self.git.run("worktree", "prune")  # a folder deleted by hand is forgotten first
        registered = self.worktrees().get(path.resolve()) if path.exists() else None
        if registered == ref:
            return
        if path.exists() and any(path.iterdir()):
            raise GitFailed(
                ("worktree", "add"), 1, f"{path} exists and is not the worktree of {record.branch}"
            )
        path.parent.mkdir(parents=True, exist_ok=True)
        if self.resolve(ref) is None:
            self.git.run(
                "worktree", "add", "-q", "-b", record.branch, str(path), record.base_commit
            )
        else:
            self.git.run("worktree", "add", "-q", str(path), record.branch)

    def create_branch(self, record: WorktreeRecord) -> None:
        """The branch alone at ``base_commit``, no worktree here (a tree whose worktree
        lives on a worker host: :mod:`baton.worktrees.travel`); done if it exists."""
        ref = f"refs/heads/{record.branch}"
        if self.resolve(ref) is None:
            self.git.run("update-ref", ref, record.base_commit, "")  # "": must not exist yet

    def exclude(self, directory: Path) -> None:
        """``directory`` kept out of the checkout's ``git status`` (``info/exclude``:
        baton's own line, never a file of the user's); nothing outside the checkout."""
        try:
            relative = directory.resolve().relative_to(self.root.resolve())
        except ValueError:
            return
        path = Path(self.git.text("rev-parse", "--git-path", "info/exclude"))
        exclude = path if path.is_absolute() else self.root / path
        line = f"/{relative.as_posix()}/"
        text = exclude.read_text(encoding="utf-8") if exclude.exists() else ""
        if line not in text.splitlines():
            exclude.parent.mkdir(parents=True, exist_ok=True)
            with exclude.open("a", encoding="utf-8") as out:
                out.write(("" if text.endswith("\n") or not text else "\n") + line + "\n")

    # ------------------------------------------------------------ checkpoint

    def dirty(self, worktree: Path) -> bool:
        """Anything not committed in ``worktree`` (untracked files included)?"""
        out = (
            self.inside(worktree)
            .run("status", "--porcelain=v1", "-z", "--untracked-files=all")
            .stdout
        )
        return bool(out)

    def checkpoint(self, worktree: Path, message: str) -> str:
        """Commit everything ``worktree`` holds that is not committed (as baton); the head.

        The agent's own commits stay as they are; a clean tree commits nothing.

        The tree is read once, by ``add -A``; whether anything is staged is then a
        comparison of the index with HEAD, which reads no file (a ``status`` before the
        ``add`` read all of them twice: 1.5× ``git add -A && git commit`` on 50,000 files,
        ``benches/run --only worktrees``). A staged edit the agent undid in the tree
        now commits nothing instead of failing on an empty commit."""
        git = self.inside(worktree)
        try:
            git.run("add", "-A", "--", ".")
        except GitFailed:
            if self.dirty(worktree):
                raise
            return self.head(worktree)  # nothing to take (say, an index lock left behind)
        if not git.ok("diff-index", "--cached", "--quiet", "HEAD", "--"):
            git.run(
                "commit",
                "-q",
                "--no-verify",
                "--allow-empty-message",
                "-m",
                message,
                env=BATON_IDENTITY,
            )
        return self.head(worktree)

    # ----------------------------------------------------------------- review

    def change(
        self,
        record: WorktreeRecord,
        head: str | None = None,
        *,
        max_diff_bytes: int = MAX_REVIEW_DIFF_BYTES,
    ) -> TreeChange:
        """The tree's change against its base (three dots: what the branch added); the
        unified diff only up to ``max_diff_bytes`` (beyond, ``diff`` is None and the
        note says where to read it whole)."""
        head = head or record.head_commit or self.resolve(f"refs/heads/{record.branch}")
        if head is None:
            raise GitFailed(("rev-parse",), 1, f"the branch {record.branch} is gone")
        base_tip = self.resolve(record.base_ref) or record.base_commit
        merge_base = self.git.text("merge-base", base_tip, head)
        span = f"{merge_base}..{head}"
        files = changed_files(
            self.git.zsplit("diff", "--name-status", "-z", "-M", span),
            self.git.zsplit("diff", "--numstat", "-z", "-M", span),
        )
        commits = []
        log = self.git.zsplit(
            "log", f"--max-count={MAX_COMMITS}", "-z", "--format=%H%x1f%an%x1f%s", span
        )
        for entry in log:
            parts = entry.strip("\n").split("\x1f")
            if len(parts) == 3:
                commits.append(Commit(*parts))
        diff: str | None
        note = ""
        try:
            raw = self.git.run(
                "diff",
                "--no-ext-diff",
                "--no-textconv",
                "-M",
                span,
                max_bytes=max_diff_bytes,
            ).stdout
            diff = raw.decode("utf-8", "replace")
        except GitOutputTooLarge:
            diff = None
            note = (
                f"the diff is over {max_diff_bytes // 1024} KiB; read it whole with "
                f"`baton diff {record.root_task}` or `git diff {record.base_branch}...{record.branch}`"
            )
        return TreeChange(
            branch=record.branch,
            base=record.base_branch,
            merge_base=merge_base,
            head=head,
            files=tuple(files),
            commits=tuple(commits),
            diff=diff,
            note=note,
        )

    def touched(self, record: WorktreeRecord, prefixes: Sequence[str]) -> tuple[str, ...]:
        """Paths under any of ``prefixes`` the branch changes (against where it forked)."""
        if not prefixes:
            return ()
        head = record.head_commit or self.resolve(f"refs/heads/{record.branch}")
        base_tip = self.resolve(record.base_ref) or record.base_commit
        if head is None:
            return ()
        fork = self.git.text("merge-base", base_tip, head)
        changed = self.git.zsplit("diff", "--name-only", "-z", "--no-renames", fork, head)
        return tuple(
            p for p in changed if any(p == x.rstrip("/") or p.startswith(x) for x in prefixes)
        )

    def conflicts(self, ours: str, theirs: str) -> tuple[str, ...]:
        """Files ``git merge-tree`` finds conflicting between two commits (none: clean)."""
        result = self.git.run(
            "merge-tree", "--write-tree", "--name-only", "-z", ours, theirs, check=False
        )
        if result.returncode not in (0, 1):
            raise GitFailed(
                ("merge-tree",), result.returncode, result.stderr.decode("utf-8", "replace")
            )
        fields = result.stdout.decode("utf-8", "surrogateescape").split("\0")
        _, paths = conflicted_paths(fields)
        return paths if result.returncode == 1 else ()

    def preflight(self, record: WorktreeRecord, others: Sequence[WorktreeRecord] = ()) -> Preflight:
        """The merge tried against the base tip and each other live branch, nothing written.

        The ``merge-tree`` runs are independent: a few run at once (each is mostly a
        process start; one after the other, ten live branches took a p99 of ~300 ms on a
        loaded 2-core machine, ``benches/run --only worktrees``)."""
        head = record.head_commit or self.resolve(f"refs/heads/{record.branch}")
        base_tip = self.resolve(record.base_ref)
        if head is None or base_tip is None:
            raise GitFailed(("merge-tree",), 1, f"{record.branch} or {record.base_ref} is gone")
        mine = head
        live = [o for o in others if o.root_task != record.root_task]

        def against(other: WorktreeRecord) -> tuple[str, ...]:
            other_head = other.head_commit or self.resolve(f"refs/heads/{other.branch}")
            return () if other_head is None else self.conflicts(other_head, mine)

        if not live:
            return Preflight(base_tip, self.conflicts(base_tip, head))
        with ThreadPoolExecutor(min(PREFLIGHT_WORKERS, len(live) + 1)) as pool:
            base = pool.submit(self.conflicts, base_tip, head)
            found = list(pool.map(against, live))
            by_branch = {o.branch: f for o, f in zip(live, found, strict=True) if f}
            return Preflight(base_tip, base.result(), by_branch)

    # ------------------------------------------------------------------ merge

    def merge_commit(
        self, record: WorktreeRecord, rule: MergeRule, message: str
    ) -> tuple[str, str]:
        """``(base tip, commit the base moves to)``, computed without touching a checkout."""
        head = record.head_commit or self.resolve(f"refs/heads/{record.branch}")
        base_tip = self.resolve(record.base_ref)
        if head is None or base_tip is None:
            raise MergeRefused(f"{record.branch} or {record.base_branch} no longer exists")
        if self.is_ancestor(head, base_tip):
            return base_tip, base_tip  # nothing to merge (or merged already)
        if rule == "ff":
            if not self.is_ancestor(base_tip, head):
                raise MergeRefused(
                    f"{record.base_branch} moved since {record.branch} was made: a fast-forward "
                    'is impossible (send it back to rebase, or merge with [team] merge = "merge")'
                )
            return base_tip, head
        result = self.git.run(
            "merge-tree", "--write-tree", "--name-only", "-z", base_tip, head, check=False
        )
        fields = result.stdout.decode("utf-8", "surrogateescape").split("\0")
        if result.returncode == 1:
            _, paths = conflicted_paths(fields)
            raise MergeRefused(
                f"{record.branch} conflicts with {record.base_branch} in {len(paths)} file(s)",
                paths,
            )
        if result.returncode != 0:
            raise GitFailed(
                ("merge-tree",), result.returncode, result.stderr.decode("utf-8", "replace")
            )
        tree, _ = conflicted_paths(fields)
        assert tree is not None
        parents = ["-p", base_tip] + (["-p", head] if rule == "merge" else [])
        known = self.git.ok("var", "GIT_COMMITTER_IDENT")  # the user's identity, if set
        out = self.git.run(
            "commit-tree", tree, *parents, "-m", message, env=None if known else BATON_IDENTITY
        ).stdout
        return base_tip, out.decode().strip()

    def checkout_blockers(self, base_tip: str, target: str) -> tuple[str, ...]:
        """Files the move would change that have uncommitted edits in the main checkout."""
        changing = set(
            self.git.zsplit("diff", "--name-only", "-z", "--no-renames", base_tip, target)
        )
        dirty = status_entries(
            self.git.zsplit("status", "--porcelain=v1", "-z", "--untracked-files=all")
        )
        blocked = []
        for entry in dirty:
            for path in (entry.path, entry.old_path):
                if path is not None and path in changing and path not in blocked:
                    blocked.append(path)
        return tuple(blocked)

    def _in_progress(self) -> str | None:
        """A merge, rebase, cherry-pick or revert the user has in progress, by name."""
        gitdir = Path(self.git.text("rev-parse", "--absolute-git-dir"))
        for name, what in (
            ("MERGE_HEAD", "a merge"),
            ("rebase-merge", "a rebase"),
            ("rebase-apply", "a rebase"),
            ("CHERRY_PICK_HEAD", "a cherry-pick"),
            ("REVERT_HEAD", "a revert"),
        ):
            if (gitdir / name).exists():
                return what
        return None

    def apply_merge(self, record: WorktreeRecord, base_tip: str, target: str) -> None:
        """Move the base from ``base_tip`` to ``target`` in one step (idempotent).

        Where the base is checked out in the main checkout: a fast-forward there, only
        when no file it changes is edited and uncommitted (the user's other edits stay);
        checked out in another worktree of the user's: refused (it would fall behind);
        not checked out: a compare-and-swap of the ref.
        """
        current = self.resolve(record.base_ref)
        if current == target or (current is not None and self.is_ancestor(target, current)):
            return  # merged already (a rerun after a crash), or the base moved past it
        if current != base_tip:
            raise MergeRefused(
                f"{record.base_branch} moved while the merge was prepared; approve again"
            )
        holders = [p for p, ref in self.worktrees().items() if ref == record.base_ref]
        main = self.root.resolve()
        if holders and holders != [main]:
            raise MergeRefused(
                f"{record.base_branch} is checked out in another worktree "
                f"({holders[0]}); check it out here or switch that worktree away"
            )
        if holders == [main]:
            busy = self._in_progress()
            if busy is not None:
                raise MergeRefused(f"the main checkout has {busy} in progress: finish it first")
            blocked = self.checkout_blockers(base_tip, target)
            if blocked:
                raise MergeRefused(
                    "uncommitted edits in the main checkout touch files the merge changes: "
                    + ", ".join(blocked[:10])
                    + ("…" if len(blocked) > 10 else "")
                    + " (commit or stash them, then approve again)",
                    blocked,
                )
            self.git.run("merge", "--ff-only", "-q", "--no-verify", target)
        else:
            self.git.run(
                "update-ref",
                "-m",
                f"baton: merge {record.branch}",
                record.base_ref,
                target,
                base_tip,
            )

    def is_merged(self, record: WorktreeRecord) -> bool:
        """The base holds the branch's work (the merge commit, or the head itself)."""
        base = self.resolve(record.base_ref)
        if base is None:
            return False
        target = record.merge_commit or record.head_commit
        return target is not None and self.is_ancestor(target, base)

    # ------------------------------------------------------------ salvage

    def save(self, ref: str, commit: str) -> str:
        """``ref`` names ``commit``: created, or moved forward; the ref written (a rerun is a
        no-op).

        Every write is a compare-and-set of the ref against the value read. A ref that
        names work ``commit`` does not contain is never moved: the next free
        ``<ref>-2``, ``<ref>-3``… takes ``commit`` instead (nothing saved is ever lost)."""
        for n in range(1, MAX_SAVE_NAMES + 1):
            name = ref if n == 1 else f"{ref}-{n}"
            for _ in range(CAS_ATTEMPTS):
                current = self.resolve(name)
                if current == commit:
                    return name
                if current is not None and not self.is_ancestor(current, commit):
                    break  # other work: never moved, the next name is tried
                moved = self.git.run(
                    "update-ref", "-m", "baton: save", name, commit, current or "", check=False
                )
                if moved.returncode == 0:
                    return name
            else:
                raise GitFailed(("update-ref",), 1, f"{name} keeps moving while it is saved")
        raise GitFailed(("update-ref",), 1, f"{ref} and its next {MAX_SAVE_NAMES} names are taken")

    def remove(
        self,
        record: WorktreeRecord,
        *,
        expected: str | None,
        delete_branch: bool,
        worktree: bool = True,
    ) -> tuple[Kept, ...]:
        """The worktree folder (and the branch) gone, as far as they hold nothing newer than
        ``expected``: the head the merge or the salvage was decided on. Newer work is kept
        (returned, never deleted): the decision was not made on it.

        The worktree: what it holds uncommitted is committed first (onto the branch it
        has checked out), a head of its own that no branch holds is saved under
        :func:`~baton.worktrees.naming.kept_ref`, then git's own clean-only ``worktree
        remove`` runs (a file written meanwhile refuses it: committed, tried again).
        The branch: ``update-ref -d`` against the value read, only when that value is in
        ``expected``; a branch that moved past it (a holder's push, an agent's commit) stays.

        ``worktree=False``: the tree's worktree is not this checkout's (it lives on a
        worker host, which removes its own copy): only the branch goes."""
        kept: list[Kept] = []
        path = record.worktree
        if worktree:
            self.git.run("worktree", "prune")  # a folder deleted by hand is forgotten first
            if path.resolve() in self.worktrees():
                saved = self._empty_worktree(record, expected)
                if saved is not None:
                    kept.append(saved)
            elif path.exists():  # a folder git no longer knows (its ``.git`` file gone)
                saved = self._save_folder(record, expected)
                if saved is not None:
                    kept.append(saved)
                shutil.rmtree(path)
        ref = f"refs/heads/{record.branch}"
        if delete_branch:
            for _ in range(CAS_ATTEMPTS):
                current = self.resolve(ref)
                if current is None:
                    break
                if expected is None or not self.is_ancestor(current, expected):
                    kept.append(Kept(ref, current))  # it moved past what was decided on
                    break
                if self.git.ok("update-ref", "-m", "baton: remove", "-d", ref, current):
                    break
            else:
                raise GitFailed(("update-ref", "-d"), 1, f"{ref} keeps moving while it is removed")
        return tuple(kept)

    def _empty_worktree(self, record: WorktreeRecord, expected: str | None) -> Kept | None:
        """The registered worktree removed once everything in it is in a ref; what its own
        head holds beyond ``expected`` and every branch, saved under the kept ref."""
        path = record.worktree
        saved: Kept | None = None
        for _ in range(CAS_ATTEMPTS):
            head = self.checkpoint(path, LEFTOVER_MESSAGE.format(task=record.root_task))
            on = self.inside(path).run("symbolic-ref", "-q", "HEAD", check=False).stdout
            if not on.strip() and head != expected and not self._on_a_branch(head):
                saved = Kept(self.save(kept_ref(record.root_task), head), head)
            if self.git.ok("worktree", "remove", str(path)):  # git refuses a dirty tree
                return saved
        if self.dirty(path):
            raise GitFailed(
                ("worktree", "remove"),
                1,
                f"{path} is still being written: its turns must end before it is removed",
            )
        # Clean, committed and saved, yet refused (a submodule, a lock): nothing is lost.
        self.git.run("worktree", "remove", "--force", "--force", str(path))
        return saved

    def _save_folder(self, record: WorktreeRecord, expected: str | None) -> Kept | None:
        """What a folder that is no worktree any more holds, as a commit on ``expected``
        saved under the kept ref; None when it holds exactly ``expected``'s files."""
        if not any(p.is_file() or p.is_symlink() for p in record.worktree.rglob("*")):
            return None
        with tempfile.TemporaryDirectory() as scratch:
            index = {"GIT_INDEX_FILE": str(Path(scratch) / "index")}
            folder = f"--work-tree={record.worktree}"
            self.git.run(folder, "add", "-A", "--", ".", env=index)
            tree = self.git.run("write-tree", env=index).stdout.decode().strip()
        if expected is not None and tree == self.git.text("rev-parse", f"{expected}^{{tree}}"):
            return None
        parents = ["-p", expected] if expected is not None else []
        message = LEFTOVER_MESSAGE.format(task=record.root_task)
        out = self.git.run("commit-tree", tree, *parents, "-m", message, env=BATON_IDENTITY)
        commit = out.stdout.decode().strip()
        return Kept(self.save(kept_ref(record.root_task), commit), commit)

    def _on_a_branch(self, commit: str) -> bool:
        return bool(self.git.text("branch", "--format=%(refname)", "--contains", commit))

    def restore(self, salvage_ref: str, branch: str) -> str:
        """A branch at the salvaged head (refused if the branch exists elsewhere)."""
        commit = self.resolve(salvage_ref)
        if commit is None:
            raise GitFailed(("restore",), 1, f"nothing is saved under {salvage_ref}")
        ref = f"refs/heads/{branch}"
        existing = self.resolve(ref)
        if existing is not None and existing != commit:
            raise GitFailed(("restore",), 1, f"the branch {branch} exists and points elsewhere")
        if existing is None:
            self.git.run("update-ref", ref, commit, "")  # "": it must not exist yet
        return commit
