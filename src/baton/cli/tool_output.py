"""A tool call's output as a person reads it at the terminal: one line for a JSON result,
head and tail for long text (pure functions; :mod:`baton.cli.render` prints them).

An MCP tool answers with JSON written for the agent (``{"report_id": …, "next": "Report
filed. Stop now …"}``); printed raw it is a 260-character line of someone else's
instructions. :func:`json_summary` keeps what a person wants from it: the first few
short values (ids, names, counts), never the text addressed to the agent.

Long output used to be cut to its tail; the lines that mattered were often at the start
(the command's first error, the version it ran). :func:`elide` keeps both ends.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import Any, Final

__all__ = ["elide", "json_summary"]

AGENT_KEYS: Final = frozenset({"next", "instructions", "hint", "guidance", "note_to_agent"})
"""Keys whose text is addressed to the agent ("Stop now …"), not to the person watching."""
MAX_VALUE: Final = 60
MAX_FIELDS: Final = 2
_MAX_PARSE: Final = 64 * 1024


def _scalar(value: Any) -> str | None:
    if isinstance(value, bool):
        return "yes" if value else "no"
    if isinstance(value, int | float):
        return str(value)
    if isinstance(value, str) and value.strip() and "\n" not in value:
        text = value.strip()
        return text if len(text) <= MAX_VALUE else text[: MAX_VALUE - 1] + "…"
    return None


def _first_sentence(text: str) -> str:
    line = text.strip().split("\n", 1)[0]
    end = line.find(". ")
    line = line[: end + 1] if 0 < end < MAX_VALUE * 2 else line
    return line if len(line) <= MAX_VALUE * 2 else line[: MAX_VALUE * 2 - 1] + "…"


def _fields(data: Mapping[str, Any]) -> str | None:
    shown: list[str] = []
    skipped = 0
    for key, value in data.items():
        if key in AGENT_KEYS:
            continue
        text = _scalar(value)
        if text is None or len(shown) >= MAX_FIELDS:
            skipped += 1
            continue
        shown.append(f"{key} {text}")
    if not shown:
        return None
    return ", ".join(shown) + (f" (+{skipped} more)" if skipped else "")


def _mcp_result(data: Mapping[str, Any]) -> str | None:
    """A ``CallToolResult``: its structured content, else its first text."""
    structured = data.get("structuredContent")
    if isinstance(structured, Mapping):
        fields = _fields(structured)
        if fields:
            return ("error: " if data.get("isError") else "") + fields
    for item in data.get("content") or ():
        if isinstance(item, Mapping) and item.get("type") == "text":
            text = item.get("text")
            if isinstance(text, str) and text.strip():
                inner = json_summary(text)
                said = inner if inner is not None else _first_sentence(text)
                return ("error: " if data.get("isError") else "") + said
    return "error" if data.get("isError") else None


def json_summary(output: str) -> str | None:
    """One line for output that is a single JSON object or array; None for anything else."""
    text = output.strip()
    if not text or text[0] not in "[{" or len(text) > _MAX_PARSE:
        return None
    try:
        data = json.loads(text)
    except ValueError:
        return None
    if isinstance(data, Mapping):
        if "content" in data and isinstance(data.get("content"), list):
            return _mcp_result(data)
        return _fields(data) or "{…}"
    if isinstance(data, list):
        return f"{len(data)} item{'' if len(data) == 1 else 's'}"
    return None


def elide(
    lines: Sequence[str], *, head: int, tail: int, full: bool = False
) -> tuple[list[str | None], int]:
    """The lines to show and how many are left out; ``None`` marks where they were.

    Nothing is left out when fewer than two lines would be (the marker would take the
    place of what it hides), or when ``full``.
    """
    hidden = len(lines) - head - tail
    if full or hidden < 2:
        return list(lines), 0
    return [*lines[:head], None, *lines[len(lines) - tail :]], hidden
