"""Every usage mistake a new user makes: one line naming the problem and the fix, exit 2,
never a traceback; the same failure for every command outside a project, and no store
created anywhere; a bug inside baton prints one line naming its report file."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from baton.cli import app as cli_app
from baton.cli import runs_cmds
from tests.cli.conftest import baton_cli, user_env


def one_line(text: str) -> str:
    lines = [line for line in text.splitlines() if line.strip()]
    assert len(lines) == 1, text
    assert "Traceback" not in text and "Error:" not in text, text
    return lines[0]


@pytest.mark.parametrize(
    ("args", "expected"),
    [
        (["stauts"], "no such command 'stauts' (did you mean `baton status`?)"),
        (["sessons"], "did you mean `baton sessions`?"),
        (["task", "lst"], "task: no such command 'lst' (did you mean `baton task list`?)"),
        (["run"], "run: missing argument 'prompt' — see `baton run --help`"),
        (["up", "--foo"], "up: no such option: --foo — see `baton up --help`"),
        (["status", "--jsn"], "(did you mean --json?)"),
        (["runs", "--limit", "x"], "runs: invalid value for '--limit'"),
        (["run", "--approve", "maybe", "hi"], "--approve 'maybe' is not a preset"),
        (["-C", "/nonexistent/dir", "status"], "-C /nonexistent/dir: no such directory"),
    ],
)
def test_a_usage_mistake_is_one_line_and_exit_2(
    tmp_path: Path, user_home: Path, args: list[str], expected: str
) -> None:
    result = baton_cli(tmp_path, *args, home=user_home)
    assert result.returncode == 2, result.stderr
    line = one_line(result.stderr)
    assert line.startswith("baton: ") and expected in line, line
    assert result.stdout == ""


OUTSIDE = [
    ["up"],
    ["down"],
    ["status"],
    ["sessions"],
    ["task", "list"],
    ["task", "show", "TASK-1"],
    ["task", "new", "--to", "PM", "--subject", "x"],
    ["inbox"],
    ["answer", "req-1", "--allow"],
    ["runs"],
    ["log", "run-1"],
    ["run", "hi"],
    ["probe", "builtin"],
    ["serve", "--port", "0"],
    ["pin", "builtin"],
]


@pytest.mark.parametrize("args", OUTSIDE, ids=lambda a: " ".join(a))
def test_outside_a_project_every_command_fails_the_same_way(
    tmp_path: Path, user_home: Path, args: list[str]
) -> None:
    result = baton_cli(tmp_path, *args, home=user_home)
    assert result.returncode == 2, result.stderr
    line = one_line(result.stderr)
    assert line == (
        f"baton: not in a baton project (no baton.toml in {tmp_path} or any parent) — "
        "run `baton init` in your repository, or pass -C DIR"
    ), line
    # No silent global store: nothing was created under the (temporary) home.
    assert not list(user_home.rglob("baton.db")), list(user_home.rglob("*"))


def test_version_and_short_help(tmp_path: Path, user_home: Path) -> None:
    version = baton_cli(tmp_path, "--version", home=user_home)
    assert version.returncode == 0 and re.fullmatch(r"baton \d+\.\d+\.\d+\n", version.stdout)
    short = baton_cli(tmp_path, "-h", home=user_home)
    assert short.returncode == 0 and "Usage: baton" in short.stdout and "init" in short.stdout
    sub = baton_cli(tmp_path, "run", "-h", home=user_home)
    assert sub.returncode == 0 and "--approve" in sub.stdout
    bare = baton_cli(tmp_path, home=user_home)
    assert bare.returncode == 0 and "Usage: baton" in bare.stdout


def test_approve_help_says_what_each_preset_asks_for(tmp_path: Path, user_home: Path) -> None:
    text = " ".join(baton_cli(tmp_path, "run", "-h", home=user_home).stdout.split())
    for words in ("reads (default)", "ask you", "all: everything runs", "none:", "denied"):
        assert words in text.replace("│ ", ""), text


def test_dash_c_finds_the_project_from_anywhere_and_upward(
    project: Path, tmp_path: Path, user_home: Path
) -> None:
    nested = project / "src" / "deep"
    nested.mkdir(parents=True)
    from_below = baton_cli(nested, "status", home=user_home)
    assert from_below.returncode == 0, from_below.stderr
    assert f"project {project}" in from_below.stdout
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    for args in (["-C", str(nested), "status"], ["status", "-C", str(project)]):
        result = baton_cli(elsewhere, *args, home=user_home)
        assert result.returncode == 0, result.stderr
        assert f"project {project}" in result.stdout


def test_a_missing_run_is_named_plainly(project: Path, user_home: Path) -> None:
    result = baton_cli(project, "log", "run-nope", home=user_home)
    assert result.returncode == 1
    assert one_line(result.stderr) == (
        "baton: no run 'run-nope' in this project — `baton runs` lists them"
    )


def test_a_bug_prints_one_line_and_writes_the_report(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("TMPDIR", str(tmp_path))

    def broken(project: object) -> object:
        raise RuntimeError("the store exploded")

    monkeypatch.setattr(runs_cmds, "project_config", broken)
    with pytest.raises(SystemExit) as exit_info:
        cli_app.main(["runs"])
    assert exit_info.value.code == 1
    captured = capsys.readouterr()
    line = one_line(captured.err)
    match = re.fullmatch(
        r"baton: internal error \(RuntimeError\), a bug in baton — the full report is in "
        r"(\S+); please attach it to an issue",
        line,
    )
    assert match, line
    report = Path(match.group(1)).read_text()
    assert "RuntimeError: the store exploded" in report and "Traceback" in report
    assert "argv: ['baton', 'runs']" in report


def test_shell_completion_completes_commands(tmp_path: Path, user_home: Path) -> None:
    import os
    import subprocess
    import sys

    # typer finds the shell from the parent processes (shellingham), which a test runner
    # under a job supervisor may not have; its own switch makes the shell an argument.
    script = subprocess.run(
        [sys.executable, "-m", "baton", "--show-completion", "bash"],
        cwd=tmp_path,
        env={**user_env(user_home), "_TYPER_COMPLETE_TEST_DISABLE_SHELL_DETECTION": "1"},
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert script.returncode == 0 and "_BATON_COMPLETE" in script.stdout, script.stderr

    env = {
        "PATH": os.environ["PATH"],
        "HOME": str(user_home),
        "_BATON_COMPLETE": "complete_bash",
        "COMP_WORDS": "baton sta",
        "COMP_CWORD": "1",
    }
    done = subprocess.run(
        [sys.executable, "-m", "baton"], env=env, capture_output=True, text=True, timeout=60
    )
    assert done.stdout.split() == ["status"]


def test_json_has_one_shape_rule_on_every_command(project: Path, user_home: Path) -> None:
    import json

    made = baton_cli(
        project, "task", "new", "--to", "PM", "--subject", "Shape", "--json", home=user_home
    )
    assert made.returncode == 0, made.stderr
    task_id = json.loads(made.stdout)["task_id"]
    ran = baton_cli(project, "run", "--json", "--approve", "all", "hello", home=user_home)
    assert ran.returncode == 0, ran.stderr
    for listing in (["runs"], ["agents"], ["sessions"], ["task", "list"], ["inbox", "--all"]):
        result = baton_cli(project, *listing, "--json", home=user_home)
        assert result.returncode == 0, (listing, result.stderr)
        rows = [json.loads(line) for line in result.stdout.splitlines()]
        assert all(isinstance(row, dict) for row in rows), listing
        if listing[0] in ("runs", "agents", "task"):
            assert rows, listing
    for single in (["status"], ["task", "show", task_id[:12]]):
        result = baton_cli(project, *single, "--json", home=user_home)
        assert result.returncode == 0, (single, result.stderr)
        assert result.stdout.count("\n") == 1 and isinstance(json.loads(result.stdout), dict)
    shown = json.loads(baton_cli(project, "task", "show", task_id, "--json", home=user_home).stdout)
    assert shown["task_id"] == task_id and shown["body"].strip() == "Shape"
