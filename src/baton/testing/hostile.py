"""Hostile scenarios of the fault agent: what an agent reading untrusted repositories may send.

Mixed into :class:`baton.testing.fake_agent.FakeAgent` (standard library only, like it). Each
``turn_<scenario>`` method is one prompt turn; the scenario names are listed in
:data:`baton.testing.HOSTILE_SCENARIOS` and documented there.
"""

from __future__ import annotations

import json
import os
import time
from pathlib import Path
from typing import Any

__all__ = ["HostileScenarios"]

Message = dict[str, Any]


def _line(session_id: str, update_json: str) -> bytes:
    """A ``session/update`` line whose update is given as raw JSON text (escapes kept)."""
    return (
        '{"jsonrpc":"2.0","method":"session/update","params":{"sessionId":'
        + json.dumps(session_id)
        + ',"update":'
        + update_json
        + "}}\n"
    ).encode()


class HostileScenarios:
    """Turn bodies for the hostile scenarios; the agent supplies the I/O methods below."""

    args: Any
    session_id: str

    def write(self, data: bytes) -> None:
        raise NotImplementedError

    def update(self, update: Message, session_id: str | None = None) -> None:
        raise NotImplementedError

    def chunk(self, text: str, message_id: str) -> None:
        raise NotImplementedError

    def call(self, method: str, params: Any) -> Message:
        raise NotImplementedError

    def _stderr(self, data: bytes) -> None:
        raise NotImplementedError

    # -- scenarios -----------------------------------------------------------------------------

    def turn_lone_surrogate(self, turn: Any, mid: str) -> Any:
        """Valid JSON that UTF-8 cannot hold: ``"\\ud800"`` in a chunk and a tool title."""
        self.chunk("before the surrogate. ", mid)
        self.write(
            _line(
                turn.session_id,
                '{"sessionUpdate":"agent_message_chunk","messageId":'
                + json.dumps(mid)
                + ',"content":{"type":"text","text":"lone \\ud800 surrogate"}}',
            )
        )
        self.write(
            _line(
                turn.session_id,
                '{"sessionUpdate":"tool_call","toolCallId":"sur-1","title":"bad \\udfff title",'
                '"kind":"read","status":"completed","rawInput":{"path\\udc80":"x"}}',
            )
        )
        self.chunk(" after the surrogate.", mid)
        return None

    def turn_secrets(self, turn: Any, mid: str) -> Any:
        """Every text of ``--texts FILE`` (a JSON list) on every surface an agent reaches.

        Each text goes out as a transcript split in two reads, a tool call (title, input,
        output, diff), a line of stderr, and the title and input of a permission request.
        With ``{"texts": [...], "die": true}`` the agent then writes them all to stderr
        again and exits 3 without answering the prompt.
        """
        spec = json.loads(Path(self.args.texts).read_text(encoding="utf-8"))
        texts: list[str] = spec["texts"] if isinstance(spec, dict) else spec
        for i, text in enumerate(texts):
            half = len(text) // 2
            self.chunk(f"[{i}] {text[:half]}", mid)
            time.sleep(0.002)  # as a model streams: the halves come in separate reads
            self.chunk(f"{text[half:]}\n", mid)
            self._stderr(f"stderr [{i}]: {text}\n".encode())
            self.update(
                {
                    "sessionUpdate": "tool_call",
                    "toolCallId": f"sec-{i}",
                    "title": f"Run {text}"[:300],
                    "kind": "execute",
                    "status": "in_progress",
                    "rawInput": {"command": text},
                }
            )
            self.update(
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
        self.call(
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
        self.chunk("All secrets were sent.", mid)
        if isinstance(spec, dict) and spec.get("die"):
            # End on stderr and die: the turn fails with a stderr preview of these lines.
            for text in reversed(texts):
                self._stderr(f"dying: {text}\n".encode())
            os._exit(3)
        return None
