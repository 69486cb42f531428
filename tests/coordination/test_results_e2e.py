"""Results you can trust, through ``baton up`` with the real built-in agents.

PM delegates a checklist; DEV, QA and OPS run real steps in real ACP sessions with
baton's role MCP server; the review waits in the ledger. Failing-first: before this,
QA's ``cat artifact.txt`` ran while DEV was still building, the PM reported ``done``
to ADMIN over a blocked child, and the review quoted PM's consolidation prompt
(``review_report(...)`` instructions included) instead of the work.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from tests.support.project import baton_in, commit_all, git_repo, stock_fcop_validate

ORDERED = """Ship the artifact.

- [ ] @DEV build the artifact
  ```sh
  sleep 2
  echo built-by-dev > artifact.txt
  ```
- [ ] @QA check the artifact
  ```sh
  cat artifact.txt
  ```
"""

BROKEN = """Ship the artifact.

- [ ] @DEV build the artifact
  ```sh
  echo compile error in main.c >&2
  exit 3
  ```
- [ ] @QA check the artifact
  ```sh
  cat artifact.txt
  ```
- [ ] @OPS write the release notes
  after: none
  ```file NOTES.md
  Release notes: nothing shipped yet.
  ```
"""


@pytest.fixture
def repo(tmp_path: Path) -> Path:
    root = git_repo(tmp_path)
    assert baton_in(root, "init").returncode == 0
    commit_all(root)  # a repository with history: the tree branches from it
    return root


def run_team(repo: Path, body: str) -> dict[str, Any]:
    (repo / "TASK.md").write_text(body)
    created = baton_in(
        repo, "task", "new", "--to", "PM", "--subject", "Release 1.2", "--body-file", "TASK.md"
    )
    assert created.returncode == 0, created.stderr
    up = baton_in(repo, "up", "--until-idle")
    assert up.returncode == 0, up.stderr[-3000:]
    inbox = baton_in(repo, "inbox", "--json")
    reviews = [json.loads(line) for line in inbox.stdout.splitlines() if line.strip()]
    [review] = [r for r in reviews if r["kind"] == "review"]
    assert stock_fcop_validate(repo)["valid"] is True
    return review


def reports(repo: Path) -> dict[str, dict[str, str]]:
    """role/sender -> {result, body} of every REPORT in the workspace."""
    out: dict[str, dict[str, str]] = {}
    for path in (repo / "fcop" / "reports").glob("REPORT-*.md"):
        head, _, body = path.read_text().partition("\n---\n")
        fields = dict(line.split(": ", 1) for line in head.splitlines()[1:] if ": " in line)
        subject = fields["subject_ref"]
        task = next((repo / "fcop" / "_lifecycle").glob(f"*/{subject}.md")).read_text()
        recipient = next(line for line in task.splitlines() if line.startswith("recipient: "))
        out[recipient.split(": ", 1)[1]] = {"result": fields["result"], "body": body.lstrip("\n")}
    return out


def test_a_step_that_needs_another_roles_output_waits_for_it(repo: Path) -> None:
    review = run_team(repo, ORDERED)
    by_role = reports(repo)
    assert by_role["DEV"]["result"] == "done"
    assert by_role["QA"]["result"] == "done", by_role["QA"]["body"]
    assert "built-by-dev" in by_role["QA"]["body"]  # cat ran after DEV wrote the file
    assert by_role["PM"]["result"] == "done"
    summary = review["document"]["summary"]
    assert "2 of 2 done" in summary and "built-by-dev" in summary


def test_a_blocked_child_makes_the_leader_blocked_and_the_review_shows_the_work(
    repo: Path,
) -> None:
    review = run_team(repo, BROKEN)
    by_role = reports(repo)
    assert by_role["DEV"]["result"] == "blocked"
    assert by_role["QA"]["result"] == "blocked"
    assert by_role["QA"]["body"].lstrip().startswith("Not run:")  # QA waited for DEV, who failed
    assert by_role["OPS"]["result"] == "done"  # after: none, it did not wait
    assert by_role["PM"]["result"] == "blocked"
    summary = review["document"]["summary"]
    assert summary.startswith("# Release 1.2\n")
    assert "result: **blocked**" in summary and "1 of 3 done" in summary
    for role, result in (("DEV", "blocked"), ("QA", "blocked"), ("OPS", "done")):
        assert f"| {role} | {result} |" in summary
    assert "exit code 3" in summary  # an excerpt of DEV's report
    assert "Not run:" in summary
    assert "- NOTES.md" in summary  # files changed
    assert "review_report(" not in summary and "[baton]" not in summary
    assert "Delegated work is in" not in summary
