"""A task tree's change on the review card and the task page (issue 26): per file,
collapsible, line-numbered, the preflight in words, the merge's state, the rebase
button; and diff text as hostile input (markup, controls, bidi, a 2 MB line)."""

from __future__ import annotations

import html
import json
import re
import subprocess
from pathlib import Path

from baton.request_model.documents import (
    BranchConflict,
    ChangedFileView,
    CommitView,
    ReviewAnswer,
    ReviewChanges,
    parse_document,
)
from baton.requests.ledger import Ledger, RequestRecord
from baton.requests.states import State
from baton.web.dashboard import render_task_page, request_card
from baton.web.diffview import MAX_LINE_CHARS, MAX_ROWS, OPEN_ROWS, change_html, split_files
from baton.web.trees import ReviewTree, merge_state, rebase_reason
from baton.worktrees.model import WorktreeRecord
from baton.worktrees.repo import Preflight
from baton.worktrees.states import WorktreeState
from tests.web.test_web_dashboard import BREAKOUT, HOSTILE, RLO, SCRIPT
from tests.web.webbuild import create

TASK = "TASK-0123456789abcdef0123456789abcdef"
DIFF = """diff --git a/app.py b/app.py
index 1111111..2222222 100644
--- a/app.py
+++ b/app.py
@@ -1,3 +1,3 @@
 import os
-print('hello')
+print('hello, world')
 x = 1
diff --git a/notes.md b/notes.md
new file mode 100644
index 0000000..3333333
--- /dev/null
+++ b/notes.md
@@ -0,0 +1,2 @@
+# Notes
+done
"""


def _changes(**extra: object) -> ReviewChanges:
    fields: dict[str, object] = {
        "branch": "baton/01234567-release",
        "base": "main",
        "head": "a" * 40,
        "merge_base": "b" * 40,
        "files": (
            ChangedFileView(status="M", path="app.py", added=1, removed=1),
            ChangedFileView(status="A", path="notes.md", added=2, removed=0),
        ),
        "added": 3,
        "removed": 1,
        "commits": (CommitView(commit="c" * 40, author="baton", subject="checkpoint of turn 1"),),
        "diff": DIFF,
    }
    return ReviewChanges.model_validate(fields | extra)


async def _review(ledger: Ledger, changes: ReviewChanges | None) -> RequestRecord:
    doc = parse_document(
        {
            "kind": "review",
            "task_id": TASK,
            "report_ref": "REPORT-1",
            "summary": "# Done\n\nThe greeting says world.",
            "role": "DEV",
            "changes": changes.model_dump(mode="json") if changes is not None else None,
        }
    )
    return await create(ledger, doc)


def _answer(card: str, label: str) -> dict[str, object]:
    """The answer a card's button sends (its ``data-answer``), as the script reads it."""
    found = re.search(rf'data-answer="([^"]*)"[^>]*>{re.escape(label)}</button>', card)
    assert found is not None, f"no {label!r} button"
    data: dict[str, object] = json.loads(html.unescape(found.group(1)))
    return data


def _tree(changes: ReviewChanges, **extra: object) -> ReviewTree:
    rebase = rebase_reason(changes.base, changes.base_conflicts) if changes.base_conflicts else None
    return ReviewTree(changes, "checked just now", rebase=rebase, **extra)  # type: ignore[arg-type]


def test_split_files_names_every_file_as_git_does(tmp_path: Path) -> None:
    """Sections of a real ``git diff``, odd names included (space, tab, quote, unicode,
    a rename, a binary file, a deletion), in the order and by the names git lists."""
    repo = tmp_path / "r"
    repo.mkdir()
    git = ["git", "-c", "user.email=t@e.invalid", "-c", "user.name=t", "-c", "core.quotePath=false"]
    subprocess.run([*git, "init", "-q"], cwd=repo, check=True)
    (repo / "gone.txt").write_text("bye\n")
    (repo / "old name.txt").write_text("".join(f"line {i}\n" for i in range(20)))
    subprocess.run([*git, "add", "-A"], cwd=repo, check=True)
    subprocess.run([*git, "commit", "-qm", "base"], cwd=repo, check=True)
    (repo / "gone.txt").unlink()
    (repo / "old name.txt").rename(repo / "new name.txt")
    for name in ("a b.txt", "t\tab.txt", 'q"uote.txt', "é.txt", "back\\slash.txt"):
        (repo / name).write_text(f"{name}\n")
    (repo / "img.bin").write_bytes(b"\x00\x01\x02binary")
    subprocess.run([*git, "add", "-A"], cwd=repo, check=True)
    diff = subprocess.run(
        [*git, "diff", "--cached", "-M"], cwd=repo, capture_output=True, check=True
    ).stdout.decode()
    names = subprocess.run(
        [*git, "diff", "--cached", "-M", "--name-only", "-z"],
        cwd=repo,
        capture_output=True,
        check=True,
    ).stdout.decode()
    assert [f.path for f in split_files(diff)] == names.rstrip("\0").split("\0")
    assert all(
        not line.startswith(("diff --git", "+++", "---"))
        for f in split_files(diff)
        for line in f.body
    )


def test_the_change_is_per_file_collapsible_line_numbered_with_the_preflight() -> None:
    changes = _changes(
        branch_conflicts=(BranchConflict(branch="baton/89abcdef-other", paths=("app.py",)),),
    )
    page = change_html(changes, task_id=TASK, when="checked just now", anchor="t")
    assert page.count('<details class="file-diff"') == 2  # one per file, both open (short)
    assert page.count('<details class="file-diff" id="t-f0" open>') == 1
    assert "✓ merges cleanly into <code>main</code>" in page
    assert "overlaps live branch <code>baton/89abcdef-other</code> in <code>app.py</code>" in page
    assert "(checked just now)" in page
    # line numbers: the removed line is old line 2, the added one new line 2
    assert '<tr class="del"><td class="ln">2</td><td class="ln"></td>' in page
    assert '<tr class="add"><td class="ln"></td><td class="ln">2</td>' in page
    assert '<tr class="ctx"><td class="ln">3</td><td class="ln">3</td>' in page
    assert "1 commit" in page and "checkpoint of turn 1" in page
    assert 'fstatus-A" title="added">A</span> <code>notes.md</code>' in page
    assert '<span class="plus">+2</span>' in page
    conflicted = change_html(
        _changes(base_conflicts=("app.py",)), task_id=TASK, when="now", anchor="t"
    )
    assert "✗ conflicts with <code>main</code> in <code>app.py</code>" in conflicted
    assert "merges cleanly" not in conflicted
    merged = change_html(changes, task_id=TASK, when=None, anchor="t")
    assert "merge preflight" not in merged  # a merged tree has none to show


def test_what_is_drawn_is_bounded_and_says_where_to_read_the_rest() -> None:
    long_file = "\n".join(
        ["diff --git a/big.txt b/big.txt", "--- a/big.txt", "+++ b/big.txt", "@@ -1,0 +1,9 @@"]
        + [f"+line {i}" for i in range(OPEN_ROWS + 10)]
    )
    page = change_html(_changes(diff=long_file), task_id=TASK, when="now", anchor="t")
    assert '<details class="file-diff" id="t-f0">' in page  # a long file starts collapsed
    huge = "\n".join(
        f"diff --git a/f{n}.txt b/f{n}.txt\n@@ -0,0 +1,1000 @@\n" + "+x\n" * 1000
        for n in range(MAX_ROWS // 1000 + 2)
    )
    page = change_html(_changes(diff=huge), task_id=TASK, when="now", anchor="t")
    assert page.count('<tr class="add">') <= MAX_ROWS
    assert f"past what this page draws; read it with `baton diff {TASK}`" in page
    no_diff = change_html(
        _changes(diff=None, note="the diff is too large to show here; read it with X"),
        task_id=TASK,
        when="now",
        anchor="t",
    )
    assert "read it with X" in no_diff and "diff-files" not in no_diff


async def test_a_hostile_diff_is_shown_never_obeyed(ledger: Ledger) -> None:
    """Markup, a closing ``</pre>``, terminal controls, bidi overrides and a 2 MB line,
    in the diff, the file names, the branch and the commits."""
    two_mb = "+" + "A" * (2 * 1024 * 1024)
    evil = "\n".join(
        [
            f"diff --git a/{HOSTILE} b/{HOSTILE}",
            f"+++ b/{HOSTILE}",
            "@@ -0,0 +1,5 @@",
            f"+{SCRIPT}",
            "+</pre></td></tr></table><script>alert(2)</script>",
            f"+{BREAKOUT}",
            f"+access = 'user' {RLO}⁦// admin only⁩⁦",
            "+\x1b[2J\x1b]0;pwned\x07 \x00 \x08 end",
            two_mb,
        ]
    )
    changes = _changes(
        branch=f"baton/{SCRIPT}",
        files=(ChangedFileView(status="A", path=HOSTILE, added=6, removed=0),),
        commits=(CommitView(commit="d" * 40, author=BREAKOUT, subject=HOSTILE),),
        diff=evil,
        base_conflicts=(HOSTILE,),
        branch_conflicts=(BranchConflict(branch=HOSTILE, paths=(HOSTILE,)),),
        merge_refused=f"conflicts in {HOSTILE}",
    )
    page = change_html(changes, task_id=TASK, when=HOSTILE, anchor="t")
    record = await _review(ledger, _changes(merge_refused=HOSTILE, base_conflicts=(HOSTILE,)))
    card = request_card(record, tree=_tree(changes))
    for shown in (page, card):
        assert "<script" not in shown and "<img" not in shown
        assert shown.count("<pre>") == shown.count("</pre>")
        assert shown.count("<table") == shown.count("</table>")
        for raw in (RLO, "\u2066", "\u2069", "\x1b", "\x07", "\x00", "\x08"):
            assert raw not in shown
        assert "&lt;script&gt;alert(2)&lt;/script&gt;" in shown
        assert "␛[2J" in shown and "&lt;U+202E&gt;" in shown  # made visible, not dropped
    assert len(page) < 200_000  # the 2 MB line is clipped, with a marker
    assert f"{2 * 1024 * 1024 + 1 - MAX_LINE_CHARS:,} more characters on this line" in page
    task_page = render_task_page(
        {
            "task_id": TASK,
            "task": {"subject": HOSTILE, "stage": "review", "children": []},
            "documents": [
                {
                    "kind": "TASK",
                    "doc_id": TASK,
                    "sender": "ADMIN",
                    "recipient": "DEV",
                    "created_at": "",
                    "fields": {},
                    "refused": None,
                    "html": "",
                }
            ],
            "changes": {"files": [], "diff": "", "note": ""},
            "tree": {
                "root_task": TASK,
                "state": "live",
                "branch": HOSTILE,
                "base": "main",
                "reason": HOSTILE,
                "merge": HOSTILE,
                "note": HOSTILE,
                "preflight": "checked just now",
                "changes": changes.model_dump(mode="json"),
            },
        }
    )
    assert task_page.count("<script") == 1  # ours: the page's own script tag
    assert RLO not in task_page and "\x1b" not in task_page and "<img" not in task_page
    assert len(task_page) < 250_000


async def test_the_review_card_shows_the_change_and_offers_a_rebase_on_conflict(
    ledger: Ledger,
) -> None:
    clean = await _review(ledger, _changes())
    card = request_card(clean, subject="Release", tree=_tree(_changes()))
    assert card.index('class="review-report"') < card.index('class="review-changes"')
    assert "merges cleanly" in card and "<h4>the change</h4>" in card
    assert [
        b for b in ("Accept", "Send back", "Send back to rebase") if f">{b}</button>" in card
    ] == [
        "Accept",
        "Send back",
    ]
    assert "Not merged" not in card

    conflicted = _changes(base_conflicts=("app.py",), merge_refused="baton/x conflicts with main")
    record = await _review(ledger, conflicted)
    card = request_card(record, subject="Release", tree=_tree(conflicted))
    # Why the approval did not merge comes first, loud; then the summary, then the change.
    assert card.index("Not merged:") < card.index('class="review-report"')
    assert 'role="alert"><strong>Not merged:</strong> baton/x conflicts with main' in card
    rebase = _answer(card, "Send back to rebase")
    prompt = Preflight("", ("app.py",)).rebase_prompt("main")
    assert rebase == {"kind": "review", "decision": "reject", "reason": prompt}
    assert "app.py" in prompt and "git merge main" in prompt
    assert _answer(card, "Send back") == {"kind": "review", "decision": "reject"}
    assert "added to the rebase prompt" in card


async def test_a_review_without_a_branch_keeps_the_reported_files_view(ledger: Ledger) -> None:
    record = await _review(ledger, None)
    card = request_card(record, changes={"files": ["app.py", "notes.md"], "diff": DIFF, "note": ""})
    assert "changed files (2)" in card and card.count('<details class="file-diff"') == 2
    assert "Send back to rebase" not in card and "merge preflight" not in card


def _tree_record(state: WorktreeState, **extra: object) -> WorktreeRecord:
    fields: dict[str, object] = {
        "root_task": TASK,
        "state": state,
        "branch": "baton/01234567-release",
        "path": "/p/.baton/worktrees/01234567-release",
        "base_ref": "refs/heads/main",
        "base_commit": "b" * 40,
        "created_at": "2026-01-01T00:00:00Z",
        "updated_at": "2026-01-01T00:00:00Z",
        "head_commit": "a" * 40,
    }
    return WorktreeRecord(**(fields | extra))  # type: ignore[arg-type]


async def test_where_an_accepted_trees_merge_stands(ledger: Ledger) -> None:
    record = await _review(ledger, _changes())
    answered = await ledger.answer(
        record.request_id, ReviewAnswer(decision="approve"), decided_by="human"
    )
    accepted = answered.record
    live = _tree_record(WorktreeState.LIVE)
    assert merge_state(live, accepted, team_loop_running=False) == (
        "Accepted: baton/01234567-release is merged into main when `baton up` runs."
    )
    assert merge_state(live, accepted, team_loop_running=True) == (
        "Accepted: baton up is merging baton/01234567-release into main."
    )
    merging = _tree_record(WorktreeState.MERGING)
    assert merge_state(merging, accepted, team_loop_running=True) == (
        "Merging baton/01234567-release into main…"
    )
    merged = _tree_record(WorktreeState.REMOVED, merge_commit="e" * 40)
    assert (
        merge_state(merged, accepted, team_loop_running=False) == f"Merged into main ({'e' * 10})."
    )
    stale = _tree_record(WorktreeState.REMOVED, merge_commit="e" * 40, reason="main moved")
    assert (
        merge_state(stale, accepted, team_loop_running=False) == f"Merged into main ({'e' * 10})."
    )
    note = "needs attention: work landed in baton/01234567-release after aaaa was merged"
    kept = _tree_record(WorktreeState.KEPT, merge_commit="e" * 40, reason=note)
    assert merge_state(kept, accepted, team_loop_running=False) == (
        f"Merged into main ({'e' * 10}). Needs attention: work landed in "
        "baton/01234567-release after aaaa was merged."
    )
    salvaged = _tree_record(WorktreeState.SALVAGED, salvage_ref=f"refs/baton/salvage/{TASK}")
    assert merge_state(salvaged, None, team_loop_running=False) == (
        f"Dropped: its work is kept under refs/baton/salvage/{TASK}."
    )
    assert merge_state(None, accepted, team_loop_running=True) is None
    assert accepted.state is State.ANSWERED
    card = request_card(
        accepted,
        tree=ReviewTree(_changes(), "when the review opened", merge="Accepted: …", waiting=True),
    )
    assert 'data-merge="waiting" data-state="answered"' in card  # the page follows it
    assert '<p class="merge-state" role="status">Accepted: …</p>' in card
    assert ">Accept</button>" not in card  # settled: no controls
