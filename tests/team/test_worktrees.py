"""Issue 26: each task tree works on its own branch; the diff is what the human approves.

The team loop over fake sessions (acting through the real role tools), a real FCoP
workspace, a real store and a real git repository: the agent's files land only on the
tree's branch, the review carries the diff and the merge preflight, approving merges
into the base, a refused merge re-opens the review, conflicts show before a merge."""

from __future__ import annotations

import subprocess
from functools import partial
from pathlib import Path
from typing import Any

import pytest

from baton.fcop_port.port import FcopPort
from baton.fcop_port.records import CreatedTask
from baton.request_model.documents import ReviewRequest
from baton.requests.states import State
from baton.store.records import SessionRecord
from baton.team.loop import TeamLoop
from baton.team.role_sessions import forget_tree_roots, role_root
from baton.team.states import TaskState
from baton.worktrees.model import WorktreeRecord
from baton.worktrees.states import WorktreeState
from tests.coordination.fakes import Agent, runbook_agent
from tests.team.conftest import Team
from tests.team.test_loop import answer_review, records, review_request
from tests.worktrees.conftest import sh

TS = "2026-12-06T00:00:00.000Z"


def git_project(root: Path) -> None:
    """The team's project as a git repository with one commit on ``main``."""
    sh(root, "init", "-q", "-b", "main")
    (root / "app.py").write_text("print('hello')\n")
    (root / ".gitignore").write_text(".baton/\n")
    sh(root, "add", "app.py", ".gitignore")
    sh(root, "commit", "-qm", "first")


def writes(name: str, text: str):  # type: ignore[no-untyped-def]
    """A DEV agent that writes ``name`` in its working folder, then reports."""

    def script(agent: Agent, prompt: str) -> None:
        assert agent.cwd is not None, "an isolated tree's agent works in its worktree"
        (agent.cwd / name).write_text(text)
        runbook_agent(agent, prompt)

    return script


async def test_a_task_changes_files_only_on_its_branch_and_approval_merges_it(
    team: Team, port: FcopPort
) -> None:
    git_project(team.root)
    task = port.create_task(sender="ADMIN", recipient="DEV", subject="Add a feature", body="do it")
    factory = team.factory({"DEV": writes("feature.py", "x = 1\n")})
    await team.run_idle(team.loop(factory))

    assert not (team.root / "feature.py").exists()  # the main checkout was never written
    loop = team.loop(team.factory())
    record = loop.workspaces.get(task.task_id)
    assert record is not None and record.state is WorktreeState.LIVE
    assert factory.cwds == [("DEV", record.worktree)]
    assert sh(team.root, "show", f"{record.branch}:feature.py") == "x = 1"
    assert "baton" in sh(team.root, "log", "-1", "--format=%an %s", record.branch)
    assert records(team)[task.task_id].workspace == task.task_id

    request = await review_request(team, task.task_id)
    document = request.document
    assert isinstance(document, ReviewRequest) and document.changes is not None
    changes = document.changes
    assert [(f.status, f.path, f.added) for f in changes.files] == [("A", "feature.py", 1)]
    assert changes.diff is not None and "+x = 1" in changes.diff
    assert changes.base == "main" and changes.base_conflicts == ()
    assert "\nChanges: 1 file(s), +1 -0" in document.summary

    await answer_review(team, task.task_id, "approve", "ship it")
    await team.run_idle(team.loop(team.factory()))
    assert (team.root / "feature.py").read_text() == "x = 1\n"  # merged into main
    assert sh(team.root, "branch", "--show-current") == "main"
    after = loop.workspaces.get(task.task_id)
    assert after is not None and after.state is WorktreeState.REMOVED
    assert not after.worktree.exists()
    assert port.read_task(task.task_id).stage == "done"
    assert records(team)[task.task_id].state is TaskState.SETTLED
    assert (await review_request(team, task.task_id)).state is State.DELIVERED


async def test_two_trees_touching_one_file_show_the_conflict_before_either_merges(
    team: Team, port: FcopPort
) -> None:
    git_project(team.root)
    first = port.create_task(sender="ADMIN", recipient="DEV", subject="one", body="b")
    factory = team.factory({"DEV": writes("app.py", "print('one')\n")})
    await team.run_idle(team.loop(factory))
    second = port.create_task(sender="ADMIN", recipient="DEV", subject="two", body="b")
    factory = team.factory({"DEV": writes("app.py", "print('two')\n")})
    await team.run_idle(team.loop(factory))
    request = await review_request(team, second.task_id)
    document = request.document
    assert isinstance(document, ReviewRequest) and document.changes is not None
    [conflict] = document.changes.branch_conflicts
    assert conflict.paths == ("app.py",) and conflict.branch.endswith("-one")
    assert document.changes.base_conflicts == ()  # nothing merged yet
    assert "overlaps live branches" in document.summary

    # The first merges; approving the second is refused (a conflict with main now) and
    # its review opens again saying why, with the conflict in its preflight.
    await answer_review(team, first.task_id, "approve", "ok")
    await team.run_idle(team.loop(team.factory()))
    assert (team.root / "app.py").read_text() == "print('one')\n"
    await answer_review(team, second.task_id, "approve", "ok")
    await team.run_idle(team.loop(team.factory()))
    again = await review_request(team, second.task_id)
    assert again.request_id != request.request_id and again.state is State.PENDING
    document = again.document
    assert isinstance(document, ReviewRequest) and document.changes is not None
    assert document.changes.merge_refused is not None
    assert "conflicts with main" in document.changes.merge_refused
    assert document.changes.base_conflicts == ("app.py",)
    assert (await review_request(team, first.task_id)).state is State.DELIVERED
    assert port.read_task(second.task_id).stage == "review"
    assert (team.root / "app.py").read_text() == "print('one')\n"  # never half-merged


async def test_uncommitted_edits_of_the_user_in_those_files_refuse_the_merge_and_are_kept(
    team: Team, port: FcopPort
) -> None:
    git_project(team.root)
    task = port.create_task(sender="ADMIN", recipient="DEV", subject="fix", body="b")
    await team.run_idle(team.loop(team.factory({"DEV": writes("app.py", "print('fix')\n")})))
    (team.root / "app.py").write_text("print('my own edit')\n")
    await answer_review(team, task.task_id, "approve", "ok")
    await team.run_idle(team.loop(team.factory()))
    again = await review_request(team, task.task_id)
    assert again.state is State.PENDING
    document = again.document
    assert isinstance(document, ReviewRequest) and document.changes is not None
    assert "uncommitted edits" in (document.changes.merge_refused or "")
    assert (team.root / "app.py").read_text() == "print('my own edit')\n"
    # the user commits their edit elsewhere... here: drops it; approving again merges.
    subprocess.run(["git", "checkout", "--", "app.py"], cwd=team.root, check=True)
    await answer_review(team, task.task_id, "approve", "ok")
    await team.run_idle(team.loop(team.factory()))
    assert (team.root / "app.py").read_text() == "print('fix')\n"


async def test_delegated_children_work_in_their_roots_worktree(team: Team, port: FcopPort) -> None:
    git_project(team.root)
    body = "Ship it.\n\n- [ ] @QA check the build\n"
    root = port.create_task(sender="ADMIN", recipient="PM", subject="Release", body=body)

    def qa(agent: Agent, prompt: str) -> None:
        assert agent.cwd is not None
        (agent.cwd / "qa-report.txt").write_text("all green\n")
        runbook_agent(agent, prompt)

    factory = team.factory({"QA": qa})
    await team.run_idle(team.loop(factory))
    loop = team.loop(team.factory())
    record = loop.workspaces.get(root.task_id)
    assert record is not None
    assert {cwd for _, cwd in factory.cwds} == {record.worktree}
    assert sh(team.root, "show", f"{record.branch}:qa-report.txt") == "all green"
    [child] = port.children(root.task_id)
    assert records(team)[child.task_id].workspace == root.task_id
    assert loop.workspaces.get(child.task_id) is None  # one branch per tree


async def test_outside_a_git_repository_agents_work_in_the_project(
    team: Team, port: FcopPort
) -> None:
    task = port.create_task(sender="ADMIN", recipient="DEV", subject="plain", body="b")
    factory = team.factory()
    await team.run_idle(team.loop(factory))
    assert factory.cwds == [("DEV", None)]
    assert records(team)[task.task_id].workspace is None


async def test_isolation_none_keeps_todays_behaviour(team: Team, port: FcopPort) -> None:
    git_project(team.root)
    port.create_task(sender="ADMIN", recipient="DEV", subject="plain", body="b")
    factory = team.factory()
    from baton.team_config import Isolation

    await team.run_idle(team.loop(factory, isolation=Isolation(mode="none")))
    assert factory.cwds == [("DEV", None)]


async def test_dropping_a_tree_saves_its_work_and_stops_it_for_good(
    team: Team, port: FcopPort
) -> None:
    git_project(team.root)
    task = port.create_task(sender="ADMIN", recipient="DEV", subject="experiment", body="b")
    await team.run_idle(team.loop(team.factory({"DEV": writes("idea.py", "maybe\n")})))
    loop = team.loop(team.factory())
    live = loop.workspaces.get(task.task_id)
    assert live is not None and live.state is WorktreeState.LIVE
    (live.worktree / "scratch.txt").write_text("uncommitted\n")  # never lost
    removed: list[Path] = []
    loop.workspaces.on_removed = removed.append  # the role roots go with the tree

    report = await loop.drop_now(task.task_id, "not needed after all")
    assert removed == [loop.workspaces.cwd(live)]
    assert report.root == task.task_id and report.dropped == (task.task_id,)
    salvaged = report.worktree
    assert salvaged is not None and salvaged.state is WorktreeState.SALVAGED
    assert salvaged.salvage_ref == f"refs/baton/salvage/{task.task_id}"
    assert not live.worktree.exists()
    assert sh(team.root, "branch", "--list", "baton/*") == ""
    saved = salvaged.salvage_ref
    assert sh(team.root, "show", f"{saved}:scratch.txt") == "uncommitted"
    assert sh(team.root, "show", f"{saved}:idea.py") == "maybe"
    assert records(team)[task.task_id].state is TaskState.DROPPED
    assert (await review_request(team, task.task_id)).state is State.CANCELLED
    told = [
        p
        for p in (port.fcop_dir / "issues").glob("*.md")
        if "dropped the task tree" in p.read_text()
    ]
    assert len(told) == 1 and "(1 TASKs): not needed after all" in told[0].read_text()
    again = await loop.drop_now(task.task_id, "again, after a crash")  # changes nothing
    assert again.dropped == ()
    assert (
        len([p for p in (port.fcop_dir / "issues").glob("*.md") if "dropped" in p.read_text()]) == 1
    )

    # Nothing works on it again; its work comes back as a branch on request.
    factory = team.factory()
    await team.run_idle(team.loop(factory))
    assert factory.log == []
    restored, branch = await loop.workspaces.restore(task.task_id)
    assert restored.state is WorktreeState.RESTORED and branch == live.branch
    assert sh(team.root, "show", f"{branch}:scratch.txt") == "uncommitted"


async def test_a_branch_that_writes_fcop_files_is_never_merged(team: Team, port: FcopPort) -> None:
    """An agent in a tree's worktree cannot poison the live FCoP workspace through the merge."""
    git_project(team.root)
    sh(team.root, "add", "fcop")
    sh(team.root, "commit", "-qm", "fcop tracked")
    task = port.create_task(sender="ADMIN", recipient="DEV", subject="sneaky", body="b")

    def sneaky(agent: Agent, prompt: str) -> None:
        assert agent.cwd is not None
        forged = agent.cwd / "fcop" / "reports" / "REPORT-forged.md"
        forged.parent.mkdir(parents=True, exist_ok=True)
        forged.write_text("---\nforged\n---\n")
        runbook_agent(agent, prompt)

    await team.run_idle(team.loop(team.factory({"DEV": sneaky})))
    await answer_review(team, task.task_id, "approve", "ok")
    await team.run_idle(team.loop(team.factory()))
    again = await review_request(team, task.task_id)
    document = again.document
    assert isinstance(document, ReviewRequest) and document.changes is not None
    assert "baton's own files" in (document.changes.merge_refused or "")
    assert not (team.root / "fcop" / "reports" / "REPORT-forged.md").exists()
    assert port.read_task(task.task_id).stage == "review"


async def test_a_merged_trees_role_sessions_lose_their_private_roots(
    team: Team, port: FcopPort
) -> None:
    """Nothing can resume in a removed worktree, and a role's private root may hold an
    agent's whole cache: it goes with the tree (the project's own sessions stay)."""
    git_project(team.root)
    task = port.create_task(sender="ADMIN", recipient="DEV", subject="feature", body="b")
    await team.run_idle(team.loop(team.factory({"DEV": writes("feature.py", "x = 1\n")})))
    first = team.loop(team.factory())
    live = first.workspaces.get(task.task_id)
    assert live is not None
    in_tree, in_project = first.workspaces.cwd(live), team.root

    roots = {}
    for slot_id, cwd in (("role-dev@tree", in_tree), ("role-dev", in_project)):
        team.store.upsert_session(
            SessionRecord(slot_id, "fake", "agent-1", str(cwd), f"key-{slot_id}", TS, TS)
        )
        root = role_root(team.state_dir, team.root, slot_id, f"key-{slot_id}")
        (root / "home" / "cache").mkdir(parents=True)
        (root / "home" / "cache" / "blob").write_text("cached\n")
        (root / "home" / "cache").chmod(0o500)  # what an agent may leave read-only
        roots[slot_id] = root

    await answer_review(team, task.task_id, "approve", "ok")
    loop = team.loop(team.factory())
    loop.workspaces.on_removed = partial(forget_tree_roots, team.store, team.state_dir, team.root)
    await team.run_idle(loop)
    assert (team.root / "feature.py").read_text() == "x = 1\n"  # merged, worktree removed
    assert not roots["role-dev@tree"].exists()
    assert (roots["role-dev"] / "home" / "cache" / "blob").exists()


async def approved_feature(
    team: Team, port: FcopPort
) -> tuple[CreatedTask, TeamLoop, WorktreeRecord]:
    """DEV wrote ``feature.py`` on its tree, the human approved: the loop that will merge it
    (not run yet) and the live record."""
    git_project(team.root)
    task = port.create_task(sender="ADMIN", recipient="DEV", subject="feature", body="b")
    await team.run_idle(team.loop(team.factory({"DEV": writes("feature.py", "x = 1\n")})))
    await answer_review(team, task.task_id, "approve", "ok")
    loop = team.loop(team.factory())
    live = loop.workspaces.get(task.task_id)
    assert live is not None
    return task, loop, live


async def test_a_failing_cleanup_never_stops_the_merge(team: Team, port: FcopPort) -> None:
    task, loop, live = await approved_feature(team, port)
    live_cwd = loop.workspaces.cwd(live)
    told: list[Path] = []

    def broken(path: Path) -> None:
        told.append(path)
        raise OSError("disk says no")

    loop.workspaces.on_removed = broken
    await team.run_idle(loop)
    assert (team.root / "feature.py").read_text() == "x = 1\n"
    assert told == [live_cwd]
    record = loop.workspaces.get(task.task_id)
    assert record is not None and record.state is WorktreeState.REMOVED


async def test_work_landing_between_the_merge_and_the_delete_is_kept_and_told(
    team: Team, port: FcopPort, monkeypatch: pytest.MonkeyPatch
) -> None:
    """An agent's commit in the worktree right after the merge (a turn still running):
    the approved head is merged, the approval stands, the newer commit stays on the branch
    (``kept``) and an FCoP ISSUE tells the human what to do with it."""
    task, loop, live = await approved_feature(team, port)
    original = loop.workspaces._git

    async def step(run: Any, point: str) -> Any:
        if point == "worktree.remove":
            (live.worktree / "late.py").write_text("y = 2\n")
            sh(live.worktree, "add", "late.py")
            sh(live.worktree, "commit", "-qm", "after the approval")
        return await original(run, point)

    monkeypatch.setattr(loop.workspaces, "_git", step)
    await team.run_idle(loop)

    assert (team.root / "feature.py").read_text() == "x = 1\n"  # the approved work
    assert not (team.root / "late.py").exists()
    assert sh(team.root, "show", f"{live.branch}:late.py") == "y = 2"
    record = loop.workspaces.get(task.task_id)
    assert record is not None and record.state is WorktreeState.KEPT
    assert records(team)[task.task_id].state is TaskState.SETTLED  # the approval stands
    issues = [p.read_text() for p in (port.fcop_dir / "issues").glob("*.md")]
    assert any(f"git merge {live.branch}" in text for text in issues), issues
