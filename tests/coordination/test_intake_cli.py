"""``status``, ``task new`` and ``up`` as a user runs them, with hostile files all over ``fcop/``.

Failing-first: before intake, the alias bomb hung ``up`` (22.7 GB), 5,000-deep
nesting crashed ``status`` and ``task new`` with a RecursionError traceback, and a
subject's escape sequences reached the terminal raw.
"""

from __future__ import annotations

import json
import os
import re
import sys
from pathlib import Path

import pytest

from tests.support.hostile import alias_bomb, run_measured, with_header
from tests.support.project import commit_all, git_repo, stock_fcop_validate, without_isolation

BAD_BYTES = ("\x1b", "\u202e", "\x07", "\x9b")


def run(repo: Path, *args: str, timeout: float = 240) -> tuple[int, str, str, float]:
    """``baton ARGS`` in ``repo``: (exit code, stdout, stderr, peak RSS MiB of its process tree)."""
    env = {
        "PATH": os.environ["PATH"],
        "HOME": str(repo.parent / "home"),
        "XDG_STATE_HOME": str(repo.parent / "xdg"),
        "COLUMNS": "200",
    }
    done = run_measured([sys.executable, "-m", "baton", *args], cwd=repo, env=env, timeout=timeout)
    return done.code, done.out, done.err, done.peak_mib


@pytest.fixture
def repo(tmp_path: Path) -> Path:
    root = git_repo(tmp_path)
    code, _, err, _ = run(root, "init")
    assert code == 0, err
    commit_all(root)  # a repository with history: the tree branches from it
    return root


def plant(repo: Path) -> dict[str, str]:
    """Hostile files in every place Core reads; returns origin -> expected reason."""
    code, out, err, _ = run(repo, "task", "new", "--to", "DEV", "--subject", "template", "--json")
    assert code == 0, err
    task_id = json.loads(out)["task_id"]
    fcop = repo / "fcop"
    template = (fcop / "_lifecycle" / "inbox" / f"{task_id}.md").read_text()
    planted = {
        "fcop/_lifecycle/inbox/TASK-bomb.md": ("yaml_aliases", alias_bomb()),
        "fcop/_lifecycle/active/TASK-deep.md": ("yaml_too_deep", "d: " + "[" * 5000 + "]" * 5000),
        "fcop/_lifecycle/review/TASK-ansi.md": ("unsafe_text", None),
    }
    for origin, (_, extra) in planted.items():
        name = Path(origin).stem
        subject = '"\\e]0;owned\\a\\e[2J\\u202eevil"' if extra is None else None
        (repo / origin).write_text(with_header(template, name, extra or "", subject=subject))
    with (fcop / "_lifecycle" / "done" / "TASK-huge.md").open("wb") as handle:
        handle.truncate(2 * 1024**3)
    (fcop / "operations" / "create-deep.json").write_text("[" * 100_000 + "]" * 100_000)
    reasons = {origin: reason for origin, (reason, _) in planted.items()}
    reasons["fcop/_lifecycle/done/TASK-huge.md"] = "too_large"
    reasons["fcop/operations/create-deep.json"] = "yaml_too_deep"
    return reasons


def test_status_reads_around_every_hostile_file(repo: Path) -> None:
    reasons = plant(repo)
    code, out, err, peak = run(repo, "status", "--json", timeout=120)
    assert code == 0, err
    data = json.loads(out)
    unsafe = {u["path"]: u["reason"] for u in data["unsafe_files"]}
    open_stages = ("inbox", "active", "review")
    expected = {o: r for o, r in reasons.items() if o.split("/")[2] in open_stages}
    assert unsafe == expected
    assert [t["subject"] for t in data["board"]["open"]] == ["template"]
    assert peak < 200, f"status peaked at {peak:.0f} MiB"
    code, out, err, _ = run(repo, "status", timeout=120)
    assert code == 0, err
    assert "TASK-ansi.md" in out and not any(b in out for b in BAD_BYTES)


def test_task_new_is_not_stopped_by_hostile_files_it_never_reads(repo: Path) -> None:
    """baton's O(1) writer reads only the new TASK's own relations: hostile files elsewhere in
    fcop/ neither stop nor slow `task new` (fcop's own O(history) scan would refuse them;
    tests/coordination/test_intake_screen.py covers that path); `up` quarantines them."""
    planted = plant(repo)
    code, out, err, peak = run(repo, "task", "new", "--to", "QA", "--subject", "next", timeout=120)
    assert code == 0, err[-2000:]
    assert "Traceback" not in err and peak < 200
    created = re.search(r"TASK-[0-9a-f]{32}", out)
    assert created, out
    assert (repo / "fcop" / "_lifecycle" / "inbox" / f"{created.group(0)}.md").is_file()
    assert planted  # the hostile files are still there, untouched, for `up` to quarantine
    assert (repo / "fcop" / "_lifecycle" / "done" / "TASK-huge.md").exists()


def test_task_new_refuses_a_subject_that_would_drive_the_terminal(repo: Path) -> None:
    code, _, err, _ = run(repo, "task", "new", "--to", "QA", "--subject", "ok\x1b[2J")
    assert code == 1 and "one line of printable text" in err
    assert not list((repo / "fcop" / "_lifecycle" / "inbox").glob("TASK-*.md"))


def test_up_quarantines_every_hostile_file_stores_the_refusals_and_keeps_serving(
    repo: Path,
) -> None:
    reasons = plant(repo)
    (repo / "GOOD.md").write_text("Say hello.\n\n```sh\necho hello-from-qa\n```\n")
    code, out, err, peak = run(repo, "up", "--until-idle", "--json")
    assert code == 0, err[-3000:]
    events = [json.loads(line) for line in out.splitlines() if line.startswith("{")]
    rejected = {
        e["payload"]["subject"]: e["payload"]["reason"]
        for e in events
        if e["type"] == "security.payload_rejected" and e["payload"]["control"] == "fcop_intake"
    }
    names = {Path(o).name: r for o, r in reasons.items()}
    for subject, reason in rejected.items():
        assert reason.startswith(names.get(Path(subject).name, "?")), (subject, reason)
    assert {Path(s).name for s in rejected} == set(names)
    run_id = events[0]["run_id"]
    code, log, _, _ = run(repo, "log", run_id, "--json")
    stored = [json.loads(line) for line in log.splitlines()]
    assert sum(e["type"] == "security.payload_rejected" for e in stored) == len(names)
    quarantine = repo / ".baton" / "quarantine"
    sidecars = [json.loads(p.read_text()) for p in quarantine.glob("*.reason.json")]
    assert sorted(s["origin"] for s in sidecars) == sorted(reasons)
    for origin in reasons:
        assert not os.path.lexists(repo / origin)
    issues = [p.read_text() for p in (repo / "fcop" / "issues").glob("ISSUE-*.md")]
    assert len([i for i in issues if "refused" in i]) >= len(reasons)
    assert peak < 200, f"baton up peaked at {peak:.0f} MiB"
    # Still serving: the template task (DEV) ran and waits for the human's review.
    code, out, err, _ = run(repo, "status", "--json")
    status = json.loads(out)
    assert status["unsafe_files"] == []
    assert [r["subject"] for r in status["pending_reviews"]] == ["template"]
    # And a new task can be created again.
    code, _, err, _ = run(
        repo, "task", "new", "--to", "QA", "--subject", "after", "--body-file", "GOOD.md"
    )
    assert code == 0, err
    assert stock_fcop_validate(repo)["valid"] is True


AGENT_WRITES_HOSTILE_FILES = """Release.

- [ ] @DEV build, and (being hostile) poison the workspace
  ```sh
  python3 - <<'PY'
  import pathlib
  fcop = pathlib.Path("fcop")
  bomb = ["a0: &a0 [x, x, x, x, x, x, x, x, x]"] + [
      f"a{i}: &a{i} [" + ", ".join([f"*a{i - 1}"] * 9) + "]" for i in range(1, 9)
  ]
  head = "---\\ntype: REPORT\\nreport_id: REPORT-bomb\\n"
  (fcop / "reports" / "REPORT-bomb.md").write_text(head + "\\n".join(bomb) + "\\n---\\n")
  deep = "---\\ntype: TASK\\nd: " + "[" * 5000 + "\\n---\\n"
  (fcop / "_lifecycle" / "done" / "TASK-deep.md").write_text(deep)
  (fcop / "operations" / "create-deep.json").write_text("[" * 100000)
  PY
  echo poisoned
  ```
- [ ] @QA check after DEV
  ```sh
  echo qa-ok
  ```
"""


def test_up_keeps_serving_when_an_agent_poisons_fcop_mid_run(repo: Path) -> None:
    """DEV's own write_report fails on the file it planted (Core parses every REPORT); the
    sweep after its turn quarantines the files, the reminder turn reports, QA and PM finish.

    Without isolation: in a tree's worktree the agent only poisons the worktree's copy of
    ``fcop/`` (and a branch that changes ``fcop/`` is never merged, test_worktrees.py)."""
    without_isolation(repo)
    (repo / "TASK.md").write_text(AGENT_WRITES_HOSTILE_FILES)
    code, _, err, _ = run(
        repo, "task", "new", "--to", "PM", "--subject", "poison", "--body-file", "TASK.md"
    )
    assert code == 0, err
    code, out, err, peak = run(repo, "up", "--until-idle", "--json")
    assert code == 0, err[-3000:]
    events = [json.loads(line) for line in out.splitlines() if line.startswith("{")]
    rejected = sorted(
        Path(e["payload"]["subject"]).name
        for e in events
        if e["type"] == "security.payload_rejected"
    )
    assert rejected == ["REPORT-bomb.md", "TASK-deep.md", "create-deep.json"]
    status = json.loads(run(repo, "status", "--json")[1])
    assert [r["subject"] for r in status["pending_reviews"]] == ["poison"]
    assert status["unsafe_files"] == [] and peak < 200
    assert stock_fcop_validate(repo)["valid"] is True


@pytest.mark.parametrize("manifest", ["deep", "huge"])
def test_a_hostile_manifest_stops_commands_with_a_message_not_a_traceback(
    repo: Path, manifest: str
) -> None:
    path = repo / "fcop" / "fcop.json"
    path.unlink()
    if manifest == "deep":
        path.write_text("[" * 200_000 + "]" * 200_000)
    else:
        with path.open("wb") as handle:
            handle.truncate(2 * 1024**3)
    for args in (
        ("status",),
        ("task", "new", "--to", "QA", "--subject", "x"),
        ("up", "--until-idle"),
    ):
        code, _, err, peak = run(repo, *args, timeout=120)
        assert code != 0 and "Traceback" not in err, (args, err[-2000:])
        assert "fcop.json" in err and peak < 200
