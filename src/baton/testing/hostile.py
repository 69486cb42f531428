"""Hostile scenarios of the fault agent: what an agent reading untrusted repositories may send.

Turn scripts like those of :mod:`baton.testing.scripts` (standard library only), run by both
drivers; the scenario names are listed in :data:`baton.testing.HOSTILE_SCENARIOS` and
documented in :mod:`baton.testing.fake_agent`.
"""

from __future__ import annotations

import json
from collections.abc import Generator
from pathlib import Path
from typing import Any

from baton.testing.scenarios import Call, Exit, Pause, Raw, ScenarioCore, Stderr, TurnScript

__all__ = ["HOSTILE_SCRIPTS"]

TurnBody = Generator[Any, Any, Any]


def _line(session_id: str, update_json: str) -> bytes:
    """A ``session/update`` line whose update is given as raw JSON text (escapes kept)."""
    return (
        '{"jsonrpc":"2.0","method":"session/update","params":{"sessionId":'
        + json.dumps(session_id)
        + ',"update":'
        + update_json
        + "}}\n"
    ).encode()


def turn_lone_surrogate(core: ScenarioCore, turn: TurnScript) -> TurnBody:
    """Valid JSON that UTF-8 cannot hold: ``"\\ud800"`` in a chunk and a tool title."""
    mid = turn.message_id
    yield core.chunk("before the surrogate. ", mid)
    yield Raw(
        _line(
            turn.session_id,
            '{"sessionUpdate":"agent_message_chunk","messageId":'
            + json.dumps(mid)
            + ',"content":{"type":"text","text":"lone \\ud800 surrogate"}}',
        )
    )
    yield Raw(
        _line(
            turn.session_id,
            '{"sessionUpdate":"tool_call","toolCallId":"sur-1","title":"bad \\udfff title",'
            '"kind":"read","status":"completed","rawInput":{"path\\udc80":"x"}}',
        )
    )
    yield core.chunk(" after the surrogate.", mid)


def turn_secrets(core: ScenarioCore, turn: TurnScript) -> TurnBody:
    """Every text of ``--texts FILE`` (a JSON list) on every surface an agent reaches.

    Each text goes out as a transcript split in two reads, a tool call (title, input,
    output, diff), a line of stderr, and the title and input of a permission request.
    With ``{"texts": [...], "die": true}`` the agent then writes them all to stderr
    again and exits 3 without answering the prompt.
    """
    if core.options.texts is None:
        raise ValueError("the secrets scenario needs --texts FILE")
    spec = json.loads(Path(core.options.texts).read_text(encoding="utf-8"))
    texts: list[str] = spec["texts"] if isinstance(spec, dict) else spec
    mid = turn.message_id
    for i, text in enumerate(texts):
        half = len(text) // 2
        yield core.chunk(f"[{i}] {text[:half]}", mid)
        yield Pause(0.002)  # as a model streams: the halves come in separate reads
        yield core.chunk(f"{text[half:]}\n", mid)
        yield Stderr(f"stderr [{i}]: {text}\n".encode())
        yield core.update(
            {
                "sessionUpdate": "tool_call",
                "toolCallId": f"sec-{i}",
                "title": f"Run {text}"[:300],
                "kind": "execute",
                "status": "in_progress",
                "rawInput": {"command": text},
            }
        )
        yield core.update(
            {
                "sessionUpdate": "tool_call_update",
                "toolCallId": f"sec-{i}",
                "status": "completed",
                "rawOutput": {"stdout": text},
                "content": [
                    {"type": "content", "content": {"type": "text", "text": text}},
                    {"type": "diff", "path": "config.env", "oldText": None, "newText": text},
                ],
            }
        )
    joined = "\n".join(texts)
    yield Call(
        "session/request_permission",
        {
            "sessionId": turn.session_id,
            "toolCall": {
                "toolCallId": "sec-perm",
                "title": f"Publish {joined[:2000]}",
                "kind": "execute",
                "rawInput": {"command": joined},
            },
            "options": [
                {"optionId": "allow-once", "name": "Allow", "kind": "allow_once"},
                {"optionId": "reject-once", "name": "Reject", "kind": "reject_once"},
            ],
        },
    )
    yield core.chunk("All secrets were sent.", mid)
    if isinstance(spec, dict) and spec.get("die"):
        # End on stderr and die: the turn fails with a stderr preview of these lines.
        for text in reversed(texts):
            yield Stderr(f"dying: {text}\n".encode())
        yield Exit(3)


HOSTILE_SCRIPTS = {"lone-surrogate": turn_lone_surrogate, "secrets": turn_secrets}
