"""Display safety: text from agents, repositories and tasks never drives a terminal.

Such text is untrusted. Rendered raw, it could move the cursor, clear the screen,
rewrite earlier lines, set the window title, write the clipboard (OSC 52), open
hyperlinks (OSC 8), reorder what the user reads (bidi overrides, "Trojan Source"),
hide words (zero-width characters, tag characters), be read as rich markup
(``[link=…]`` becoming a real hyperlink, ``[y/N]`` vanishing), or print a line that
looks like baton's own (``baton ▸ turn.completed``, ``✔ approved``).

:func:`terminal_safe` is the one function every terminal surface uses for such text
(``run``, ``up``, ``log``, ``status``, ``inbox``, ``sessions``, ``runs``, ``task``,
errors). It

1. makes every control character *visible* instead of deleting it (deleting would
   hide that something was tried): C0 controls become their Control Pictures glyph
   (``\\x1b`` → ``␛``, so ``\\x1b[2J`` shows as ``␛[2J`` and no CSI/OSC/DCS/APC/PM
   sequence can start), DEL, C1 controls (8-bit CSI ``\\x9b``, OSC ``\\x9d``, DCS
   ``\\x90`` …), bidi controls and invisible characters (U+200B, U+200D, U+2060,
   U+FEFF, tag characters …) become ``<U+XXXX>``; newline and tab stay, unless
   ``inline`` (a value inside one of baton's lines), which shows them as ``␤``/``␉``;
2. marks lines that could pass for baton's framing (:data:`FRAMING_VOCABULARY`, built
   from :data:`BATON_MARKS`, the glyphs baton's own renderers start lines with) with
   :data:`AGENT_LINE_MARKER`;
3. escapes rich markup, so the result can be embedded in a markup string (pass
   ``markup=False`` for a :class:`rich.text.Text` or a plain write).

:func:`escape_html` is the same neutralization for HTML surfaces.
"""

from __future__ import annotations

import html
import re
from typing import Final

from rich.markup import escape as _escape_markup

__all__ = [
    "AGENT_LINE_MARKER",
    "BATON_MARKS",
    "FRAMING_VOCABULARY",
    "INVISIBLE",
    "escape_html",
    "mark_agent_lines",
    "neutralize_terminal",
    "safe_agent_text",
    "terminal_safe",
]

_BIDI: Final = (
    "\u061c"  # ARABIC LETTER MARK
    "\u200e\u200f"  # LRM, RLM
    "\u202a\u202b\u202c\u202d\u202e"  # LRE, RLE, PDF, LRO, RLO
    "\u2066\u2067\u2068\u2069"  # LRI, RLI, FSI, PDI
)

INVISIBLE: Final[tuple[tuple[int, int], ...]] = (
    (0x00AD, 0x00AD),  # soft hyphen
    (0x034F, 0x034F),  # combining grapheme joiner
    (0x115F, 0x1160),  # Hangul fillers
    (0x17B4, 0x17B5),  # Khmer inherent vowels
    (0x180B, 0x180F),  # Mongolian variation selectors and vowel separator
    (0x200B, 0x200D),  # ZERO WIDTH SPACE, NON-JOINER, JOINER
    (0x2028, 0x2029),  # LINE / PARAGRAPH SEPARATOR (a newline the eye does not see)
    (0x2060, 0x2064),  # WORD JOINER, invisible operators
    (0x206A, 0x206F),  # deprecated format characters
    (0x3164, 0x3164),  # HANGUL FILLER
    (0xFEFF, 0xFEFF),  # BOM / ZERO WIDTH NO-BREAK SPACE
    (0xFFA0, 0xFFA0),  # HALFWIDTH HANGUL FILLER
    (0xFFF9, 0xFFFB),  # interlinear annotation controls
    (0x1D173, 0x1D17A),  # musical format controls
    (0xE0000, 0xE007F),  # tag characters ("ASCII smuggling")
    (0xE0100, 0xE01EF),  # variation selectors supplement (data smuggling)
)
"""Code point ranges that render as nothing yet change or hide what is read."""


def _build_table(*, inline: bool) -> dict[int, str]:
    table: dict[int, str] = {}
    for code in range(0x20):
        if inline or chr(code) not in "\n\t":
            table[code] = chr(0x2400 + code)  # Control Pictures: ␀ … ␟ (␛ for ESC)
    table[0x7F] = "\u2421"  # ␡
    for code in range(0x80, 0xA0):
        table[code] = f"<U+{code:04X}>"
    for ch in _BIDI:
        table[ord(ch)] = f"<U+{ord(ch):04X}>"
    for low, high in INVISIBLE:
        for code in range(low, high + 1):
            table[code] = f"<U+{code:04X}>"
    return table


_TABLE: Final = _build_table(inline=False)
_INLINE_TABLE: Final = _build_table(inline=True)


def _charclass(table: dict[int, str]) -> re.Pattern[str]:
    """One character class of ranges (``[a-b…]``): a class of ~500 single characters
    made each search ~60x slower, and every streamed chunk of the live view pays it."""
    parts: list[str] = []
    codes = sorted(table)
    start = prev = codes[0]
    for code in [*codes[1:], -1]:
        if code == prev + 1:
            prev = code
            continue
        parts.append(re.escape(chr(start)) + (f"-{re.escape(chr(prev))}" if prev > start else ""))
        start = prev = code
    return re.compile("[" + "".join(parts) + "]")


_UNSAFE: Final = _charclass(_TABLE)
_UNSAFE_INLINE: Final = _charclass(_INLINE_TABLE)


def neutralize_terminal(s: str, *, inline: bool = False) -> str:
    """Make controls, bidi and invisible characters visible; keep ``\\n``/``\\t`` unless ``inline``.

    Returns ``s`` itself when it holds nothing to neutralize (one C-speed scan).
    """
    pattern, table = (_UNSAFE_INLINE, _INLINE_TABLE) if inline else (_UNSAFE, _TABLE)
    if pattern.search(s) is None:
        return s
    return s.translate(table)


def escape_html(s: str) -> str:
    """Neutralize controls, bidi and invisible characters, then escape ``& < > " '`` for HTML."""
    return html.escape(neutralize_terminal(s), quote=True)


AGENT_LINE_MARKER: Final = "│ "
"""Prefix of an untrusted line that could be mistaken for baton's own framing."""

BATON_MARKS: Final = "✔✘■⋯?→⛔!☐◐☑☒▸·↻⏳"
"""The glyphs baton's renderers start their own lines with (imported by them)."""

FRAMING_VOCABULARY: Final[tuple[tuple[str, str], ...]] = (
    # (what baton prints that starts this way, regex matched at a line's start, ignoring
    #  leading blanks/invisible characters and case)
    ("baton's own lines", r"baton(?![a-z0-9_])"),
    ("bracketed baton tags", r"\[\s*baton"),
    ("baton's line marks", "[" + re.escape(BATON_MARKS) + "]"),
    ("other status glyphs", r"[✓✗✖⚠❌❗❯›»▶●◆⏵►▹⟫]"),
    ("approval prompts", r"(?:approve|allow|deny|reject)\b[^\n]*\?"),
    ("permission notices", r"permission\s+(?:requested|required|needed|granted|denied)"),
    ("approval notices", r"(?:approval|confirmation)\s+(?:requested|required|needed)"),
    ("request notices", r"request\s+(?:created|answered|pending)\b"),
    ("security notices", r"security[.:]"),
    ("turn notices", r"turn[ .](?:completed|failed|cancelled)"),
    ("y/n choices", r"[^\n]*[\[(]\s*y(?:es)?\s*/\s*n(?:o)?\s*[\])]"),
    ("run footers", r"run\s+run-"),
    ("the marker itself", re.escape(AGENT_LINE_MARKER.strip())),
)
"""What baton's framing looks like; an untrusted line matching any row gets the marker."""

_INVISIBLE_LEAD = r"[ \t\u00a0\u200b\u200c\u200d\u2060\ufeff]*(?:<U\+[0-9A-F]{4,5}>)*[ \t]*"
_FRAMING_RE: Final = re.compile(
    r"^(?=" + _INVISIBLE_LEAD + r"(?:" + "|".join(rx for _, rx in FRAMING_VOCABULARY) + r"))",
    re.IGNORECASE | re.MULTILINE,
)


def mark_agent_lines(s: str) -> str:
    """Prefix lines that look like baton's framing with :data:`AGENT_LINE_MARKER`."""
    return _FRAMING_RE.sub(AGENT_LINE_MARKER, s)


def terminal_safe(
    text: str, *, inline: bool = False, markup: bool = True, mark: bool = True
) -> str:
    """Untrusted ``text`` as a terminal may show it (see the module docstring).

    ``inline``: a value inside one of baton's own lines (newlines and tabs shown as
    glyphs). ``markup``: escape rich markup (for a markup string; ``False`` for a
    :class:`~rich.text.Text` or a plain write). ``mark``: mark forged framing (``False``
    only for a fragment that continues a line already started).
    """
    safe = neutralize_terminal(text, inline=inline)
    if mark:
        safe = mark_agent_lines(safe)
    return _escape_markup(safe) if markup else safe


def safe_agent_text(s: str) -> str:
    """:func:`terminal_safe` for plain (non-markup) surfaces."""
    return terminal_safe(s, markup=False)
