"""Artifact path containment: the one place the Cursor extension touches the filesystem.

A path in ``cursor/generate_image`` is a *hint* from the agent, not something baton
owns: it is never opened, read or uploaded. It becomes a canonical reference only
when it names a present regular file inside the workspace's real path, reached
without ``..`` and without a symbolic link at any component, and spelled without
control characters or backslashes (which would make the displayed path differ from
the real one). Only ``lstat`` and ``realpath`` (``Path.lstat``/``Path.resolve``) are
used: no bytes are read.

:func:`resolve_artifact_reference` is the seam to swap for the shared check
``baton.security.paths.resolve_inside(workspace, candidate, must_exist=True,
regular_file=True, allow_symlink=False)`` once that lands; its contract is the same
(return the contained path, raise :class:`~baton.errors.SecurityError` with the
reason).
"""

from __future__ import annotations

import re
import stat
from pathlib import Path, PurePosixPath

from baton.errors import SecurityError

MAX_PATH_CHARS = 4096
_CONTROL = re.compile(r"[\x00-\x1f\x7f-\x9f]")


def resolve_artifact_reference(workspace: str, candidate: str) -> str:
    """The workspace-relative POSIX path of ``candidate``, or :class:`SecurityError`.

    Raises when the path is empty, too long, has control characters, backslashes or
    ``..`` segments, lies outside the workspace (lexically or once resolved), passes
    through a symbolic link, does not exist, or is not a regular file.
    """
    if not candidate:
        raise SecurityError("empty path")
    if len(candidate) > MAX_PATH_CHARS:
        raise SecurityError(f"path longer than {MAX_PATH_CHARS} characters")
    if _CONTROL.search(candidate):
        raise SecurityError("path contains control characters")
    if "\\" in candidate:
        raise SecurityError("path contains a backslash")
    if ".." in candidate.split("/"):
        raise SecurityError("path traverses with '..'")
    if not workspace or not Path(workspace).is_absolute():
        raise SecurityError("no absolute workspace to contain the path")
    lexical_root = PurePosixPath(workspace)
    real_root = Path(workspace).resolve()
    path = PurePosixPath(candidate)
    if not path.is_absolute():
        path = lexical_root / path
    relative = _relative_to_any(path, (lexical_root, PurePosixPath(real_root)))
    if relative is None:
        raise SecurityError("path is outside the workspace")
    if not relative.parts:
        raise SecurityError("path is the workspace itself, not a file")
    current = real_root
    mode = 0
    for part in relative.parts:
        current = current / part
        try:
            mode = current.lstat().st_mode
        except FileNotFoundError:
            raise SecurityError("path does not exist") from None
        except OSError as exc:
            raise SecurityError(f"path cannot be inspected ({exc.strerror})") from None
        if stat.S_ISLNK(mode):
            raise SecurityError("path passes through a symbolic link")
    if not stat.S_ISREG(mode):
        raise SecurityError("path is not a regular file")
    if not current.resolve().is_relative_to(real_root):
        raise SecurityError("path resolves outside the workspace")
    return relative.as_posix()


def display_candidate(workspace: str, candidate: str) -> str:
    """How a refused path is shown: relative when lexically inside, else only its name.

    A refused path may be private (another user's home, a credential file), so an
    outside path is shown as ``…/<name>``; control characters become ``?``.
    """
    cleaned = _CONTROL.sub("?", candidate)[:MAX_PATH_CHARS]
    path = PurePosixPath(cleaned)
    if workspace and path.is_absolute():
        relative = _relative_to_any(path, (PurePosixPath(workspace),))
        shown = relative.as_posix() if relative is not None else f"…/{path.name}"
    else:
        shown = cleaned
    return shown if len(shown) <= 200 else shown[:199] + "…"


def _relative_to_any(path: PurePosixPath, roots: tuple[PurePosixPath, ...]) -> PurePosixPath | None:
    for root in roots:
        if path.is_relative_to(root):
            return path.relative_to(root)
    return None
