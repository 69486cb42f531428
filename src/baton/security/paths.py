"""Workspace containment, path display and id sanitizing.

Agents name paths (``fs/read_text_file``, terminal cwd, artifacts, tool locations);
those names are *claims*. :func:`resolve_inside` accepts one only if it resolves,
physically, to something inside the workspace: no absolute path elsewhere, no ``..``
component (even one that would come back inside: refusing is simpler to reason about
than normalizing), no symbolic link on any component under the workspace unless the
caller allows links that stay inside, no control characters or NUL in the name, and,
when asked, a regular file. A refusal is a :class:`~baton.errors.SecurityError` whose
message names the reason and the workspace-relative path, never the host path.

:func:`display_path` is how paths appear in canonical events and logs: relative when
inside, a mask otherwise, so private host paths do not spread. :func:`sanitize_id`
bounds identifiers that come from agents before they become keys, file names or
event fields.
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import re
import stat
from collections.abc import Sequence
from pathlib import Path, PurePosixPath
from typing import BinaryIO, Final

from baton.errors import SecurityError

__all__ = [
    "MAX_ID_LENGTH",
    "MAX_PATH_CHARS",
    "OUTSIDE_MASK",
    "PRIVATE_MASK",
    "PathRefused",
    "display_path",
    "file_kind",
    "open_no_follow",
    "open_regular",
    "resolve_inside",
    "resolved_dir",
    "sanitize_id",
]

OUTSIDE_MASK: Final = "<outside-workspace>"
PRIVATE_MASK: Final = "<private>"
MAX_ID_LENGTH: Final = 160
MAX_PATH_CHARS: Final = 4096
"""PATH_MAX on Linux: a longer name is refused before it reaches the filesystem."""

_CONTROL = re.compile(r"[\x00-\x1f\x7f-\x9f]")


def open_no_follow(path: str | os.PathLike[str]) -> BinaryIO:
    """``path`` opened for reading, never through a symbolic link (``O_NOFOLLOW``) nor
    blocking on a FIFO (``O_NONBLOCK``); the caller checks with ``fstat`` what it got."""
    flags = os.O_RDONLY | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_NONBLOCK", 0)
    return os.fdopen(os.open(path, flags | getattr(os, "O_CLOEXEC", 0)), "rb")


def open_regular(path: str | os.PathLike[str]) -> BinaryIO:
    """:func:`open_no_follow`, and ``OSError`` ("not a regular file") unless it opened one."""
    fh = open_no_follow(path)
    if not stat.S_ISREG(os.fstat(fh.fileno()).st_mode):
        fh.close()
        raise OSError(0, "not a regular file")
    return fh


def resolved_dir(path: Path, what: str) -> Path:
    """``path`` resolved, or :class:`SecurityError` saying ``what`` is missing or not a
    directory (a workspace, a pinned tree's root)."""
    try:
        resolved = path.resolve(strict=True)
    except OSError as exc:
        raise SecurityError(f"{what} cannot be resolved: {exc.strerror}") from None
    if not resolved.is_dir():
        raise SecurityError(f"{what} is not a directory")
    return resolved


def file_kind(mode: int) -> str:
    """What a non-regular file is, in words (for refusals)."""
    if stat.S_ISDIR(mode):
        return "a directory"
    if stat.S_ISLNK(mode):
        return "a symbolic link"
    if stat.S_ISFIFO(mode):
        return "a FIFO"
    if stat.S_ISSOCK(mode):
        return "a socket"
    if stat.S_ISCHR(mode) or stat.S_ISBLK(mode):
        return "a device"
    return "a special file"


class PathRefused(SecurityError):
    """:func:`resolve_inside` refused a path; ``reason`` says why without the prefix."""

    def __init__(self, reason: str) -> None:
        super().__init__(f"path refused: {reason}")
        self.reason = reason


def _check_name(text: str) -> None:
    if len(text) > MAX_PATH_CHARS:
        raise PathRefused(f"it is longer than {MAX_PATH_CHARS} characters")
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        raise PathRefused("it is not valid Unicode (a lone surrogate)") from None
    if "\x00" in text:
        raise PathRefused("it contains control characters (a NUL byte)")
    if _CONTROL.search(text):
        raise PathRefused("it contains control characters")


def resolve_inside(
    workspace: Path,
    candidate: str | Path,
    *,
    must_exist: bool,
    regular_file: bool,
    allow_symlink: bool = False,
) -> Path:
    """Resolve ``candidate`` (relative to ``workspace`` or absolute) inside the workspace.

    Returns the physical absolute path. ``must_exist=False`` accepts a path whose
    trailing components do not exist yet (a file about to be written); the existing
    part is still checked for links. ``allow_symlink=True`` accepts links whose target
    stays inside the workspace (the result is then the resolved target).
    """
    text = os.fspath(candidate)
    if not text:
        raise PathRefused("it is empty")
    _check_name(text)
    try:
        root = workspace.resolve(strict=True)
    except OSError as exc:
        raise PathRefused(f"the workspace cannot be resolved ({exc.strerror})") from None
    pure = PurePosixPath(text.replace(os.sep, "/")) if os.sep != "/" else PurePosixPath(text)
    if ".." in pure.parts:
        raise PathRefused("it contains a '..' component")
    if pure.is_absolute():
        rel = _relative_to_any(Path(text), (workspace, root))
        if rel is None:
            raise PathRefused("absolute path outside the workspace")
    else:
        rel = Path(*[p for p in pure.parts if p not in ("", ".")])
    current = root
    shown = PurePosixPath()
    parts = rel.parts
    for index, part in enumerate(parts):
        current = current / part
        shown = shown / part
        try:
            st = current.lstat()
        except FileNotFoundError:
            if must_exist:
                raise PathRefused(f"{_safe(str(shown))} does not exist") from None
            return root / rel
        except OSError as exc:
            raise PathRefused(f"{_safe(str(shown))} cannot be inspected ({exc.strerror})") from None
        if stat.S_ISLNK(st.st_mode):
            if not allow_symlink:
                raise PathRefused(f"{_safe(str(shown))} is a symbolic link")
            try:
                target = current.resolve(strict=False)
            except (OSError, RuntimeError):
                raise PathRefused(f"symbolic link {_safe(str(shown))} cannot be resolved") from None
            if _relative_to_any(target, (root,)) is None:
                raise PathRefused(f"symbolic link {_safe(str(shown))} points outside the workspace")
            rest = parts[index + 1 :]
            return resolve_inside(
                root,
                target.joinpath(*rest),
                must_exist=must_exist,
                regular_file=regular_file,
                allow_symlink=True,
            )
        if index < len(parts) - 1 and not stat.S_ISDIR(st.st_mode):
            raise PathRefused(f"{_safe(str(shown))} is not a directory")
        if index == len(parts) - 1 and regular_file and not stat.S_ISREG(st.st_mode):
            detail = f"not a regular file ({file_kind(st.st_mode)})"
            raise PathRefused(f"{_safe(str(shown))} is {detail}")
    if not parts and regular_file:
        raise PathRefused("the workspace itself is not a regular file")
    return current


def _relative_to_any(path: Path, roots: Sequence[Path]) -> Path | None:
    for root in roots:
        try:
            return path.relative_to(root)
        except ValueError:
            continue
    return None


def _safe(text: str) -> str:
    """A path fragment fit for an error message: controls escaped, length bounded."""
    text = _CONTROL.sub(lambda m: f"\\x{ord(m.group(0)):02x}", text)
    return text if len(text) <= 200 else text[:197] + "..."


def display_path(workspace: Path, path: str | Path, *, private_roots: Sequence[Path] = ()) -> str:
    """How a path is shown in events and logs: never a host path outside the workspace.

    Inside the workspace (lexically, or physically after resolving the workspace) the
    path is shown relative (POSIX separators). Under one of ``private_roots`` (a launch
    root, the user's home) it becomes :data:`PRIVATE_MASK`; anywhere else, or when it
    climbs out with ``..``, :data:`OUTSIDE_MASK`. Control characters are escaped.
    """
    text = os.fspath(path)
    if not text:
        return "."
    p = Path(os.path.normpath(text))
    if not p.is_absolute():
        if p.parts and p.parts[0] == "..":
            return OUTSIDE_MASK
        return _safe(p.as_posix())
    roots = [workspace]
    with contextlib.suppress(OSError):  # a vanished workspace still masks by its name
        roots.append(workspace.resolve())
    rel = _relative_to_any(p, roots)
    if rel is not None:
        return _safe(rel.as_posix()) if rel.parts else "."
    for private in private_roots:
        if _relative_to_any(p, (private,)) is not None:
            return PRIVATE_MASK
    return OUTSIDE_MASK


_ID_DISALLOWED = re.compile(r"[^A-Za-z0-9._:\-]")


def sanitize_id(s: str) -> str:
    """An identifier made of ``[A-Za-z0-9._:-]``, at most :data:`MAX_ID_LENGTH` chars.

    Valid ids come back unchanged. Otherwise disallowed characters become ``_`` and,
    because that can make two ids collide (``a/b`` and ``a_b``), a short digest of the
    original is appended; the result stays within the bound.
    """
    if s and len(s) <= MAX_ID_LENGTH and _ID_DISALLOWED.search(s) is None:
        return s
    digest = hashlib.sha256(s.encode("utf-8", "surrogatepass")).hexdigest()[:12]
    clean = _ID_DISALLOWED.sub("_", s)[: MAX_ID_LENGTH - 13]
    return f"{clean}-{digest}" if clean else f"id-{digest}"
