"""The offline team loop end to end, as the README's main command runs it.

Every step is a real FCoP file, a real ACP session of the built-in agent and a real
MCP tool call: PM delegates to QA and OPS, they run their steps and report, PM
consolidates and reports to ADMIN, the review waits in the ledger, the human
approves from another process, and the next ``baton up`` applies it (T4).
"""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest

from tests.support.project import baton_in, commit_all

TASK = """Release check.

- [ ] @QA Run the smoke tests
  ```sh
  echo smoke-ok
  ```
- [ ] @OPS Check the environment
  ```sh
  echo env-ok
  ```
"""


@pytest.fixture
def repo(tmp_path: Path) -> Path:
    root = tmp_path / "repo"
    root.mkdir()
    subprocess.run(["git", "init", "-q", str(root)], check=True)
    return root


def _git(repo: Path, *args: str) -> str:
    done = subprocess.run(["git", *args], cwd=repo, capture_output=True, text=True, check=True)
    return done.stdout.strip()


def baton(repo: Path, *args: str, timeout: float = 240) -> subprocess.CompletedProcess[str]:
    return baton_in(repo, *args, timeout=timeout)


def test_team_loop_reaches_a_human_approval_and_closes(repo: Path) -> None:
    assert baton(repo, "init").returncode == 0
    commit_all(repo)  # as baton init tells a new repository to: the tree branches from it
    (repo / "TASK.md").write_text(TASK.replace("echo smoke-ok", "echo smoke-ok | tee smoke.txt"))
    created = baton(
        repo, "task", "new", "--to", "PM", "--subject", "Release", "--body-file", "TASK.md"
    )
    assert created.returncode == 0, created.stderr
    up = baton(repo, "up", "--until-idle", "--json")
    assert up.returncode == 0, up.stderr[-2000:]
    events = [json.loads(line) for line in up.stdout.splitlines() if line.startswith("{")]
    types = [e["type"] for e in events]
    assert types.count("session.started") == 3, "PM, QA and OPS each got a session"
    mcp_calls = [
        e["payload"]["title"]
        for e in events
        if e["type"] == "tool.execution.completed" and e["payload"]["kind"] == "other"
    ]
    assert sum(t.startswith("delegate @") for t in mcp_calls) == 2  # create_task via MCP
    assert sum("write_report" in t for t in mcp_calls) >= 3
    outputs = " ".join(
        (e["payload"].get("output") or {}).get("tail", "")
        for e in events
        if e["type"] == "tool.execution.completed"
    )
    assert "smoke-ok" in outputs and "env-ok" in outputs
    created = [e["payload"] for e in events if e["type"] == "request.created"]
    permissions = [r for r in created if r["kind"] == "permission"]
    assert len(permissions) == 2  # each sh step asked; the role preset "all" allowed once
    answered = [e["payload"] for e in events if e["type"] == "request.answered"]
    assert all(a["decided_by"] == "policy" and a["rule"] for a in answered)
    reviews = [r for r in created if r["kind"] == "review"]
    assert len(reviews) == 1
    status = json.loads(baton(repo, "status", "--json").stdout)
    assert status["board"]["counts"]["done"] == 2 and status["board"]["counts"]["review"] == 1
    reports = sorted((repo / "fcop" / "reports").glob("REPORT-*.md"))
    assert len(reports) == 3
    # The tree worked on its own branch: QA's file is there, not in the checkout.
    assert not (repo / "smoke.txt").exists()
    branches = _git(repo, "branch", "--list", "baton/*", "--format=%(refname:short)").split()
    assert len(branches) == 1
    assert _git(repo, "show", f"{branches[0]}:smoke.txt") == "smoke-ok"
    answer = baton(repo, "answer", reviews[0]["request_id"], "--accept", "--reason", "ship it")
    assert answer.returncode == 0, answer.stderr
    again = baton(repo, "up", "--until-idle")
    assert again.returncode == 0, again.stderr[-2000:]
    assert (repo / "smoke.txt").read_text() == "smoke-ok\n"  # approved: merged into main
    assert _git(repo, "branch", "--list", "baton/*") == ""  # merged: branch and worktree gone
    assert not list((repo / ".baton" / "worktrees").iterdir())
    status = json.loads(baton(repo, "status", "--json").stdout)
    assert status["board"]["counts"]["done"] == 3 and status["board"]["counts"]["review"] == 0
    assert not [r for r in status["pending_reviews"] if r["status"] == "pending"]


def test_init_keeps_baton_state_out_of_commits(repo: Path) -> None:
    (repo / ".gitignore").write_text("node_modules/")
    assert baton(repo, "init").returncode == 0
    assert (repo / ".gitignore").read_text().splitlines()[-1] == ".baton/"
    assert baton(repo, "init").returncode == 0
    assert (repo / ".gitignore").read_text().count(".baton/") == 1
    key = repo / ".baton" / "coordination" / "authority.key"
    assert key.exists() and key.stat().st_mode & 0o077 == 0
