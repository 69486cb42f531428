"""Issue 26 item 7: a task tree's worktree on the worker host, its branch pushed back fenced.

A real :class:`RoleHolder` over PostgreSQL (no Ray) with the fake agent process, on a
worker's clone of the coordinator's repository at another path; the coordinator's
:class:`Workspaces` in remote mode keeps only the branch. The holder's copy is made at the
pushed head, each turn ends committed and pushed under the epoch, a re-placed role
continues on the pushed head, a stale copy's late push moves nothing and loses nothing.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest

from baton.cluster.actor import RoleHolder
from baton.cluster.fencing import Placements
from baton.cluster.placement import FencedOut
from baton.cluster.tree_copy import TreeCopy, TreeSpec
from baton.events.sequencer import utc_now
from baton.runner.emitter import EventEmitter
from baton.team.contract import TurnResult
from baton.team.workspaces import Workspaces
from baton.team_config import Isolation
from baton.worktrees.repo import Repository
from baton.worktrees.states import WorktreeState
from baton.worktrees.travel import stale_ref
from tests.cluster.support import coordinator_run, holder_spec
from tests.support.pg_fixtures import pg_databases, pg_dsn
from tests.worktrees.conftest import sh

__all__ = ["pg_databases", "pg_dsn"]

LEASE_S = 30.0
ROOT = "TASK-20261206-feed0001"


class World:
    """The coordinator's repository and store, and worker clones of the repository."""

    def __init__(self, dsn: str, tmp: Path) -> None:
        from baton.store.pg import PgStore

        self.dsn, self.tmp = dsn, tmp
        self.store = PgStore.open(dsn)
        self.emitter: EventEmitter = coordinator_run(self.store)
        self.placements = Placements(self.store, self.emitter)
        self.holders: list[RoleHolder] = []
        project = tmp / "coordinator" / "project"
        project.mkdir(parents=True)
        sh(project, "init", "-q", "-b", "main")
        (project / "app.py").write_text("print('hello')\n")
        sh(project, "add", "-A")
        sh(project, "commit", "-qm", "first")
        found = Repository.find(project)
        assert found is not None
        self.repo = found
        self.workspaces = Workspaces(
            repo=found,
            isolation=Isolation(remote=True),
            project=project,
            store=self.store,
            journal=self.emitter,
            now=utc_now,
        )

    def clone(self, host: str) -> Path:
        where = self.tmp / host / "project"  # the project's path differs per host here
        where.parent.mkdir(parents=True)
        sh(where.parent, "clone", "-q", str(self.repo.root), str(where))
        return where

    async def tree(self) -> TreeSpec:
        record = await self.workspaces.prepare(ROOT, "Add a feature")
        return TreeSpec(
            task=ROOT,
            branch=record.branch,
            head=record.head_commit or record.base_commit,
            path=record.worktree.relative_to(self.repo.root.resolve()).as_posix(),
            remote=str(self.repo.root),
        )

    async def holder(
        self, slot: str, scenario: str, checkout: Path, tree: TreeSpec, host: str
    ) -> RoleHolder:
        placed = await self.placements.place(slot, host, lease_s=LEASE_S)
        spec = holder_spec(
            self.dsn, slot, scenario, self.tmp, parent_run=self.emitter.run_id, lease_s=LEASE_S
        )
        spec = replace(
            spec,
            epoch=placed.epoch,
            host=host,
            workspace=str(checkout),
            tree=tree,
            permissions="all",
        )
        holder = RoleHolder(spec)
        self.holders.append(holder)
        await holder.start()
        return holder

    def branch(self, tree: TreeSpec) -> str | None:
        return self.repo.resolve(f"refs/heads/{tree.branch}")

    def events(self, run_id: str) -> list[Any]:
        return list(self.store.iter_events(run_id))


@pytest.fixture
async def world(pg_dsn: str, tmp_path: Path) -> AsyncIterator[World]:
    w = World(pg_dsn, tmp_path)
    try:
        yield w
    finally:
        for holder in w.holders:
            await holder.close()
        await w.store.aclose()


def copy_of(holder: RoleHolder) -> Path:
    info = holder._tree  # the copy the agent works in (its cwd)
    assert info is not None
    return info.worktree


async def test_a_turn_on_a_worker_is_pushed_reviewed_and_merged_on_the_coordinator(
    world: World,
) -> None:
    tree = await world.tree()
    assert world.repo.worktrees().keys() == {world.repo.root.resolve()}  # a branch only
    worker = world.clone("worker-a")
    holder = await world.holder("dev", "fs", worker, tree, "worker-a")
    copy = copy_of(holder)
    assert copy.parent == worker / ".baton" / "worktrees" and copy.name.endswith("@dev")
    result = await asyncio.wait_for(holder.prompt("write it"), 60)
    assert result.status == "completed", result

    head = world.branch(tree)
    assert head is not None and head != tree.head  # the turn's checkpoint, pushed
    assert sh(world.repo.root, "show", f"{tree.branch}:fake-fs.txt") == "written by the fake agent"
    assert sh(world.repo.root, "log", "-1", "--format=%an|%s", tree.branch).startswith(
        f"baton|baton: {ROOT} "
    )
    assert not (world.repo.root / "fake-fs.txt").exists()  # the coordinator's checkout untouched

    record = await world.workspaces.checkpoint(ROOT, "after the turn")
    assert record is not None and record.head_commit == head  # recorded, nothing committed here
    preflight = await world.workspaces.preflight(ROOT)
    assert preflight is not None and preflight.clean
    change = await world.workspaces.change(ROOT)
    assert change is not None and [f.path for f in change.files] == ["fake-fs.txt"]
    merged = await world.workspaces.merge(ROOT, "baton: merge the feature")
    assert merged.state is WorktreeState.REMOVED
    assert (world.repo.root / "fake-fs.txt").read_text() == "written by the fake agent\n"
    assert world.branch(tree) is None
    assert world.repo.worktrees().keys() == {world.repo.root.resolve()}


async def test_a_re_placed_role_continues_on_the_pushed_head_and_the_stale_push_moves_nothing(
    world: World,
) -> None:
    tree = await world.tree()
    first_host, second_host = world.clone("worker-a"), world.clone("worker-b")
    first = await world.holder("dev", "fs", first_host, tree, "worker-a")
    assert (await asyncio.wait_for(first.prompt("write it"), 60)).status == "completed"
    pushed = world.branch(tree)

    # The slot moves on (its host looked dead); epoch 2 starts on another host, from the
    # pushed head: it sees epoch 1's file, never the base.
    await world.placements.fail("dev")
    second = await world.holder("dev", "ok", second_host, replace(tree), "worker-b")
    assert second.spec.epoch == 2
    assert (copy_of(second) / "fake-fs.txt").exists()
    assert sh(copy_of(second), "rev-parse", "HEAD") == pushed

    # Epoch 1 was not dead: its agent left a file and its turn ends. The store refuses the
    # push; the commit stays on its host under the stale ref; the branch does not move.
    (copy_of(first) / "late.txt").write_text("from the stale copy\n")
    first_copy = copy_of(first)
    assert first._tree is not None
    with pytest.raises(FencedOut):
        await first._publish(TurnResult("completed"))
    assert world.branch(tree) == pushed
    saved = stale_ref(ROOT, "dev", 1)
    assert sh(first_copy, "show", f"{saved}:late.txt") == "from the stale copy"
    fenced = [e.payload for e in world.events(first.run_id) if e.type == "cluster.fenced_out"]
    assert [f.act for f in fenced] == [f"git push {tree.branch}"]
    assert (await first.info())["stopped"].startswith("fenced out")

    # Epoch 2 goes on from the pushed head and pushes.
    (copy_of(second) / "more.txt").write_text("epoch 2\n")
    assert (await asyncio.wait_for(second.prompt("go on"), 60)).status == "completed"
    head = world.branch(tree)
    assert head != pushed and pushed is not None and world.repo.is_ancestor(pushed, head or "")
    assert sh(world.repo.root, "show", f"{tree.branch}:more.txt") == "epoch 2"


async def test_a_push_from_a_head_the_branch_moved_past_is_refused_by_the_lease(
    world: World,
) -> None:
    """Two roles of one tree on two hosts: the store check passes for both (each holds its
    own slot), the branch's compare-and-set refuses the second, which loses nothing."""
    tree = await world.tree()
    dev = await world.holder("dev", "ok", world.clone("worker-a"), tree, "worker-a")
    qa = await world.holder("qa", "ok", world.clone("worker-b"), tree, "worker-b")
    (copy_of(dev) / "dev.txt").write_text("dev\n")
    (copy_of(qa) / "qa.txt").write_text("qa\n")
    assert (await asyncio.wait_for(dev.prompt("one"), 60)).status == "completed"
    moved = world.branch(tree)
    with pytest.raises(FencedOut, match="moved past"):
        await asyncio.wait_for(qa.prompt("two"), 60)
    assert world.branch(tree) == moved
    assert qa._tree is not None
    assert sh(copy_of(qa), "show", f"{stale_ref(ROOT, 'qa', qa.spec.epoch)}:qa.txt") == "qa"
    fenced = [e.payload for e in world.events(qa.run_id) if e.type == "cluster.fenced_out"]
    assert [f.act for f in fenced] == [f"git push {tree.branch}"]


async def test_a_crash_between_the_commit_and_the_push_loses_nothing(world: World) -> None:
    tree = await world.tree()
    worker = world.clone("worker-a")
    before = TreeCopy.open(worker, tree, slot="dev", epoch=1)
    (before.worktree / "work.txt").write_text("committed, never pushed\n")
    before.commit("baton: a turn whose push never happened")  # then the host died

    await world.placements.place("dev", "worker-a", lease_s=LEASE_S)  # epoch 1, taken over
    await world.placements.fail("dev")
    after = await world.holder("dev", "ok", worker, tree, "worker-a")
    assert after.spec.epoch == 2
    copy = copy_of(after)
    assert copy == before.worktree  # the same folder on the same host
    assert sh(copy, "rev-parse", "HEAD") == tree.head and not (copy / "work.txt").exists()
    assert (
        sh(worker, "show", f"{stale_ref(ROOT, 'dev', 2, leftover=True)}:work.txt")
        == "committed, never pushed"
    )
    assert world.branch(tree) == tree.head


async def test_the_copy_goes_when_the_holder_is_released_with_its_work_pushed(
    world: World,
) -> None:
    tree = await world.tree()
    worker = world.clone("worker-a")
    holder = await world.holder("dev", "fs", worker, tree, "worker-a")
    assert (await asyncio.wait_for(holder.prompt("write it"), 60)).status == "completed"
    copy = copy_of(holder)
    await holder.close()
    assert not copy.exists()


async def test_the_factory_hands_the_holder_the_tree_never_a_coordinator_path(
    world: World,
) -> None:
    from baton.cluster.config import ClusterConfig
    from baton.cluster.team_factory import _tree_spec
    from baton.errors import BatonError

    tree = await world.tree()
    record = world.workspaces.get(ROOT)
    assert record is not None
    cwd = world.workspaces.cwd(record)  # what the team loop hands the factory
    cluster = ClusterConfig("10.0.0.5:6379", "dbname=baton")
    assert await _tree_spec(world.store, world.repo.root, cwd, cluster) == tree
    told = replace(cluster, git_remote="ssh://10.0.0.5/srv/project")
    spec = await _tree_spec(world.store, world.repo.root, cwd, told)
    assert spec.remote == "ssh://10.0.0.5/srv/project" and spec.path == tree.path
    with pytest.raises(BatonError, match="no live task tree"):
        await _tree_spec(world.store, world.repo.root, world.tmp / "elsewhere", cluster)


async def test_a_role_starts_its_turn_on_what_another_role_of_the_tree_pushed(
    world: World,
) -> None:
    tree = await world.tree()
    dev = await world.holder("dev", "ok", world.clone("worker-a"), tree, "worker-a")
    qa = await world.holder("qa", "fs", world.clone("worker-b"), tree, "worker-b")
    (copy_of(dev) / "dev.txt").write_text("dev\n")
    assert (await asyncio.wait_for(dev.prompt("one"), 60)).status == "completed"
    assert not (copy_of(qa) / "dev.txt").exists()  # QA's copy opened before DEV pushed
    assert (await asyncio.wait_for(qa.prompt("two"), 60)).status == "completed"
    assert (copy_of(qa) / "dev.txt").exists()  # moved to DEV's head before its turn
    assert sh(world.repo.root, "show", f"{tree.branch}:dev.txt") == "dev"
    assert sh(world.repo.root, "show", f"{tree.branch}:fake-fs.txt") == "written by the fake agent"


async def test_a_holders_push_between_the_merge_and_the_delete_survives_and_is_told(
    world: World, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The human approves while a role of the tree still has a turn running: its fenced
    push lands after the merge and before the branch is deleted. The delete is a
    compare-and-set on the merged head, so the branch stays with that commit, the record
    says ``kept`` and the human is told; the merged work alone reached the base."""
    tree = await world.tree()
    holder = await world.holder("dev", "fs", world.clone("worker-a"), tree, "worker-a")
    assert (await asyncio.wait_for(holder.prompt("write it"), 60)).status == "completed"
    approved = world.branch(tree)
    told: list[tuple[str, str]] = []

    async def tell(root: str, note: str) -> None:
        told.append((root, note))

    world.workspaces.on_kept = tell
    original = world.workspaces._git
    late: list[str] = []

    async def git_step(step: Any, point: str) -> Any:
        if point == "worktree.remove" and not late:  # the turn still running ends now
            (copy_of(holder) / "late.txt").write_text("after the approval\n")
            done = await asyncio.wait_for(holder.prompt("one more"), 60)
            assert done.status == "completed", done
            late.append(world.branch(tree) or "")
        return await original(step, point)

    monkeypatch.setattr(world.workspaces, "_git", git_step)
    merged = await world.workspaces.merge(ROOT, "baton: merge the feature")

    assert late and late[0] != approved  # the holder's push landed in the window
    assert world.branch(tree) == late[0], "the pushed commit was deleted with the branch"
    assert sh(world.repo.root, "show", f"{tree.branch}:late.txt") == "after the approval"
    assert (world.repo.root / "fake-fs.txt").exists()  # the approved work is merged
    assert not (world.repo.root / "late.txt").exists()  # the late push is not
    assert merged.state is WorktreeState.KEPT and merged.head_commit == approved
    assert merged.reason is not None and late[0][:10] in merged.reason
    assert told == [(ROOT, merged.reason)]
