"""The script language of baton's scripted Cursor bridge, and the runs it plays.

A message sent to a scripted agent may hold fenced blocks tagged ``cursor-sdk-script``,
each a JSON list of steps, played in order as one run (a message without one gets a short
reply saying so)::

    ```cursor-sdk-script
    [{"text": "Writing the file."},
     {"custom": {"tool": "write_file", "args": {"path": "hello.txt", "content": "hi\\n"}}},
     {"mcp": {"tool": "write_report", "args": {"result": "done", "body": "Done."}}},
     {"usage": {"inputTokens": 120, "outputTokens": 30}}]
    ```

Steps (one key each):

``text``, ``thinking``
    assistant text (streamed in a few deltas) / thinking, then its duration;
``write`` ``{path, content}``, ``shell`` ``"cmd"``
    Cursor's *built-in* tools: the bridge writes the file / runs the command itself, as a
    local agent does, without asking anyone; refused (a tool error) when the agent's tools
    allowlist does not offer them;
``custom`` ``{tool, args}``
    a host custom tool: ``CallCustomTool`` on the host's callback server (baton's asked
    tools);
``mcp`` ``{server?, tool, args}``
    a tool of an MCP server given on ``Send`` (``mcpServers``): the server is started as
    given (stdio) and called through the MCP client; ``server`` may be left out when only
    one was given;
``todos`` ``[{content, status}]``, ``task`` ``{description, subagent?}``
    an ``updateTodos`` / ``task`` tool call;
``usage`` ``{inputTokens, outputTokens, ...}``
    a usage message;
``unknown`` ``{...}``
    an SDK message of a type no SDK knows (to see that baton keeps it);
``error`` ``{code, message}``
    the run ends ``ERROR``; ``fail_stream`` ``{code, message}``: the stream itself fails;
``wait_cancel`` ``true``
    the run waits until ``CancelRun`` (or ``timeout`` seconds, then finishes);
``hang`` ``true``
    the run never ends, ``CancelRun`` or not (a bridge that must be killed);
``exit`` ``code``
    the bridge process exits at once (a crash).
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from typing import Any, Final

from baton.errors import BatonError
from baton.jsontypes import JsonObject

__all__ = ["FENCE", "STEP_KINDS", "ScriptError", "parse_script"]

FENCE: Final = "cursor-sdk-script"
STEP_KINDS: Final = frozenset(
    {
        "text",
        "thinking",
        "write",
        "shell",
        "custom",
        "mcp",
        "todos",
        "task",
        "usage",
        "unknown",
        "error",
        "fail_stream",
        "wait_cancel",
        "hang",
        "exit",
    }
)

_BLOCK = re.compile(r"^```" + FENCE + r"[ \t]*\n(?P<body>.*?)^```[ \t]*$", re.M | re.S)


class ScriptError(BatonError, ValueError):
    """A script block that is not a JSON list of known steps."""


def parse_script(text: str) -> list[JsonObject] | None:
    """Every step of every script block in ``text``; ``None`` when it has none."""
    blocks = list(_BLOCK.finditer(text))
    if not blocks:
        return None
    steps: list[dict[str, Any]] = []
    for block in blocks:
        try:
            data = json.loads(block.group("body"))
        except ValueError as exc:
            raise ScriptError(f"a {FENCE} block is not JSON: {exc}") from None
        if not isinstance(data, list):
            raise ScriptError(f"a {FENCE} block must be a JSON list of steps")
        for step in data:
            if not isinstance(step, Mapping) or len(step) != 1:
                raise ScriptError(f"every step is an object with one key, not {step!r}")
            (kind,) = step
            if kind not in STEP_KINDS:
                raise ScriptError(f"unknown step {kind!r} (known: {', '.join(sorted(STEP_KINDS))})")
            steps.append(dict(step))
    return steps
