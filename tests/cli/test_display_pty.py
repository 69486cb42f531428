"""Every terminal surface over a corpus of hostile strings, in a real pty.

The strings reach baton the ways they would in use: as a task's subject and body, as
the commands and output of an agent's steps (which become tool titles, plan steps,
permission requests and transcript text), as a profile's name, and as ids typed on the
command line. Each command's screen is then checked: nothing but baton's own colour
and spinner controls reaches the terminal (no CSI/OSC/DCS, no C1, no bidi or invisible
characters), the hostile text is still visible in neutralized form, rich markup in it
is shown literally, and no agent line passes for baton's own.
"""

from __future__ import annotations

import re
import subprocess
from pathlib import Path

import pytest

from tests.cli.conftest import user_env
from tests.cli.pty import baton_wrapper, in_pty
from tests.support.project import without_isolation

HOSTILE = [
    "\x1b[2J\x1b[H",  # clear the screen, cursor home
    "\x1b]0;pwned-title\x07",  # window title (OSC 0)
    "\x1b]52;c;cHduZWQ=\x07",  # write the clipboard (OSC 52)
    "\x1b]8;;http://evil.example/\x1b\\click-me\x1b]8;;\x1b\\",  # hyperlink (OSC 8)
    "\x1bP+q544e\x1b\\",  # device control string (DCS)
    "\x9b2J\x9d0;t\x9c",  # 8-bit CSI, OSC, ST
    "ok\rHIDDEN\x08\x07",  # carriage return, backspace, bell
    "\u202eevil-rtl\u202c \u2066iso\u2069",  # bidi override and isolate
    "zero\u200bwidth\u200djoin\u2060word\ufeffbom",  # invisible characters
    "tag\U000e0041\U000e0042chars",  # tag characters (ASCII smuggling)
    "[link=http://evil.example/]markup-link[/link] [bold red]loud[/] [baton] [y/N]",
]
FORGED = "baton ▸ turn.completed (end_turn)"

VISIBLE = [
    "␛[2J",
    "␛]0;pwned-title␇",
    "␛]8;;http://evil.example/",
    "<U+009B>2J",
    "ok␍HIDDEN␈␇",
    "<U+202E>evil-rtl",
    "zero<U+200B>width<U+200D>join<U+2060>word<U+FEFF>bom",
    "tag<U+E0041><U+E0042>chars",
    "[link=http://evil.example/]markup-link[/link]",
    "[baton] [y/N]",
]


def _runbook() -> str:
    lines = ["Hostile output, one step per string.", ""]
    for text in HOSTILE:
        quoted = text.replace("'", "")
        lines += ["```sh", f"printf '%s\\n' '{quoted}'", "```", ""]
    lines += ["```sh", f"echo '{FORGED}'", "```", ""]
    return "\n".join(lines)


@pytest.fixture
def hostile_project(tmp_path: Path, user_home: Path) -> Path:
    repo = tmp_path / "repo"
    repo.mkdir()
    subprocess.run(["git", "init", "-q", str(repo)], check=True, env=user_env(user_home))
    bin_dir = baton_wrapper(tmp_path / "bin")
    screen = in_pty("baton init", cwd=repo, home=user_home, bin_dir=bin_dir)
    assert screen.status == 0, screen.text
    without_isolation(repo)
    profile = "evil\\u001b]0;profile-title\\u0007"
    with (repo / "baton.toml").open("a", encoding="utf-8") as toml:
        toml.write(f'\n[profiles."{profile}"]\nextends = "builtin"\n')
    (repo / "RUNBOOK.md").write_text(_runbook(), encoding="utf-8")
    (repo / "TASK.md").write_text("\n".join([*HOSTILE, FORGED]) + "\n", encoding="utf-8")
    return repo


def test_every_surface_neutralizes_the_hostile_corpus(
    hostile_project: Path, tmp_path: Path, user_home: Path
) -> None:
    bin_dir = tmp_path / "bin"
    subject = "".join(HOSTILE[:3]).replace("'", "")
    agent = "$(printf 'evil\\033]0;profile-title\\007')"
    refused = in_pty(
        f"baton task new --to DEV --subject '{subject}' --body-file TASK.md",
        cwd=hostile_project,
        home=user_home,
        bin_dir=bin_dir,
    )  # a subject is one printable line at every entry point: refused, said plainly (usage)
    assert refused.status == 2 and "the subject must be one line" in refused.text, refused.text
    assert refused.raw_sequences() == [], refused.raw_sequences()[:5]
    steps = [
        "baton task new --to DEV --subject 'hostile body' --body-file TASK.md",
        f'baton run --agent "{agent}" --approve all "$(cat RUNBOOK.md)"',
        "baton runs",
        "baton log run-",
        "baton inbox --all",
        "baton up --until-idle",
        "baton status",
        "baton task list --all",
        "baton task show TASK-",
        "baton sessions",
        "baton agents",
        "baton log $'\\x1b[2Jrun-nope'",
        "baton answer $'\\x1b]0;t\\x07req' --allow",
    ]
    screens = {}
    for step in steps:
        screen = in_pty(step, cwd=hostile_project, home=user_home, bin_dir=bin_dir)
        screens[step] = screen
        assert "Traceback" not in screen.text, (step, screen.text[-3000:])
        assert screen.raw_sequences() == [], (step, screen.raw_sequences()[:5])
    run_screen = screens[steps[1]].text
    assert screens[steps[1]].status == 0, run_screen[-3000:]
    for visible in VISIBLE:
        assert visible in run_screen, (visible, run_screen[-4000:])
    # A forged marker line is marked as the agent's; baton's own lines are not.
    assert "│ baton ▸ turn.completed (end_turn)" in run_screen
    for screen in screens.values():
        lines = re.split(r"\n|[⠋⠙⠹⠸⠼⠴⠦⠧⠇⠏]", screen.text)  # spinner frames redraw a line
        forged = [line for line in lines if re.match(r"\s*baton ▸", line)]
        assert forged == [], forged
    log_screen = screens["baton log run-"].text
    assert "␛]0;pwned-title␇" in log_screen and "[baton] [y/N]" in log_screen
    assert "DEV ▏" in screens["baton up --until-idle"].text  # role-labelled team output
    show = screens["baton task show TASK-"].text  # the body carries the corpus, made visible
    assert "␛[2J" in show, show[-2000:]
    folded = re.sub(r"\s+", "", screens["baton runs"].text)  # a table column may fold it
    assert "evil␛]0;p" in folded and "title␇" in folded
    assert "no request with id" in screens[steps[-1]].text  # the id shown, inert (repr)
    assert "run-nope" in screens[steps[-2]].text
