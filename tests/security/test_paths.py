"""Containment: traversal, symlinks, outside paths, control characters, special files."""

from __future__ import annotations

import os
import socket
from pathlib import Path

import pytest

from baton.errors import SecurityError
from baton.security.paths import (
    MAX_ID_LENGTH,
    OUTSIDE_MASK,
    PRIVATE_MASK,
    display_path,
    open_regular,
    resolve_inside,
    sanitize_id,
)


@pytest.fixture
def ws(tmp_path: Path) -> Path:
    root = tmp_path / "ws"
    (root / "src").mkdir(parents=True)
    (root / "src" / "a.py").write_text("x")
    (tmp_path / "secret.txt").write_text("s")
    return root


def test_inside_relative_and_absolute(ws: Path) -> None:
    assert (
        resolve_inside(ws, "src/a.py", must_exist=True, regular_file=True)
        == ws.resolve() / "src/a.py"
    )
    assert (
        resolve_inside(ws, str(ws / "src/a.py"), must_exist=True, regular_file=True).name == "a.py"
    )
    assert (
        resolve_inside(ws, "./src/new.py", must_exist=False, regular_file=True)
        == ws.resolve() / "src/new.py"
    )
    assert (
        resolve_inside(ws, "src/new/dir/f.py", must_exist=False, regular_file=True).name == "f.py"
    )


@pytest.mark.parametrize(
    ("candidate", "reason"),
    [
        ("../secret.txt", "'..'"),
        ("src/../../secret.txt", "'..'"),
        ("src/../a.py", "'..'"),
        ("/etc/passwd", "absolute path outside"),
        ("src/a\x00.py", "NUL"),
        ("src/a\x1b[2J.py", "control characters"),
        ("src/\u009b.py", "control characters"),
        ("", "empty"),
    ],
)
def test_refusals(ws: Path, candidate: str, reason: str) -> None:
    with pytest.raises(SecurityError, match=reason):
        resolve_inside(ws, candidate, must_exist=False, regular_file=False)


def test_missing_when_required(ws: Path) -> None:
    with pytest.raises(SecurityError, match="does not exist"):
        resolve_inside(ws, "src/nope.py", must_exist=True, regular_file=True)


def test_symlinked_file_and_directory(ws: Path, tmp_path: Path) -> None:
    (ws / "link.txt").symlink_to(tmp_path / "secret.txt")
    (ws / "linkdir").symlink_to(tmp_path)
    (ws / "inner").symlink_to(ws / "src")
    with pytest.raises(SecurityError, match=r"link\.txt is a symbolic link"):
        resolve_inside(ws, "link.txt", must_exist=True, regular_file=True)
    with pytest.raises(SecurityError, match="linkdir is a symbolic link"):
        resolve_inside(ws, "linkdir/secret.txt", must_exist=True, regular_file=True)
    with pytest.raises(SecurityError, match="linkdir is a symbolic link"):
        resolve_inside(ws, "linkdir/new.txt", must_exist=False, regular_file=True)
    # allow_symlink accepts links that stay inside, never ones that leave.
    assert resolve_inside(
        ws, "inner/a.py", must_exist=True, regular_file=True, allow_symlink=True
    ) == (ws.resolve() / "src" / "a.py")
    with pytest.raises(SecurityError, match="points outside"):
        resolve_inside(
            ws, "linkdir/secret.txt", must_exist=True, regular_file=True, allow_symlink=True
        )


def test_non_regular_files(ws: Path) -> None:
    os.mkfifo(ws / "fifo")
    with pytest.raises(SecurityError, match="a FIFO"):
        resolve_inside(ws, "fifo", must_exist=True, regular_file=True)
    with pytest.raises(SecurityError, match="a directory"):
        resolve_inside(ws, "src", must_exist=True, regular_file=True)
    assert resolve_inside(ws, "src", must_exist=True, regular_file=False).is_dir()
    sock_path = ws / "s.sock"
    with socket.socket(socket.AF_UNIX) as sock:
        sock.bind(str(sock_path))
        with pytest.raises(SecurityError, match="a socket"):
            resolve_inside(ws, "s.sock", must_exist=True, regular_file=True)
    with pytest.raises(SecurityError, match="not a directory"):
        resolve_inside(ws, "src/a.py/x", must_exist=False, regular_file=True)


def test_display_path(ws: Path, tmp_path: Path) -> None:
    assert display_path(ws, ws / "src" / "a.py") == "src/a.py"
    assert display_path(ws, "src/a.py") == "src/a.py"
    assert display_path(ws, ws) == "."
    assert display_path(ws, "../secret.txt") == OUTSIDE_MASK
    assert display_path(ws, ws / ".." / "secret.txt") == OUTSIDE_MASK
    assert display_path(ws, "/etc/passwd") == OUTSIDE_MASK
    assert (
        display_path(ws, tmp_path / "home" / "x", private_roots=[tmp_path / "home"]) == PRIVATE_MASK
    )
    assert "\x1b" not in display_path(ws, "src/\x1b[2J")


def test_sanitize_id() -> None:
    assert sanitize_id("call_01HX:abc-1.2") == "call_01HX:abc-1.2"
    a, b = sanitize_id("a/b"), sanitize_id("a_b")
    assert a != b and a.startswith("a_b-")
    long = sanitize_id("x" * 500)
    assert len(long) <= MAX_ID_LENGTH
    assert sanitize_id("x" * 500) == long and sanitize_id("x" * 501) != long
    assert all(c.isalnum() or c in "._:-" for c in sanitize_id("é\x1b[31m💥 id"))
    assert sanitize_id("")


def test_open_regular_reads_a_file_and_refuses_links_fifos_and_directories(
    tmp_path: Path,
) -> None:
    regular = tmp_path / "token"
    regular.write_bytes(b"secret")
    with open_regular(regular) as fh:
        assert fh.read() == b"secret"
    (tmp_path / "link").symlink_to(regular)
    fifo = tmp_path / "fifo"
    os.mkfifo(fifo)
    for refused in (tmp_path / "link", fifo, tmp_path):
        with pytest.raises(OSError):  # a FIFO is refused at once, it does not block
            open_regular(refused)
