"""Cheap reads of an envelope's raw text, beside Core's validated ones.

Core validates a whole envelope; listing REPORTs, REVIEWs or child TASKs that way
is quadratic. These read bytes only: the body after the frontmatter, and
whether the frontmatter holds one literal line (a prefilter: every match is
then validated through Core, so a wrong answer can only make baton look again).
"""

from __future__ import annotations

from pathlib import Path

__all__ = ["frontmatter_has", "split_body"]


def split_body(data: bytes) -> str:
    """The Markdown body of an envelope's bytes (what follows the closing ``---``)."""
    text = data.decode("utf-8")
    parts = text.split("---\n", 2)
    body = parts[2] if len(parts) == 3 else ""
    return body[1:] if body.startswith("\n") else body


def frontmatter_has(path: Path, needle: bytes, limit: int = 64 * 1024) -> bool:
    """Whether the frontmatter of ``path`` (its first ``limit`` bytes) contains ``needle``."""
    try:
        with path.open("rb") as stream:
            head = stream.read(limit)
    except OSError:
        return False
    end = head.find(b"\n---\n", 3)
    return needle in (head[: end + 1] if end >= 0 else head)
