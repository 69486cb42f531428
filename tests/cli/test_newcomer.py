"""A new user's first ten minutes, in a real pty, with the README's commands.

A fresh git repository, `baton` on PATH (what `pipx install` gives), and the five
commands of the README's "Use baton on your own repository", then the answer and the
commands people reach for next. Each screen is checked as a person would read it: no
traceback, every id shown whole (never cut or wrapped apart), the answer hint present,
exit codes as documented.
"""

from __future__ import annotations

import re
import subprocess
from pathlib import Path

from tests.cli.conftest import user_env
from tests.cli.pty import Screen, baton_wrapper, in_pty

README = Path(__file__).resolve().parents[2] / "README.md"

TASK = """Release check for my project.

- [ ] @QA Run the smoke tests
  ```sh
  echo smoke-ok
  ```
- [ ] @OPS Check the environment
  ```sh
  uname -s
  ```
"""

ID_SHAPES = {
    "task": re.compile(r"TASK-[0-9a-f]*"),
    "request": re.compile(r"req-[0-9a-f]*"),
    "run": re.compile(r"run-[0-9]{8}-[0-9]{6}-[0-9a-f]*|run-[0-9-]*"),
}
WHOLE = {"task": 32 + 5, "request": 16 + 4, "run": len("run-20261201-112127-b6878b")}


def ids_whole(screen: Screen) -> list[str]:
    """Every id-looking token on the screen that is not complete."""
    cut = []
    for kind, shape in ID_SHAPES.items():
        for match in shape.finditer(screen.text):
            token = match.group()
            if kind == "run" and token in ("run-", "run-nope"):
                continue
            if len(token) != WHOLE[kind]:
                cut.append(token)
    return cut


def test_readme_first_screen_gets_a_newcomer_to_their_own_repository(
    tmp_path: Path, user_home: Path
) -> None:
    readme = README.read_text(encoding="utf-8")
    section = readme.split("## Use baton on your own repository", 1)[1].split("## ", 1)[0]
    commands = [
        line.split("#", 1)[0].strip()
        for line in section.split("```sh", 1)[1].split("```", 1)[0].splitlines()
        if line.strip()
    ]
    assert len(commands) == 6 and commands[0].startswith("pipx install")
    assert "baton init" in commands[1] and commands[2].startswith("baton task new --to PM")
    assert commands[3] == "baton up --until-idle" and commands[4] == "baton inbox"
    assert commands[5] == "baton up --until-idle"  # after the answer: it merges and closes

    repo = tmp_path / "your-repo"
    repo.mkdir()
    subprocess.run(["git", "init", "-q", str(repo)], check=True, env=user_env(user_home))
    (repo / "README.md").write_text("# your repository\n", encoding="utf-8")
    for git in (["add", "README.md"], ["commit", "-qm", "the user's own history"]):
        subprocess.run(
            ["git", "-c", "user.name=Dana", "-c", "user.email=dana@example.org", *git],
            cwd=repo,
            check=True,
            env=user_env(user_home),
        )
    (repo / "TASK.md").write_text(TASK, encoding="utf-8")
    bin_dir = baton_wrapper(tmp_path / "bin")  # stands for `pipx install`

    def step(command: str, expected_status: int = 0) -> Screen:
        screen = in_pty(command, cwd=repo, home=user_home, bin_dir=bin_dir)
        assert "Traceback" not in screen.text, (command, screen.text[-3000:])
        assert screen.status == expected_status, (command, screen.status, screen.text[-3000:])
        assert ids_whole(screen) == [], (command, ids_whole(screen), screen.text[-3000:])
        return screen

    init = step("baton init")  # commands[1] without the `cd`, which in_pty does
    assert "next: baton task new" in init.text and ".gitignore" in init.text
    created = step(commands[2])
    task_id = re.search(r"TASK-[0-9a-f]{32}", created.text)
    assert task_id, created.text
    up = step(commands[3])
    assert "baton up · watching 4 roles (PM, DEV, QA, OPS)" in up.text
    assert "QA ▏" in up.text and "OPS ▏" in up.text  # interleaved output says who speaks
    assert "✘" not in up.text  # nothing alarming: no failed step, turn or session
    assert "plan (1 step)" in up.text and "plan (1 steps)" not in up.text
    assert "waiting for you 1" in up.text
    inbox = step(commands[4])
    request = re.search(r"(req-[0-9a-f]{16})\s+review", inbox.text)
    assert request, inbox.text
    hint = f"baton answer {request.group(1)} --approve | --reject [--reason TEXT]"
    assert hint in inbox.text
    answered = step(f"baton answer {request.group(1)[:10]} --approve")
    assert f"{request.group(1)}: answered" in answered.text
    done = step(commands[5])
    assert "waiting for you 0" in done.text and "needs attention 0" in done.text
    board = step("baton task list --all")
    assert task_id.group() in board.text
    shown = step(f"baton task show {task_id.group()[5:13]}")
    assert "Release check" in shown.text and "child TASK-" in shown.text
    runs = step("baton runs")
    run_ids = re.findall(r"run-\d{8}-\d{6}-[0-9a-f]{6}", runs.text)
    assert len(run_ids) == 2
    replay = step(f"baton log {run_ids[-1][:20]}")  # the first run, by prefix
    assert "✔ turn completed" in replay.text
    step("baton status")
    mistake = step("baton stauts", expected_status=2)
    assert "did you mean `baton status`?" in mistake.text
