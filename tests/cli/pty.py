"""Running shell commands in a real pseudo-terminal and reading what reaches the screen."""

from __future__ import annotations

import re
import sys
from dataclasses import dataclass
from pathlib import Path

import pexpect

from tests.cli.conftest import user_env

# What baton (rich) itself may send to a terminal: colours and attributes (SGR), and the
# cursor/line controls of its live spinners. Anything else that starts with ESC, any
# C1 control, BEL or backspace came from somewhere else.
_OWN = re.compile(
    r"\x1b\[[0-9;]*m"  # SGR
    r"|\x1b\[\?25[lh]"  # hide/show cursor
    r"|\x1b\[[0-9]*[AK]"  # cursor up, erase line (Live redraws)
    r"|\x1b\[2K"
    r"|\r"  # back to column 0 (a line end, a spinner redraw); agents' CRs are shown as ␍
)
_RAW = re.compile(
    "[\x00-\x08\x0b-\x1f\x7f\x80-\x9f"
    "\u061c\u200b-\u200f\u2028-\u202e\u2060-\u2064\u2066-\u206f\ufeff"
    "\U000e0000-\U000e007f]"
)


@dataclass
class Screen:
    raw: str
    """Everything written to the terminal, decoded."""
    status: int | None

    @property
    def text(self) -> str:
        """The screen without baton's own colour and spinner controls."""
        return _OWN.sub("", self.raw).replace("\r\n", "\n")

    def raw_sequences(self) -> list[str]:
        """Controls and invisible characters left once baton's own are removed."""
        return [
            repr(self.text[max(0, m.start() - 20) : m.end() + 20]) for m in _RAW.finditer(self.text)
        ]


def baton_wrapper(bin_dir: Path) -> Path:
    """A ``baton`` on PATH that runs this checkout (what ``pipx install`` would give)."""
    bin_dir.mkdir(parents=True, exist_ok=True)
    script = bin_dir / "baton"
    script.write_text(f'#!/bin/sh\nexec "{sys.executable}" -m baton "$@"\n')
    script.chmod(0o755)
    return bin_dir


def in_pty(command: str, *, cwd: Path, home: Path, bin_dir: Path, timeout: float = 240) -> Screen:
    """``bash -c COMMAND`` in an 80×40 pty with TERM=xterm-256color; waits for it to end."""
    env = user_env(home, TERM="xterm-256color")
    env["PATH"] = f"{bin_dir}:{env['PATH']}"
    env.pop("COLUMNS", None)
    child = pexpect.spawn(
        "bash",
        ["--norc", "--noprofile", "-c", command],
        cwd=str(cwd),
        env=env,
        dimensions=(40, 80),
        encoding="utf-8",
        codec_errors="replace",
        timeout=timeout,
    )
    chunks: list[str] = []
    while True:
        try:
            chunks.append(child.read_nonblocking(65536, timeout=timeout))
        except pexpect.EOF:
            break
    child.close()
    return Screen("".join(chunks), child.exitstatus)
