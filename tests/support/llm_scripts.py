"""Reusable scripts for :class:`tests.support.llm_stub.LLMStub`.

A script is a function ``ChatRequest -> Reply``. The ones here drive a real agent through one
tool call and then let it finish::

    script = call_tool_then_text("write_report", {"result": "done", "body": "..."})
    with LLMStub(cwd=ws, script=script) as stub:
        ...

Agents rename the tools of MCP servers (OpenCode offers ``<server>_<tool>``), so tools are
matched by name *suffix*; :func:`find_tool` is the same rule for assertions.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from typing import Any

from tests.support.llm_stub import ChatRequest, Reply, Text, ToolCall

__all__ = ["call_tool_then_text", "find_tool"]


def find_tool(names: Iterable[str], suffix: str) -> str | None:
    """The offered tool named ``suffix`` or ending in ``_suffix`` (MCP prefixes), or None."""
    for name in names:
        if name == suffix or name.endswith(f"_{suffix}"):
            return name
    return None


def call_tool_then_text(
    suffix: str,
    arguments: Mapping[str, Any],
    *,
    text: str = "Done: the report is filed.",
    missing: str = "I do not have that tool.",
) -> Callable[[ChatRequest], Reply]:
    """Call the tool ending in ``suffix`` once, then answer ``text`` after its result.

    Requests that do not offer the tool get ``missing`` (so a mismatch ends the turn quickly
    and shows up in the recorded requests instead of hanging the test).
    """

    def script(req: ChatRequest) -> Reply:
        if req.has_tool_result:
            return Text(text)
        name = find_tool(req.tool_names, suffix)
        if name is None:
            return Text(missing)
        return ToolCall(name, dict(arguments))

    return script
