"""``baton answer REQ --rebase``: a review whose branch conflicts with its base goes back to
the role owning the branch with the merge preflight's prompt (issue 26 item 4), as a user
runs it: the real CLI, the built-in agent, a real git repository."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path
from typing import Any

from tests.support.project import baton_in, commit_all


def _task(repo: Path, subject: str, text: str) -> str:
    body = repo.parent / f"{subject}.md"
    body.write_text(f"Write the file.\n\n```sh\nprintf '{text}\\n' > shared.txt\n```\n")
    created = baton_in(
        repo, "task", "new", "--to", "DEV", "--subject", subject, "--body-file", str(body)
    )
    assert created.returncode == 0, created.stderr
    return created.stdout.split()[0]


def _up(repo: Path) -> None:
    up = baton_in(repo, "up", "--until-idle")
    assert up.returncode == 0, up.stderr[-2000:]


def _review_of(repo: Path, task: str) -> dict[str, Any]:
    lines = baton_in(repo, "inbox", "--json").stdout.splitlines()
    reviews = [json.loads(line) for line in lines if line.strip()]
    [found] = [r for r in reviews if r["document"].get("task_id") == task]
    return found


def test_rebase_sends_a_conflicting_review_back_with_the_preflights_prompt(
    tmp_path: Path,
) -> None:
    repo = tmp_path / "repo"
    repo.mkdir()
    subprocess.run(["git", "init", "-q", "-b", "main", str(repo)], check=True)
    assert baton_in(repo, "init").returncode == 0
    commit_all(repo)
    first = _task(repo, "one", "one")
    second = _task(repo, "two", "two")
    _up(repo)
    later = _review_of(repo, second)["request_id"]

    # Nothing conflicts with main yet: there is nothing to rebase, and it says so.
    clean = baton_in(repo, "answer", later, "--rebase")
    assert clean.returncode != 0
    assert "merges cleanly into main" in clean.stderr and len(clean.stderr.splitlines()) == 1

    assert (
        baton_in(repo, "answer", _review_of(repo, first)["request_id"], "--approve").returncode == 0
    )
    _up(repo)  # the first merges into main: the second now conflicts with it
    assert (repo / "shared.txt").read_text() == "one\n"
    both = baton_in(repo, "answer", later, "--rebase", "--approve")
    assert both.returncode != 0 and "choose one decision" in both.stderr
    # Approving it now could not merge: refused at once, the review stays pending.
    approve = baton_in(repo, "answer", later, "--approve")
    assert approve.returncode != 0 and len(approve.stderr.splitlines()) == 1
    assert "not merged:" in approve.stderr and "conflicts with main in shared.txt" in approve.stderr
    assert "--rebase" in approve.stderr and _review_of(repo, second)["request_id"] == later

    sent = baton_in(repo, "answer", later, "--rebase", "--reason", "Keep two.", "--json")
    assert sent.returncode == 0, sent.stderr
    answer = json.loads(sent.stdout)["answer"]
    assert answer["decision"] == "reject"
    assert answer["reason"].startswith(
        "Your branch conflicts with main, which moved since you branched, in: shared.txt."
    )
    assert "(`git merge main`)" in answer["reason"] and answer["reason"].endswith("\n\nKeep two.")

    # The role owning the branch gets it back with the reason in its revision prompt (the
    # rejection REVIEW it reads), and reports again: a new review of the same tree.
    _up(repo)
    again = _review_of(repo, second)
    assert again["request_id"] != later
    reviews = [
        p.read_text(encoding="utf-8")
        for p in (repo / "fcop" / "reviews").glob("REVIEW-*.md")
        if f"subject_ref: {second}" in p.read_text(encoding="utf-8")
    ]
    assert any("Your branch conflicts with main" in r and "Keep two." in r for r in reviews)
