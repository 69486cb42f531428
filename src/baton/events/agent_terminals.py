"""Terminals an agent runs itself, as its tool calls report them (Zed's ``_meta`` convention).

An agent that runs a command in a terminal of its own (not one it created through the
client's ``terminal/create``: the TypeScript Codex adapter, Zed codex-acp, claude-agent-acp)
names it in the tool call's content (``{"type": "terminal", "terminalId": …}``, usually the
call's id) and streams its output in the updates' ``_meta``: :data:`TERMINAL_META_KEYS`.
:class:`TerminalStream` turns the chunks into the call's bounded, redacted output; the
runner marks such a terminal agent-side (``agent_terminal_ids``).
"""

from __future__ import annotations

import hashlib
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from baton.events.bounds import OUTPUT_TAIL_BYTES, utf8_tail
from baton.events.model import ToolOutput
from baton.events.redaction import Redaction
from baton.events.trusted import trusted

__all__ = ["TERMINAL_META_KEYS", "TerminalStream"]

TERMINAL_META_KEYS = frozenset(
    {"terminal_info", "terminal_output", "terminal_output_delta", "terminal_exit"}
)
"""``_meta`` keys of a tool call update about a terminal the agent runs itself (Zed's
convention, used by the Codex adapters and claude-agent-acp): ``terminal_info``
``{terminal_id, cwd}`` names it, ``terminal_output`` and ``terminal_output_delta``
``{terminal_id, data}`` each append a chunk of its output, ``terminal_exit`` ends it."""
_OUTPUT_CHUNK_KEYS = ("terminal_output", "terminal_output_delta")


@dataclass(slots=True)
class TerminalStream:
    """The output an agent-side terminal streams, as a bounded, redacted view.

    Each chunk joins what was held back; the part that cannot be half a secret is
    redacted against the shown part of its line (``Redaction.stream_cut`` /
    ``text_after``, as transcript chunks are) and appended; the rest waits for the next
    chunk or :meth:`end`. Kept: the last :data:`OUTPUT_TAIL_BYTES` of the redacted text;
    counted and hashed: all of it. A secret bound later is redacted from the kept tail.
    """

    shown: str = ""
    total_bytes: int = 0
    digest: Any = field(default_factory=hashlib.sha256)
    held: str = ""
    context: str = ""
    secrets: int = 0
    """The bound-secret count ``shown`` was redacted with."""

    @property
    def empty(self) -> bool:
        """Nothing streamed yet (the call's output stays ``None``: the agent may still
        report it another way, e.g. in ``rawOutput``)."""
        return self.total_bytes == 0 and not self.held

    def feed(self, data: str, redaction: Redaction) -> None:
        text = self.held + data
        cut = redaction.stream_cut(text, self.context)
        if cut > 0:
            self._show(text[:cut], redaction)
        self.held = text[max(cut, 0) :]

    def end(self, redaction: Redaction) -> None:
        """The command is over: what was held back is shown too."""
        if self.held:
            self._show(self.held, redaction)
            self.held = ""

    def _show(self, raw: str, redaction: Redaction) -> None:
        text = redaction.text_after(self.context, raw)
        self.context = redaction.stream_context(self.context, raw)
        data = text.encode("utf-8", errors="surrogatepass")
        self.digest.update(data)
        self.total_bytes += len(data)
        self.shown = utf8_tail(self.shown + text, OUTPUT_TAIL_BYTES)[0]

    def output(self, redaction: Redaction) -> ToolOutput:
        if redaction.secret_count != self.secrets:
            self.shown = redaction.text(self.shown)
            self.secrets = redaction.secret_count
        return trusted(
            ToolOutput,
            tail=self.shown,
            total_bytes=self.total_bytes,
            sha256=self.digest.hexdigest(),
            truncated=self.total_bytes > len(self.shown.encode("utf-8", "surrogatepass")),
        )

    # Any: the agent's ``_meta`` JSON, untrusted; read defensively.
    def meta(self, meta: Mapping[str, Any], redaction: Redaction) -> list[str]:
        """Read one update's ``_meta``: its output chunks are fed; the terminal ids it names
        are returned."""
        named: list[str] = []
        for key in ("terminal_info", *_OUTPUT_CHUNK_KEYS, "terminal_exit"):
            value = meta.get(key)
            if not isinstance(value, Mapping):
                continue
            terminal_id = value.get("terminal_id")
            if isinstance(terminal_id, str) and terminal_id and terminal_id not in named:
                named.append(terminal_id)
            data = value.get("data")
            if key in _OUTPUT_CHUNK_KEYS and isinstance(data, str) and data:
                self.feed(data, redaction)
        return named


"""Completed calls beyond this many are forgotten oldest-first (a late delta for one
is then treated as a new call, visibly, rather than growing memory forever)."""
