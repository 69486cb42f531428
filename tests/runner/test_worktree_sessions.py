"""A session in a task tree's worktree: the edit mode, the worktree rule, and what still asks.

First the rule itself (:func:`baton.runner.worktree_rule.worktree_check` feeding
:class:`~baton.requests.audit.PermissionAudit`) on a real folder: inside is allowed, and
``.git`` (the worktree's ``.git`` file, any ``.git`` component), ``..``, outside paths,
symbolic links, path-less edits, commands and denials stay findings. Then sessions opened
``isolated`` through baton's runner against the fake agent (which advertises Claude-like
modes): the opener selects ``acceptEdits``, the session is ``contained_edits``, an unasked
edit or client write inside is ``security.mutation_allowed`` (rule ``worktree``), while an
unasked terminal, an ignored denial and a switch to a self-approving mode are caught as
anywhere; the same profile outside a worktree keeps asking.
"""

from __future__ import annotations

import dataclasses
import os
from pathlib import Path

import pytest

from baton.agent_profile import AgentProfile
from baton.events.model import SecurityMutationAllowed, SecurityUnapprovedMutation
from baton.requests.audit import PermissionAudit
from baton.requests.policy import Policy
from baton.runner.session import AgentSession
from baton.runner.worktree_rule import worktree_check
from tests.security.test_audit import _done, _record
from tests.support.harness import Fake, Harness, fake


@pytest.fixture
def tree(tmp_path: Path) -> Path:
    """A worktree-like folder: a ``.git`` file, a source folder, a link pointing outside."""
    root = tmp_path / "wt"
    (root / "src").mkdir(parents=True)
    (root / ".git").write_text("gitdir: /elsewhere/.git/worktrees/wt\n")
    (tmp_path / "outside").mkdir()
    (root / "escape").symlink_to(tmp_path / "outside")
    return root


def _audit(tree: Path) -> PermissionAudit:
    return PermissionAudit(str(tree.resolve()), display=lambda p: p, worktree=worktree_check(tree))


def test_the_rule_covers_paths_inside_and_nothing_else(tree: Path, tmp_path: Path) -> None:
    check = worktree_check(tree)
    assert check(str(tree / "src" / "new.py")) and check("src/new.py")
    assert check(str(tree / "deep" / "not" / "yet" / "there.txt"))
    assert check(".gitignore") and check("docs/.github/x.yml"), "only a .git component counts"
    for path in (
        ".git",  # the worktree's own .git file
        ".git/config",
        "src/.git/hooks/pre-commit",
        "sub/.GIT/x",  # case-insensitive filesystems
        "../wt/src/x.py",
        str(tmp_path / "outside" / "x"),
        "escape/x",  # a symbolic link pointing outside
        "",
        str(tree),
    ):
        assert not check(path), path


def test_an_unasked_edit_inside_is_allowed_by_the_rule(tree: Path) -> None:
    audit = _audit(tree)
    [allowed] = audit.tool(_done("w", "edit", str(tree / "src/a.py")), "t1")
    assert isinstance(allowed, SecurityMutationAllowed)
    assert (allowed.rule, allowed.mutation, allowed.kind) == ("worktree", "tool_call", "edit")
    assert audit.count("t1") == 0 and not audit.unexpected([allowed])
    for kind in ("delete", "move"):
        [ok] = audit.tool(_done(f"{kind}-1", kind, str(tree / "src/a.py")), "t1")
        assert isinstance(ok, SecurityMutationAllowed)


def test_git_outside_links_pathless_edits_and_commands_stay_findings(
    tree: Path, tmp_path: Path
) -> None:
    audit = _audit(tree)
    cases = [
        _done("g1", "edit", str(tree / ".git")),
        _done("g2", "edit", str(tree / ".git" / "config")),
        _done("o1", "edit", str(tmp_path / "outside" / "x")),
        _done("l1", "edit", str(tree / "escape" / "x")),
        _done("n1", "edit"),  # names no path: the rule cannot place it
        _done("m1", "move", str(tree / "src/a.py"), str(tmp_path / "moved.py")),
        _done("x1", "execute", str(tree / "src")),
    ]
    for payload in cases:
        [finding] = audit.tool(payload, "t1")
        assert isinstance(finding, SecurityUnapprovedMutation), payload.tool_call_id
    assert audit.count("t1") == len(cases)
    assert audit.unexpected(audit.findings)
    [terminal] = audit.client_terminal("make", "t1")
    assert isinstance(terminal, SecurityUnapprovedMutation)


def test_a_denied_edit_inside_is_still_a_finding(tree: Path) -> None:
    audit = _audit(tree)
    audit.decided(_record("d", "edit", "deny"))
    [finding] = audit.tool(_done("d", "edit", str(tree / "src/a.py")), "t1")
    assert isinstance(finding, SecurityUnapprovedMutation) and "denied" in finding.reason


def test_a_client_write_and_its_tool_call_are_allowed_once(tree: Path) -> None:
    audit = _audit(tree)
    target = str(tree / "src" / "b.py")
    [allowed] = audit.client_write(target, "t1")
    assert isinstance(allowed, SecurityMutationAllowed) and allowed.mutation == "fs_write"
    assert audit.tool(_done("w", "edit", target), "t1") == [], "the same edit, not twice"
    [finding] = audit.client_write(str(tree / ".git" / "HEAD"), "t1")
    assert isinstance(finding, SecurityUnapprovedMutation)


def test_without_the_rule_nothing_changes(tree: Path) -> None:
    audit = PermissionAudit(str(tree.resolve()))
    [finding] = audit.tool(_done("w", "edit", str(tree / "src/a.py")), "t1")
    assert isinstance(finding, SecurityUnapprovedMutation)


# ------------------------------------------------------------------ through the runner


async def _open(
    harness: Harness,
    command: Fake,
    *,
    isolated: bool,
    preset: str | Policy = "all",
    **fields: object,
) -> AgentSession:
    """Like ``harness.open``, with the team loop's ``isolated`` flag."""
    profile = AgentProfile(
        name="fake", title="fake", command=tuple(command.argv()), family="claude", mode="default"
    )
    profile = dataclasses.replace(profile, **fields)  # type: ignore[arg-type]
    session = await harness.baton.open_session(
        profile,
        run=await harness.run(),
        requests=harness.baton.broker(preset, wait_timeout=0, notify=False),
        workspace=harness.workspace,
        environ={"PATH": os.environ["PATH"]},
        transport=harness.transport_for(command),
        isolated=isolated,
    )
    harness.sessions.append(session)
    return session


async def test_in_a_worktree_the_opener_selects_the_edit_mode_and_edits_go_unasked(
    harness: Harness,
) -> None:
    # A strict audit would cancel the turn on any unapproved mutation; the edit is not one.
    policy = dataclasses.replace(Policy.preset("all"), audit="strict")
    session = await _open(
        harness, fake("skip-permission", "--mode", "default", "--linger", "5"), isolated=True,
        preset=policy,
    )  # fmt: skip
    [started] = harness.of("session.started")
    assert (started.current_mode, started.approval) == ("acceptEdits", "contained_edits")
    assert not harness.of("security.approval_refused")
    outcome = await session.prompt("go", timeout=30)
    assert outcome.status == "completed" and outcome.unapproved_mutations == 0
    assert (harness.workspace / "skipped.txt").exists()
    [allowed] = harness.of("security.mutation_allowed")
    assert (allowed.rule, allowed.path, allowed.tool_call_id) == (
        "worktree",
        "skipped.txt",
        "skip-1",
    )
    assert not harness.of("security.unapproved_mutation") and not harness.of("request.created")


async def test_the_users_checkout_keeps_asking(harness: Harness) -> None:
    session = await _open(harness, fake("skip-permission", "--mode", "default"), isolated=False)
    [started] = harness.of("session.started")
    assert (started.current_mode, started.approval) == ("default", "asks")
    outcome = await session.prompt("go")
    [finding] = harness.of("security.unapproved_mutation")
    assert finding.path == "skipped.txt" and outcome.unapproved_mutations == 1
    assert not harness.of("security.mutation_allowed")


async def test_the_edit_mode_outside_a_worktree_is_refused(harness: Harness) -> None:
    from baton.errors import SecurityError

    with pytest.raises(SecurityError, match="acceptEdits"):
        await _open(harness, fake("ok", "--mode", "default"), isolated=False, mode="acceptEdits")


async def test_worktree_edits_false_keeps_asking_in_a_worktree(harness: Harness) -> None:
    await _open(harness, fake("ok", "--mode", "default"), isolated=True, worktree_edits=False)
    [started] = harness.of("session.started")
    assert (started.current_mode, started.approval) == ("default", "asks")


async def test_a_client_write_inside_is_allowed_and_recorded(harness: Harness) -> None:
    session = await _open(harness, fake("write-unasked", "--mode", "default"), isolated=True)
    outcome = await session.prompt("go")
    [written] = harness.of("file.written")
    [allowed] = harness.of("security.mutation_allowed")
    assert written.path == allowed.path == "unasked.txt" and allowed.mutation == "fs_write"
    assert outcome.unapproved_mutations == 0


async def test_commands_and_denials_are_still_caught_in_a_worktree(harness: Harness) -> None:
    session = await _open(harness, fake("terminal-unasked", "--mode", "default"), isolated=True)
    outcome = await session.prompt("go")
    [finding] = harness.of("security.unapproved_mutation")
    assert finding.mutation == "terminal" and outcome.unapproved_mutations == 1


async def test_an_ignored_denial_is_caught_in_a_worktree(harness: Harness) -> None:
    session = await _open(
        harness, fake("ignore-denial", "--mode", "default"), isolated=True, preset="none"
    )
    outcome = await session.prompt("go")
    [finding] = harness.of("security.unapproved_mutation")
    assert "denied" in finding.reason and outcome.unapproved_mutations == 1
    assert not harness.of("security.mutation_allowed")


async def test_switching_to_a_self_approving_mode_in_a_worktree_cancels(harness: Harness) -> None:
    session = await _open(
        harness,
        fake("switch-mode", "--mode", "default", "--switch-to", "auto"),
        isolated=True,
    )
    outcome = await session.prompt("go", timeout=30)
    [refused] = harness.of("security.approval_refused")
    assert refused.mode == "auto" and outcome.status == "cancelled"
