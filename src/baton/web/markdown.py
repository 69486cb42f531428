"""FCoP documents (TASK, REPORT, ISSUE, REVIEW bodies) as safe HTML.

The documents are written by agents, so they are hostile input. They are
rendered with markdown-it (CommonMark) with **raw HTML disabled** (``<script>``
in a report shows as text), its link validation (no ``javascript:``,
``vbscript:``, ``file:`` or ``data:`` links), and after
:func:`~baton.security.display.neutralize_terminal`, so control characters and
bidi overrides are visible rather than obeyed. Links open nothing on their own:
they get ``rel="noopener noreferrer nofollow"``; the CSP blocks any image or
script from elsewhere anyway. Plans awaiting approval are *not* rendered this
way (what is approved must be exactly what the agent wrote): see
:mod:`baton.web.dashboard`.
"""

from __future__ import annotations

from functools import lru_cache
from typing import Any

from markdown_it import MarkdownIt

from baton.security.display import neutralize_terminal

__all__ = ["render_markdown"]


@lru_cache(maxsize=1)
def _parser() -> MarkdownIt:
    md = MarkdownIt("commonmark", {"html": False, "linkify": False, "typographer": False})
    md.enable("table")
    renderer: Any = md.renderer

    def link_open(self: Any, tokens: Any, idx: int, options: Any, env: Any) -> str:
        tokens[idx].attrSet("rel", "noopener noreferrer nofollow")
        return str(renderer.renderToken(tokens, idx, options, env))

    md.add_render_rule("link_open", link_open)
    return md


def render_markdown(text: str) -> str:
    """Agent Markdown as HTML that can neither run script nor reorder what is read."""
    return str(_parser().render(neutralize_terminal(text)))
