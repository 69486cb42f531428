"""Task trees on their own branches: the team loop's keeper of :mod:`baton.worktrees`.

Every git step of a tree's life is bracketed by record moves of its ``team_worktrees``
row (:data:`~baton.worktrees.states.WORKTREE`), each committed with its
``team.worktree.changed`` event: the intent before the step, the result after. The
git work between two moves is idempotent, so recovery (:meth:`Workspaces.recover`)
asks git what is true and finishes or undoes it (:func:`~baton.worktrees.recovery.after_crash`).

One lock per tree: a checkpoint, a merge and a salvage of one tree never overlap (git's
index lock would refuse the second anyway); git runs in worker threads.

With ``[team] isolation = "none"``, or outside a git repository, :attr:`enabled` is
False and every agent works in the project as before.

On a cluster (:attr:`remote`: ``Isolation.remote``) a tree's worktree lives on the worker
host that holds the role (:mod:`baton.cluster.tree_copy`); this checkout keeps only the
branch. :meth:`prepare` then makes the branch alone, a checkpoint records the head the
holder pushed (it commits nothing here), and no step makes, commits in or removes a
worktree here; the review, the preflight, the merge and the salvage read branch refs as
on one machine.

Length: each git step between the two record moves that bracket it; split, a step
would be read apart from the moves that make it crash-safe.
"""

from __future__ import annotations

import asyncio
import dataclasses
import logging
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from baton import crashpoints
from baton.errors import BatonError
from baton.events.model import TeamWorktreeChanged
from baton.store import team_sql
from baton.store.journal import Journal
from baton.store.store import Store
from baton.store.tx import StoreConflict, Tx
from baton.team.records import TaskRecord
from baton.team.states import TaskState
from baton.team_config import Isolation
from baton.worktrees.git import GitError
from baton.worktrees.model import WorktreeRecord
from baton.worktrees.naming import branch_name, salvage_ref, tree_label
from baton.worktrees.recovery import AfterCrash, GitFacts, after_crash, salvage_head
from baton.worktrees.repo import MergeRefused, Preflight, Repository, TreeChange
from baton.worktrees.states import WORKTREE, WorktreeEvent, WorktreeState

__all__ = ["WorkspaceUnavailable", "Workspaces", "worktrees_dir"]

log = logging.getLogger("baton.team.workspaces")

LIVE = (WorktreeState.CREATING, WorktreeState.LIVE, WorktreeState.MERGING)


class WorkspaceUnavailable(BatonError):
    """A tree cannot have its own branch now (no commit to branch from, a detached HEAD…)."""


def worktrees_dir(project: Path, isolation: Isolation) -> Path:
    return project / (isolation.worktrees_dir or ".baton/worktrees")


@dataclass(kw_only=True, eq=False)
class Workspaces:
    repo: Repository | None
    isolation: Isolation
    project: Path
    store: Store
    journal: Journal
    now: Callable[[], str]
    _locks: dict[str, asyncio.Lock] = field(default_factory=dict, init=False)
    _excluded: set[Path] = field(default_factory=set, init=False)
    """Worktree folders whose ``info/exclude`` line this process wrote or found."""
    on_removed: Callable[[Path], object] | None = field(default=None, init=False)
    """Told each worktree folder removed (the role sessions' private roots go with it);
    a failure is logged, never stops the merge or the salvage."""

    @classmethod
    def open(
        cls,
        project: Path,
        isolation: Isolation,
        *,
        store: Store,
        journal: Journal,
        now: Callable[[], str],
    ) -> Workspaces:
        """Isolation as configured, where the project is a git repository."""
        repo = None
        if isolation.mode == "worktree":
            try:
                repo = Repository.find(project)
            except GitError as exc:
                log.warning("no worktree isolation: %s", exc)
        return cls(
            repo=repo, isolation=isolation, project=project, store=store, journal=journal, now=now
        )

    @property
    def enabled(self) -> bool:
        return self.repo is not None

    @property
    def remote(self) -> bool:
        """Trees' worktrees live on worker hosts; this checkout keeps their branches."""
        return self.isolation.remote

    def _repo(self) -> Repository:
        assert self.repo is not None, "worktree isolation is off"
        return self.repo

    def _lock(self, root: str) -> asyncio.Lock:
        lock = self._locks.get(root)
        if lock is None:
            lock = self._locks[root] = asyncio.Lock()
        return lock

    # ----------------------------------------------------------------- reads

    def get(self, root: str) -> WorktreeRecord | None:
        """The tree's record (blocking read: the store's reader)."""
        row = self.store.read_tx(lambda tx: team_sql.WORKTREES.get(tx, root))
        return WorktreeRecord.from_row(row) if row is not None else None

    def cwd(self, record: WorktreeRecord) -> Path:
        """Where a tree's agents work: its worktree, at the project's place in the
        repository (a project in a subfolder of a bigger repository stays a subfolder)."""
        assert self.repo is not None
        try:
            inside = self.project.resolve().relative_to(self.repo.root.resolve())
        except ValueError:
            inside = Path()
        return record.worktree / inside

    def protected(self) -> tuple[str, ...]:
        """Paths no task branch may change and still merge: FCoP's own files and baton's
        state (agents file through baton's tools; a change there is a stray or hostile
        write, never work), relative to the repository's top."""
        assert self.repo is not None
        try:
            inside = self.project.resolve().relative_to(self.repo.root.resolve())
        except ValueError:
            return ()
        prefix = "" if inside == Path() else inside.as_posix() + "/"
        return (f"{prefix}fcop/", f"{prefix}.baton/")

    def cwd_of(self, root: str | None) -> Path | None:
        """The working folder of the tree ``root`` while it is live (blocking read)."""
        if root is None or self.repo is None:
            return None
        record = self.get(root)
        if record is None or record.state is not WorktreeState.LIVE:
            return None
        return self.cwd(record)

    def all(self) -> list[WorktreeRecord]:
        rows = self.store.read_tx(lambda tx: team_sql.WORKTREES.where(tx, "", ()))
        return [WorktreeRecord.from_row(r) for r in rows]

    # ----------------------------------------------------------------- moves

    async def _move(
        self,
        before: WorktreeRecord | None,
        after: WorktreeRecord,
        event: WorktreeEvent,
    ) -> WorktreeRecord:
        state = WORKTREE.next(before.state if before else None, event)
        after = dataclasses.replace(
            after,
            state=state,
            updated_at=self.now(),
            version=(before.version + 1) if before else 1,
        )
        payload = TeamWorktreeChanged(
            root_task=after.root_task,
            branch=after.branch,
            from_state=before.state.value if before else None,
            to_state=state.value,
            event=event.value,
            head_commit=after.head_commit,
            merge_commit=after.merge_commit,
            salvage_ref=after.salvage_ref,
            reason=after.reason,
        )

        def write(tx: Tx) -> None:
            if before is None:
                team_sql.WORKTREES.insert(tx, after.row())
                return
            changed = team_sql.WORKTREES.update(
                tx, after.root_task, after.row(), guard={"version": before.version}
            )
            if changed != 1:
                raise StoreConflict(f"the worktree of {after.root_task} changed since it was read")

        await self.journal.commit([payload], write)
        return after

    # -------------------------------------------------------------- prepare

    async def prepare(self, root: str, subject: str) -> WorktreeRecord:
        """The tree's branch and worktree, made on first dispatch (idempotent)."""
        async with self._lock(root):
            record = await asyncio.to_thread(self.get, root)
            if record is None:
                record = await self._plan(root, subject)
            if record.state is WorktreeState.CREATING:
                planned = record
                await self._git(self._create(planned), "worktree.create")
                record = await self._move(planned, planned, WorktreeEvent.CREATED)
            return record

    def _create(self, record: WorktreeRecord) -> Callable[[Repository], object]:
        if self.remote:
            return lambda repo: repo.create_branch(record)
        return lambda repo: repo.create(record)

    async def _plan(self, root: str, subject: str) -> WorktreeRecord:
        repo = self._repo()
        base_ref: str | None
        if self.isolation.base:
            base_ref = configured = f"refs/heads/{self.isolation.base}"
            base_commit = await asyncio.to_thread(repo.resolve, configured)
        else:  # the branch checked out now, and its commit, in one look
            base_ref, base_commit = await asyncio.to_thread(repo.checked_out_branch) or (None, None)
        if base_ref is None:
            unborn = await asyncio.to_thread(repo.resolve, "HEAD") is None
            raise WorkspaceUnavailable(
                "the repository has no commit yet to branch from: commit once (e.g. "
                "`git add -A && git commit -m 'baton init'`), or set [team] isolation = "
                '"none" in baton.toml'
                if unborn
                else "the main checkout is on a detached HEAD: check out a branch, or set "
                '[team] base = "main" in baton.toml'
            )
        if base_commit is None:
            raise WorkspaceUnavailable(
                f"the base branch {base_ref.removeprefix('refs/heads/')} does not exist: "
                "create it, or change [team] base in baton.toml"
            )
        directory = worktrees_dir(self.project, self.isolation)
        if directory not in self._excluded:
            await asyncio.to_thread(repo.exclude, directory)
            self._excluded.add(directory)
        now = self.now()
        planned = WorktreeRecord(
            root_task=root,
            state=WorktreeState.CREATING,
            branch=branch_name(root, subject),
            path=str((directory / tree_label(root, subject)).resolve()),
            base_ref=base_ref,
            base_commit=base_commit,
            created_at=now,
            updated_at=now,
            head_commit=base_commit,
            merge_rule=self.isolation.merge,
        )
        return await self._move(None, planned, WorktreeEvent.CREATE)

    async def _git(self, step: Callable[[Repository], object], point: str) -> None:
        """One git step, with crash points before and after it (the crash harness kills
        ``baton up`` at either: the step not yet done, or done and not yet recorded)."""
        crashpoints.durable_write(f"{point}.before")
        await asyncio.to_thread(step, self._repo())
        crashpoints.durable_write(f"{point}.after")

    # ----------------------------------------------------------- checkpoint

    async def checkpoint(self, root: str, message: str) -> WorktreeRecord | None:
        """Commit what the tree's worktree holds to its branch; the record's head follows."""
        async with self._lock(root):
            record = await asyncio.to_thread(self.get, root)
            if record is None or record.state is not WorktreeState.LIVE:
                return record
            return await self._checkpoint(record, message)

    async def _checkpoint(self, record: WorktreeRecord, message: str) -> WorktreeRecord:
        crashpoints.durable_write("worktree.checkpoint.before")
        head: str | None
        if self.remote:  # the holder committed and pushed: the record follows the branch
            head = await asyncio.to_thread(self._repo().resolve, f"refs/heads/{record.branch}")
        else:
            head = await asyncio.to_thread(self._repo().checkpoint, record.worktree, message)
        crashpoints.durable_write("worktree.checkpoint.after")
        if head is None or head == record.head_commit:
            return record
        return await self._move(
            record, dataclasses.replace(record, head_commit=head), WorktreeEvent.CHECKPOINT
        )

    # --------------------------------------------------------------- review

    async def change(self, root: str) -> TreeChange | None:
        record = await asyncio.to_thread(self.get, root)
        if record is None or self.repo is None:
            return None
        return await asyncio.to_thread(self.repo.change, record)

    async def preflight(self, root: str) -> Preflight | None:
        record = await asyncio.to_thread(self.get, root)
        if record is None or self.repo is None or record.state is not WorktreeState.LIVE:
            return None
        others = [r for r in await asyncio.to_thread(self.all) if r.state is WorktreeState.LIVE]
        return await asyncio.to_thread(self.repo.preflight, record, others)

    # ---------------------------------------------------------------- merge

    async def merge(self, root: str, message: str) -> WorktreeRecord:
        """Merge the tree into its base by ``[team] merge``, then remove its worktree.

        Raises :class:`MergeRefused` (the record back to ``live``, with the reason) when
        the base cannot take it now; merged already is fine (a rerun after a crash)."""
        async with self._lock(root):
            record = await asyncio.to_thread(self.get, root)
            if record is None:
                raise MergeRefused(f"{root} has no branch of its own")
            if record.state is WorktreeState.LIVE:
                record = await self._checkpoint(record, f"baton: last checkpoint of {root}")
                repo = self._repo()
                stray = await asyncio.to_thread(repo.touched, record, self.protected())
                if stray:
                    raise MergeRefused(
                        f"the branch changes baton's own files ({', '.join(stray[:5])}"
                        + ("…" if len(stray) > 5 else "")
                        + "): agents file tasks and reports through baton's tools, never by "
                        "writing them; send it back to undo those changes",
                        stray,
                    )
                rule = record.merge_rule or self.isolation.merge
                base_tip, target = await asyncio.to_thread(repo.merge_commit, record, rule, message)
                merging = await self._move(
                    record,
                    dataclasses.replace(record, merge_commit=target, merge_rule=rule, reason=None),
                    WorktreeEvent.MERGE,
                )
                try:
                    await self._git(
                        lambda r: r.apply_merge(merging, base_tip, target), "worktree.merge"
                    )
                except MergeRefused as exc:
                    await self._move(
                        merging,
                        dataclasses.replace(merging, merge_commit=None, reason=exc.reason),
                        WorktreeEvent.ABORT,
                    )
                    raise
                record = await self._move(merging, merging, WorktreeEvent.MERGED)
            if record.state is WorktreeState.MERGING:  # a rerun after a crash mid-merge
                record = await self._after_crash(record)
                if record.state is WorktreeState.LIVE:
                    raise MergeRefused("the merge was interrupted; approve again to retry it")
            if record.state is WorktreeState.MERGED:
                record = await self._remove(record)
            return record

    async def _remove(self, record: WorktreeRecord) -> WorktreeRecord:
        await self._git(
            lambda r: r.remove(record, delete_branch=True, worktree=not self.remote),
            "worktree.remove",
        )
        moved = await self._move(record, record, WorktreeEvent.REMOVE)
        await self._forget(record)
        return moved

    async def _forget(self, record: WorktreeRecord) -> None:
        if self.on_removed is None:
            return
        try:
            await asyncio.to_thread(self.on_removed, self.cwd(record))
        except Exception:  # logged: leftover private roots must not stop a merge
            log.exception("could not remove the private roots of %s", record.branch)

    # -------------------------------------------------------------- salvage

    async def salvage(self, root: str, reason: str) -> WorktreeRecord | None:
        """Drop the tree's worktree with its exact head kept under ``refs/baton/salvage/``."""
        async with self._lock(root):
            record = await asyncio.to_thread(self.get, root)
            if record is None:
                return None
            return await self._salvage(record, reason)

    async def _salvage(self, record: WorktreeRecord, reason: str) -> WorktreeRecord:
        if record.state in (WorktreeState.CREATING, WorktreeState.LIVE):
            record = await self._move(
                record,
                dataclasses.replace(
                    record, salvage_ref=salvage_ref(record.root_task), reason=reason
                ),
                WorktreeEvent.SALVAGE,
            )
        if record.state is WorktreeState.SALVAGING:
            record = await self._finish_salvage(record)
        return record

    async def _finish_salvage(self, record: WorktreeRecord) -> WorktreeRecord:
        repo = self._repo()
        ref = record.salvage_ref or salvage_ref(record.root_task)
        checkpointed = None
        if not self.remote and await asyncio.to_thread(
            lambda: record.worktree.exists() and record.worktree.resolve() in repo.worktrees()
        ):
            crashpoints.durable_write("worktree.salvage.checkpoint.before")
            checkpointed = await asyncio.to_thread(
                repo.checkpoint,
                record.worktree,
                f"baton: salvage of {record.root_task} (uncommitted work when it was dropped)",
            )
            crashpoints.durable_write("worktree.salvage.checkpoint.after")
        head = salvage_head(
            record,
            checkpointed=checkpointed,
            branch_head=await asyncio.to_thread(repo.resolve, f"refs/heads/{record.branch}"),
            saved=await asyncio.to_thread(repo.resolve, ref),
        )
        if head is not None:
            await self._git(lambda r: r.save(ref, head), "worktree.salvage.save")
        await self._git(
            lambda r: r.remove(record, delete_branch=True, worktree=not self.remote),
            "worktree.salvage.remove",
        )
        moved = await self._move(
            record,
            dataclasses.replace(record, head_commit=head, salvage_ref=ref),
            WorktreeEvent.SALVAGED,
        )
        await self._forget(record)
        return moved

    async def restore(self, root: str, branch: str | None = None) -> tuple[WorktreeRecord, str]:
        """A salvaged tree back as a branch (its old name unless ``branch`` says another)."""
        async with self._lock(root):
            record = await asyncio.to_thread(self.get, root)
            if record is None or record.state not in (
                WorktreeState.SALVAGED,
                WorktreeState.RESTORED,
            ):
                raise WorkspaceUnavailable(f"{root} has no salvaged work to restore")
            name = branch or record.branch
            ref = record.salvage_ref or salvage_ref(root)
            await asyncio.to_thread(self._repo().restore, ref, name)
            if record.state is WorktreeState.SALVAGED:
                record = await self._move(
                    record, dataclasses.replace(record, branch=name), WorktreeEvent.RESTORE
                )
            return record, name

    # -------------------------------------------------------------- recover

    async def recover(self) -> list[tuple[WorktreeRecord, AfterCrash]]:
        """Finish or undo what a crash interrupted; checkpoint leftovers in live trees.

        Runs before any agent starts (nothing else touches the worktrees then)."""
        if self.repo is None:
            return []
        done = []
        for record in await asyncio.to_thread(self.all):
            if record.state in (WorktreeState.REMOVED, WorktreeState.RESTORED):
                continue
            async with self._lock(record.root_task):
                current = await asyncio.to_thread(self.get, record.root_task)
                if current is None:
                    continue
                action = await asyncio.to_thread(self._after_crash_action, current)
                try:
                    await self._after_crash(current, action)
                except GitError:
                    log.exception("recovering the worktree of %s failed", current.root_task)
                    continue
                done.append((current, action))
        return done

    def _after_crash_action(self, record: WorktreeRecord) -> AfterCrash:
        repo = self._repo()
        branch_head = repo.resolve(f"refs/heads/{record.branch}")
        # A remote tree's worktree is the worker's: its branch is all there is here.
        registered = self.remote or (
            record.worktree.exists()
            and repo.worktrees().get(record.worktree.resolve()) == f"refs/heads/{record.branch}"
        )
        facts = GitFacts(
            branch_head=branch_head,
            registered=registered,
            dirty=not self.remote and registered and repo.dirty(record.worktree),
            base_holds=repo.is_merged(record),
            salvaged_head=repo.resolve(record.salvage_ref) if record.salvage_ref else None,
        )
        return after_crash(record, facts, dropped=self._dropped(record.root_task) is not None)

    def _dropped(self, root: str) -> str | None:
        """Why the tree's root TASK was dropped, if it was (blocking read): a drop cut
        short after the TASKs were dropped and before the salvage began is finished."""
        row = self.store.read_tx(lambda tx: team_sql.TASKS.get(tx, root))
        task = TaskRecord.from_row(row) if row is not None else None
        if task is None or task.state is not TaskState.DROPPED:
            return None
        return task.reason or "its task tree was dropped"

    async def _after_crash(
        self, record: WorktreeRecord, action: AfterCrash | None = None
    ) -> WorktreeRecord:
        if action is None:
            action = await asyncio.to_thread(self._after_crash_action, record)
        if action is AfterCrash.CREATE:
            await self._git(self._create(record), "worktree.create")
            if record.state is WorktreeState.CREATING:
                record = await self._move(record, record, WorktreeEvent.CREATED)
        elif action is AfterCrash.CHECKPOINT:
            record = await self._checkpoint(
                record, f"baton: checkpoint of {record.root_task} after baton stopped"
            )
        elif action is AfterCrash.MARK_MERGED:
            record = await self._move(record, record, WorktreeEvent.MERGED)
            record = await self._remove(record)
        elif action is AfterCrash.UNDO_MERGE:
            record = await self._move(
                record,
                dataclasses.replace(
                    record, merge_commit=None, reason="the merge was interrupted before it applied"
                ),
                WorktreeEvent.ABORT,
            )
        elif action is AfterCrash.REMOVE:
            record = await self._remove(record)
        elif action is AfterCrash.SALVAGE:
            reason = record.reason
            if record.state is not WorktreeState.SALVAGING:
                reason = await asyncio.to_thread(self._dropped, record.root_task)
            record = await self._salvage(record, reason or "its task tree was dropped")
        elif action is AfterCrash.LOST:
            log.warning("the branch %s of %s is gone", record.branch, record.root_task)
        return record
