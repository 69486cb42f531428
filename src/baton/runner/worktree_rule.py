"""The permission audit's worktree rule, on the filesystem: which paths an edit may touch unasked.

A session that works in a task tree's own worktree runs the agent in its edit-without-asking
mode (:mod:`baton.providers.worktree_modes`); the audit (:mod:`baton.requests.audit`) then
allows an edit no request decided when every path it reports passes :func:`worktree_check`:

* it resolves *physically* inside the worktree (:func:`~baton.security.paths.resolve_inside`:
  no ``..``, no absolute path elsewhere, no symbolic link on the way: a link committed in the
  repository could point anywhere);
* no component is ``.git`` (any case): the worktree's ``.git`` file points into the main
  repository's own ``.git``, and what lies behind it (config, hooks, refs) is never a diff
  a human reviews;
* it is not the worktree itself.

Anything else stays a finding, as it is outside a worktree.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from baton.errors import SecurityError
from baton.security.paths import resolve_inside

__all__ = ["GIT_DIR", "worktree_check"]

GIT_DIR = ".git"


def worktree_check(worktree: Path) -> Callable[[str], bool]:
    """The check of one reported path for a session working in ``worktree``."""
    root = worktree.resolve()

    def reviewed(path: str) -> bool:
        try:
            target = resolve_inside(root, path, must_exist=False, regular_file=False)
        except SecurityError:
            return False
        try:
            parts = target.relative_to(root).parts
        except ValueError:
            return False
        return bool(parts) and all(part.casefold() != GIT_DIR for part in parts)

    return reviewed
