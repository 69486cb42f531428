"""A day of use at an 80-column terminal: the terminal items of issue 32, walked in a pty.

Each command runs in a real pseudo-terminal (``tests.cli.pty``) and its output is
replayed through a terminal emulator (pyte), so the test reads the screen a person
reads: what the live spinners overwrote is gone from it, a word the terminal broke is
broken in it.
"""

from __future__ import annotations

import itertools
import re
import socket
import subprocess
import sys
from pathlib import Path

import pexpect
import pyte
import pytest

from tests.cli.conftest import user_env
from tests.cli.pty import baton_wrapper, in_pty

pytestmark = pytest.mark.slow

COLUMNS = 80

RELEASE = """Release check.

- [ ] @QA Run the smoke tests
  ```sh
  python3 --version
  echo "running smoke tests"
  for i in $(seq 1 30); do echo "smoke line $i"; done
  test -f baton.toml && echo "config present"
  ```
- [ ] @OPS Check the build environment
  ```sh
  uname -s
  git --version
  ```
"""


def screen_lines(raw: str, rows: int = 40) -> list[str]:
    """Every line that scrolled past and the final screen, as the terminal shows them."""
    screen = pyte.HistoryScreen(COLUMNS, rows, history=20_000, ratio=0.001)
    stream = pyte.Stream(screen)
    stream.feed(raw.replace("\n", "\r\n") if "\r\n" not in raw else raw)
    history = [
        "".join(line[x].data for x in range(COLUMNS)).rstrip() for line in screen.history.top
    ]
    return history + [line.rstrip() for line in screen.display]


def mid_word_breaks(lines: list[str]) -> list[str]:
    """Full-width lines whose last character and the next line's first are both letters
    or digits: a word the terminal (not baton) broke in two."""
    found = []
    for line, after in itertools.pairwise(lines):
        if len(line) == COLUMNS and line[-1].isalnum() and after[:1].isalnum():
            found.append(f"{line!r} / {after!r}")
    return found


@pytest.fixture
def day(tmp_path: Path, user_home: Path) -> tuple[Path, Path]:
    repo = tmp_path / "repo"
    repo.mkdir()
    env = user_env(user_home)
    subprocess.run(["git", "init", "-q", str(repo)], check=True, env=env)
    return repo, baton_wrapper(tmp_path / "bin")


def run(command: str, repo: Path, bin_dir: Path, home: Path) -> tuple[list[str], int | None]:
    screen = in_pty(command, cwd=repo, home=home, bin_dir=bin_dir)
    assert "Traceback" not in screen.text, screen.text[-3000:]
    return screen_lines(screen.raw), screen.status


def text(lines: list[str]) -> str:
    return "\n".join(lines)


def test_a_day_at_an_80_column_terminal(day: tuple[Path, Path], user_home: Path) -> None:
    repo, bin_dir = day

    def sh(command: str) -> tuple[list[str], int | None]:
        return run(command, repo, bin_dir, user_home)

    # init says what to commit.
    lines, status = sh("baton init")
    assert status == 0
    assert "git add baton.toml fcop .gitignore" in text(lines).replace("\n", " ")
    # ... and the user does: task trees branch from that commit.
    _, status = sh(
        "git add baton.toml fcop .gitignore && "
        "git -c user.name=Dana -c user.email=dana@example.org commit -qm 'baton init'"
    )
    assert status == 0

    # The task-body format is in `task new -h`, and help paragraphs are wrapped once.
    lines, _ = sh("baton task new -h")
    help_text = text(lines)
    for needed in ("- [ ] @ROLE", "```sh", "after:", "```file PATH"):
        assert needed in help_text, needed
    start = next(i for i, line in enumerate(lines) if "The body (Markdown" in line)
    assert len(lines[start]) >= 70, lines[start : start + 3]  # not a short, ragged line

    # Bad input: one line, what is wrong and how to fix it.
    (repo / "EMPTY.md").write_text("  \n\n")
    (repo / "LATIN1.md").write_bytes("caf\xe9\n".encode("latin-1"))
    for command, code, words in (
        ("baton task new --to QA --subject x --body-file EMPTY.md", 2, "is empty: the role"),
        ("baton task new --to QA --subject x --body-file NOPE.md", 1, "no body file NOPE.md —"),
        ("baton task new --to QA --subject x --body-file LATIN1.md", 1, "is not UTF-8 text"),
        ("baton task new --to QA --subject ' ' --body-file EMPTY.md", 2, "give --subject"),
        ("baton answer req-nope --allow", 1, "`baton inbox` lists"),
        ("baton run --agent opencode hi", 3, "`baton agents install NAME`"),
    ):
        lines, status = sh(command)
        said = text(lines)
        assert status == code, (command, said)
        assert words in said.replace("\n", " "), (command, said)
        assert "[Errno" not in said and "codec" not in said, said

    # doctor and probe take the agent the same way; agents has no stray │.
    lines, status = sh("baton doctor builtin")
    assert status == 0 and "● builtin" in text(lines)
    lines, _ = sh("baton agents")
    installs = [line for line in lines if line.startswith("install ")]
    assert installs and not any("│" in line for line in installs), installs

    # A model endpoint that is down: one line, before anything is launched.
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        closed = probe.getsockname()[1]
    with (repo / "baton.toml").open("a", encoding="utf-8") as toml:
        toml.write(
            f'\n[profiles.local]\nextends = "opencode"\n'
            f'endpoint = "http://127.0.0.1:{closed}/v1"\nendpoint_model = "m"\n'
        )
    down = in_pty("baton run --agent local hi", cwd=repo, home=user_home, bin_dir=bin_dir)
    said = [line for line in down.text.split("\n") if line.strip()]
    assert down.status == 3, said
    # One error line (wrapped at word boundaries by the 80 columns), no agent dump.
    assert [line for line in said if line.startswith("baton:")] == said[:1] and len(said) <= 3
    assert "is not reachable: connection refused" in " ".join(x.strip() for x in said), said

    # The team at work, at 80 columns.
    (repo / "TASK.md").write_text(RELEASE)
    lines, status = sh("baton task new --to PM --subject 'Release check' --body-file TASK.md")
    assert status == 0
    lines, status = sh("baton up --until-idle")
    live = text(lines)
    assert status == 0, live[-3000:]
    # Titled by what the step does; tool results in one line, never the agent's orders.
    assert "sh: for i in $(seq 1 30)" in live
    assert "sh: python3 --version\n" not in live + "\n"
    assert '{"report_id"' not in live and "Stop now" not in live
    assert re.search(r"→ report_id REPORT-", live), live[-3000:]
    # Long output: its head and its tail, and how to see it all.
    assert "Python 3" in live and "smoke line 30" in live and "smoke line 15" not in live
    run_id = re.search(r"run (run-\S+) · replay", live).group(1)  # type: ignore[union-attr]
    assert f"baton log {run_id} --full" in live.replace("\n", " ").replace("  ", " ")
    # Nothing baton printed was overwritten by the spinners, or cut mid-word.
    for expected in ("plan (2 steps)", "✔ turn completed", "config present", "git version"):
        assert expected in live, expected
    assert mid_word_breaks(lines) == [], mid_word_breaks(lines)

    lines, _ = sh(f"baton log {run_id} --full")
    assert "smoke line 15" in text(lines)

    lines, _ = sh("baton sessions")
    assert re.search(r"last report\s+REPORT-", text(lines)), text(lines)
    assert mid_word_breaks(lines) == [], mid_word_breaks(lines)
    lines, _ = sh("baton status")
    assert mid_word_breaks(lines) == [], mid_word_breaks(lines)
    lines, _ = sh("baton runs")
    assert "`baton log ID` replays one" in text(lines)

    # A pipe gets whole lines.
    long_subject = "A subject long enough to have been folded into three lines at 80 columns"
    sh(f"baton task new --to DEV --subject '{long_subject}'")
    sh("baton task list | cat > list.txt")  # what a pipe receives, before any terminal
    piped = [
        line
        for line in (repo / "list.txt").read_text(encoding="utf-8").split("\n")
        if long_subject[:20] in line
    ]
    assert piped and long_subject in piped[0], piped


def test_at_a_terminal_the_prompt_shows_its_choices_and_headless_says_why(
    day: tuple[Path, Path], user_home: Path
) -> None:
    repo, bin_dir = day
    assert in_pty("baton init", cwd=repo, home=user_home, bin_dir=bin_dir).status == 0
    (repo / "p.md").write_text("```sh\necho tty-step-ran\n```\n")
    env = user_env(user_home, TERM="xterm-256color")
    env["PATH"] = f"{bin_dir}:{env['PATH']}"
    env.pop("COLUMNS", None)
    child = pexpect.spawn(
        "bash",
        ["--norc", "--noprofile", "-c", 'baton run --wait-timeout 60 "$(cat p.md)"'],
        cwd=str(repo),
        env=env,
        dimensions=(40, COLUMNS),
        encoding="utf-8",
        timeout=120,
    )
    child.expect(r"allow it\? \(y = allow once.*n or Enter = deny\)")
    child.sendline("y")
    child.expect(pexpect.EOF)
    child.close()
    assert child.exitstatus == 0
    assert "tty-step-ran" in (child.before or "")

    # stdin from a file, stdout a terminal: no prompt, and it says why.
    screen = in_pty(
        'baton run --wait-timeout 0 "$(cat p.md)" < p.md',
        cwd=repo,
        home=user_home,
        bin_dir=bin_dir,
    )
    said = text(screen_lines(screen.raw)).replace("\n", " ")
    assert "stdin is not a terminal, so nobody is asked here" in said, said
    assert "denied at once (--wait-timeout 0)" in said
    assert sys.executable  # the wrapper runs this checkout's baton
