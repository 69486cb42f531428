"""Names baton gives in git: a task tree's branch, its worktree folder, its salvage ref.

Pure. A branch is ``baton/<short-id>-<slug>``: the short id makes it unique (the
TASK id's random tail), the slug makes it readable (the subject, reduced to what
``git check-ref-format`` accepts everywhere). The worktree folder carries the same
``<short-id>-<slug>``; the salvage ref is ``refs/baton/salvage/<task-id>``, the ref a
worktree's own head found at its removal is kept under ``refs/baton/kept/<task-id>``.
"""

from __future__ import annotations

import re
import unicodedata

__all__ = [
    "KEPT_PREFIX",
    "SALVAGE_PREFIX",
    "branch_name",
    "kept_ref",
    "ref_safe",
    "salvage_ref",
    "short_id",
    "slug",
    "tree_label",
]

BRANCH_PREFIX = "baton/"
SALVAGE_PREFIX = "refs/baton/salvage/"
KEPT_PREFIX = "refs/baton/kept/"
MAX_SLUG = 40
SHORT = 8


def short_id(task_id: str) -> str:
    """The last 8 alphanumerics of a TASK id (``TASK-20261206-…-9a2b7128`` → ``9a2b7128``)."""
    tail = re.sub(r"[^0-9a-zA-Z]", "", task_id)[-SHORT:]
    return tail.lower() or "task"


def slug(subject: str) -> str:
    """Lower-case ASCII words joined by ``-``, at most 40 characters, never empty."""
    ascii_text = (
        unicodedata.normalize("NFKD", subject).encode("ascii", "ignore").decode("ascii").lower()
    )
    words = re.findall(r"[a-z0-9]+", ascii_text)
    out = ""
    for word in words:
        candidate = f"{out}-{word}" if out else word
        if len(candidate) > MAX_SLUG:
            break
        out = candidate
    return out or "work"


def tree_label(task_id: str, subject: str) -> str:
    """``<short-id>-<slug>``: the branch's tail and the worktree's folder name."""
    return f"{short_id(task_id)}-{slug(subject)}"


def branch_name(task_id: str, subject: str) -> str:
    return BRANCH_PREFIX + tree_label(task_id, subject)


def ref_safe(name: str, empty: str = "task") -> str:
    """``name`` as one component of a ref (letters, digits, ``._-``; never empty)."""
    return re.sub(r"[^0-9A-Za-z._-]", "_", name).strip(".") or empty


def salvage_ref(task_id: str) -> str:
    """Where a dropped tree's exact head is kept (a ref outside ``refs/heads``)."""
    return SALVAGE_PREFIX + ref_safe(task_id)


def kept_ref(task_id: str) -> str:
    """Where a worktree's own head (commits on no branch) is kept when it is removed."""
    return KEPT_PREFIX + ref_safe(task_id)
