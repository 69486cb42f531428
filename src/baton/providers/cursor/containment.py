"""Artifact path containment: the one place the Cursor extension touches the filesystem.

A path in ``cursor/generate_image`` is a *hint* from the agent, not something baton
owns: it is never opened, read or uploaded. It becomes a canonical reference only
when baton's one containment check,
:func:`baton.security.paths.resolve_inside` (``must_exist``, ``regular_file``, no
symbolic link), accepts it: a present regular file inside the workspace's real path,
reached without ``..`` and without a link at any component, named without control
characters. Only ``lstat`` and ``realpath`` are used: no bytes are read. One rule is
the extension's own: no backslashes, which would make the displayed path differ from
the real one.
"""

from __future__ import annotations

import re
from pathlib import Path, PurePosixPath

from baton.errors import SecurityError
from baton.security.paths import MAX_PATH_CHARS, PathRefused, resolve_inside

__all__ = ["display_candidate", "resolve_artifact_reference"]

_CONTROL = re.compile(r"[\x00-\x1f\x7f-\x9f]")


def resolve_artifact_reference(workspace: str, candidate: str) -> str:
    """The workspace-relative POSIX path of ``candidate``, or :class:`PathRefused`."""
    if "\\" in candidate:
        raise PathRefused("it contains a backslash")
    if not workspace or not Path(workspace).is_absolute():
        raise SecurityError("no absolute workspace to contain the path")
    target = resolve_inside(Path(workspace), candidate, must_exist=True, regular_file=True)
    return target.relative_to(Path(workspace).resolve()).as_posix()


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
