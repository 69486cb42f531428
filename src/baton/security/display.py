"""Display safety: agent-controlled text never drives a terminal or a browser.

Agent output is untrusted. Rendered raw, it could move the cursor, rewrite earlier
lines, set the window title, write the clipboard (OSC 52), open hyperlinks (OSC 8),
reorder what the user reads (bidi overrides, "Trojan Source"), or print a line that
looks like baton's own approval prompt. Three functions close those doors:

* :func:`neutralize_terminal` makes every control character *visible* instead of
  deleting it (deleting would hide that an agent tried something): C0 controls become
  their Control Pictures glyph (``\\x1b`` → ``␛``, so ``\\x1b[2J`` shows as ``␛[2J``),
  DEL and C1 controls and bidi controls become ``<U+XXXX>``. Newline and tab stay.
* :func:`escape_html` neutralizes the same way, then HTML-escapes (quotes included).
* :func:`mark_agent_lines` prefixes lines that could pass for baton's framing
  (:data:`FRAMING_VOCABULARY`) with :data:`AGENT_LINE_MARKER`.

:func:`safe_agent_text` combines the first and the last; the CLI renders agent text
only through it.
"""

from __future__ import annotations

import html
import re
from typing import Final

__all__ = [
    "AGENT_LINE_MARKER",
    "FRAMING_VOCABULARY",
    "escape_html",
    "mark_agent_lines",
    "neutralize_terminal",
    "safe_agent_text",
]

_BIDI_AND_MARKS: Final = (
    "\u061c"  # ARABIC LETTER MARK
    "\u200e\u200f"  # LRM, RLM
    "\u202a\u202b\u202c\u202d\u202e"  # LRE, RLE, PDF, LRO, RLO
    "\u2066\u2067\u2068\u2069"  # LRI, RLI, FSI, PDI
)


def _build_table() -> dict[int, str]:
    table: dict[int, str] = {}
    for code in range(0x20):
        if chr(code) not in "\n\t":
            table[code] = chr(0x2400 + code)  # Control Pictures: ␀ … ␟ (␛ for ESC)
    table[0x7F] = "\u2421"  # ␡
    for code in range(0x80, 0xA0):
        table[code] = f"<U+{code:04X}>"
    for ch in _BIDI_AND_MARKS:
        table[ord(ch)] = f"<U+{ord(ch):04X}>"
    return table


_TABLE: Final = _build_table()
_UNSAFE = re.compile("[" + re.escape("".join(chr(c) for c in _TABLE)) + "]")


def neutralize_terminal(s: str) -> str:
    """Make terminal controls and bidi overrides visible; keep ``\\n`` and ``\\t``.

    Returns ``s`` itself when it holds nothing to neutralize (one C-speed scan).
    """
    if _UNSAFE.search(s) is None:
        return s
    return s.translate(_TABLE)


def escape_html(s: str) -> str:
    """Neutralize controls and bidi overrides, then escape ``& < > " '`` for HTML."""
    return html.escape(neutralize_terminal(s), quote=True)


AGENT_LINE_MARKER: Final = "│ "
"""Prefix of an agent line that could be mistaken for baton's own framing."""

FRAMING_VOCABULARY: Final[tuple[tuple[str, str], ...]] = (
    # (what baton prints that starts this way, regex matched at a line's start, ignoring
    #  leading blanks/invisible characters and case)
    ("baton's own messages", r"baton\s*[:>›»|\]-]"),
    ("bracketed baton tags", r"\[\s*baton"),
    ("status glyphs", r"[✔✓✗✘✖⚠⛔❌❗❯›»▶●◆■⏵]"),
    ("approval prompts", r"(?:approve|allow|deny|reject)\b[^\n]*\?"),
    ("inquirer-style prompts", r"\?\s+(?:allow|approve|permit|grant|run|proceed|continue)"),
    ("permission notices", r"permission\s+(?:requested|required|needed|granted|denied)"),
    ("approval notices", r"(?:approval|confirmation)\s+(?:requested|required|needed)"),
    ("request notices", r"request\s+(?:created|answered|pending)\b"),
    ("security notices", r"security[.:]"),
    ("y/n choices", r"[^\n]*[\[(]\s*y(?:es)?\s*/\s*n(?:o)?\s*[\])]"),
    ("the marker itself", re.escape(AGENT_LINE_MARKER.strip())),
)
"""What baton's framing looks like; an agent line matching any row gets the marker."""

_INVISIBLE_LEAD = r"[ \t\u00a0\u200b\u200c\u200d\u2060\ufeff]*"
_FRAMING_RE = re.compile(
    r"^(?=" + _INVISIBLE_LEAD + r"(?:" + "|".join(rx for _, rx in FRAMING_VOCABULARY) + r"))",
    re.IGNORECASE | re.MULTILINE,
)


def mark_agent_lines(s: str) -> str:
    """Prefix agent lines that look like baton's framing with :data:`AGENT_LINE_MARKER`."""
    return _FRAMING_RE.sub(AGENT_LINE_MARKER, s)


def safe_agent_text(s: str) -> str:
    """Agent text as the terminal may show it: neutralized, forged framing marked."""
    return mark_agent_lines(neutralize_terminal(s))
