"""Tool-call upserts, sans-I/O.

ACP agents send ``tool_call`` then ``tool_call_update`` deltas keyed by
``toolCallId``; some repeat ``tool_call`` for the same id, some send an update
before the start. :class:`ToolCallTracker` keeps one record per id, merges each
delta (changed fields only; lists replace), restores title/kind/locations that a
delta omits, and returns the canonical payload for the new state: ``started`` on
first sight, ``completed`` when the status turns terminal, ``progressed`` otherwise.

A terminal the agent runs itself reports its output in the update's ``_meta``
(:mod:`baton.events.agent_terminals`): it becomes the call's output, and the terminal is
named in ``terminal_ids``.
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from baton.events.agent_terminals import TERMINAL_META_KEYS, TerminalStream
from baton.events.bounds import (
    DIFF_TEXT_BYTES,
    bounded_output,
    bounded_value,
    clip_text,
    utf8_tail,
)
from baton.events.extension import require
from baton.events.model import (
    DiffContent,
    Location,
    Payload,
    ToolExecutionCompleted,
    ToolExecutionProgressed,
    ToolExecutionStarted,
    ToolOutput,
    _ToolExecution,
)
from baton.events.redaction import Redaction
from baton.events.trusted import trusted

__all__ = [
    "ACP_TOOL_KINDS",
    "MAX_TRACKED_CALLS",
    "TERMINAL_STATUSES",
    "TOOL_KINDS",
    "TOOL_STATUSES",
    "ToolCallTracker",
    "ToolState",
]

TERMINAL_STATUSES = frozenset({"completed", "failed", "cancelled"})
TOOL_STATUSES = frozenset({"pending", "in_progress", "completed", "failed"})
"""ACP v1 ToolCallStatus; any other value is ignored here and kept in ``raw``."""
ACP_TOOL_KINDS: tuple[str, ...] = (
    "read",
    "edit",
    "delete",
    "move",
    "search",
    "execute",
    "think",
    "fetch",
    "switch_mode",
    "other",
)
"""ACP v1 ToolKind, in the schema's order (the policy's actions are keyed by it)."""
TOOL_KINDS = frozenset(ACP_TOOL_KINDS)
"""ACP v1 ToolKind; any other value becomes ``other`` here and is kept in ``raw``."""
MAX_TRACKED_CALLS = 4096


@dataclass(slots=True)
class ToolState:
    tool_call_id: str
    title: str = ""
    kind: str = "other"
    status: str = "pending"
    locations: list[Location] = field(default_factory=list)
    raw_input: Any = None
    raw_output: Any = None
    diffs: list[DiffContent] = field(default_factory=list)
    output_text: str | None = None
    """The call's content text (``None``: its content has none)."""
    terminal_output: TerminalStream | None = None
    """What an agent-side terminal streamed in ``_meta``."""
    terminal_ids: list[str] = field(default_factory=list)
    parent_tool_call_id: str | None = None
    started_ms: float = 0.0
    done: bool = False
    turn_id: str | None = None
    """The turn whose update started this call: its later updates belong to it."""
    output: tuple[str, int, ToolOutput] | None = None
    """The last bounded output: of which ``output_text``, redacted with how many bound
    secrets (unchanged output is neither redacted nor hashed again)."""


class ToolCallTracker:
    """Per-session tool-call state; feed it ACP tool updates, get canonical payloads."""

    def __init__(self, *, redaction: Redaction, display_path: Callable[[str], str]) -> None:
        self._calls: dict[str, ToolState] = {}
        self._redaction = redaction
        self._display_path = display_path

    def __len__(self) -> int:
        return len(self._calls)

    def get(self, tool_call_id: str) -> ToolState | None:
        return self._calls.get(tool_call_id)

    # Any: the agent's ``tool_call`` JSON, untrusted; read defensively.
    def upsert(
        self,
        update: Mapping[str, Any],
        *,
        now_ms: float,
        parent_tool_call_id: str | None = None,
        turn_id: str | None = None,
    ) -> list[Payload]:
        tool_call_id = str(require(update.get("toolCallId"), (str, int), "toolCallId"))
        state = self._calls.get(tool_call_id)
        first = state is None
        if state is None:
            state = ToolState(tool_call_id=tool_call_id, started_ms=now_ms, turn_id=turn_id)
            self._remember(state)
        self._merged(state, update, parent_tool_call_id)
        out: list[Payload] = []
        if first:
            out.append(self._payload(ToolExecutionStarted, state))
            if state.status not in TERMINAL_STATUSES:
                return out
        if state.status in TERMINAL_STATUSES and not state.done:
            state.done = True
            out.append(
                self._payload(
                    ToolExecutionCompleted, state, duration_ms=int(now_ms - state.started_ms)
                )
            )
        elif not first:
            out.append(self._payload(ToolExecutionProgressed, state))
        return out

    # Any: as upsert.
    def progress(
        self, state: ToolState, update: Mapping[str, Any], *, parent_tool_call_id: str | None
    ) -> Payload:
        """:meth:`upsert` of a known, open call whose update keeps it open (no terminal
        status: :meth:`AcpNormalizer.hot <baton.events.acp_normalizer.AcpNormalizer.hot>`
        checked), without the branches that cannot apply: the same merge, one progress."""
        self._merged(state, update, parent_tool_call_id)
        return self._payload(ToolExecutionProgressed, state)

    def open_calls(self) -> list[ToolState]:
        return [s for s in self._calls.values() if not s.done]

    def forget(self, tool_call_id: str) -> None:
        """Drop a finished call (its id is being reused for a new one)."""
        self._calls.pop(tool_call_id, None)

    def settle_open(self, status: str, now_ms: float) -> list[Payload]:
        """Close every unfinished call (turn cancelled/failed): ACP says the client
        marks them cancelled; baton records the given terminal status."""
        return [payload for _, payload in self.settle_open_by_turn(status, now_ms)]

    def settle_open_by_turn(self, status: str, now_ms: float) -> list[tuple[str | None, Payload]]:
        """:meth:`settle_open`, each completion with the turn its call belongs to."""
        out: list[tuple[str | None, Payload]] = []
        for state in self.open_calls():
            state.status = status
            state.done = True
            payload = self._payload(
                ToolExecutionCompleted, state, duration_ms=int(now_ms - state.started_ms)
            )
            out.append((state.turn_id, payload))
        return out

    # ------------------------------------------------------------------ internals

    def _remember(self, state: ToolState) -> None:
        if len(self._calls) >= MAX_TRACKED_CALLS:
            for key in [k for k, v in self._calls.items() if v.done][: MAX_TRACKED_CALLS // 4]:
                del self._calls[key]
        self._calls[state.tool_call_id] = state

    def _merged(
        self, state: ToolState, update: Mapping[str, Any], parent_tool_call_id: str | None
    ) -> None:
        self._merge(state, update)
        if parent_tool_call_id and state.parent_tool_call_id is None:
            state.parent_tool_call_id = parent_tool_call_id

    def _merge(self, state: ToolState, update: Mapping[str, Any]) -> None:
        title = update.get("title")
        if isinstance(title, str) and title:
            state.title = clip_text(self._redaction.text(title))
        kind = update.get("kind")
        if isinstance(kind, str) and kind:
            state.kind = kind if kind in TOOL_KINDS else "other"
        status = update.get("status")
        if isinstance(status, str) and status in TOOL_STATUSES and not state.done:
            state.status = status
        locations = update.get("locations")
        if isinstance(locations, list):
            state.locations = [
                Location(
                    path=self._display_path(str(loc.get("path", ""))),
                    line=loc["line"] if isinstance(loc.get("line"), int) else None,
                )
                for loc in locations[:64]
                if isinstance(loc, dict)
            ]
        if "rawInput" in update and update["rawInput"] is not None:
            state.raw_input = bounded_value(self._redaction.value(update["rawInput"]))
        if "rawOutput" in update and update["rawOutput"] is not None:
            state.raw_output = bounded_value(self._redaction.value(update["rawOutput"]))
        content = update.get("content")
        if isinstance(content, list):
            self._merge_content(state, content)
        meta = update.get("_meta")
        if isinstance(meta, Mapping) and not TERMINAL_META_KEYS.isdisjoint(meta):
            self._merge_terminal_meta(state, meta)

    def _merge_content(self, state: ToolState, content: list[Any]) -> None:
        texts: list[str] = []
        diffs: list[DiffContent] = []
        terminals: list[str] = []
        for item in content:
            if not isinstance(item, dict):
                continue
            kind = item.get("type")
            if kind == "content":
                block = item.get("content")
                if isinstance(block, dict):
                    texts.append(_block_text(block))
            elif kind == "diff":
                diffs.append(self._diff(item))
            elif kind == "terminal" and isinstance(item.get("terminalId"), str):
                terminals.append(item["terminalId"])
        # ACP: a list in an update replaces the previous one.
        state.output_text = "".join(texts) if texts else None
        state.diffs = diffs
        state.terminal_ids = terminals

    def _merge_terminal_meta(self, state: ToolState, meta: Mapping[str, Any]) -> None:
        """An agent-side terminal's chunks append to the call's output."""
        if state.terminal_output is None:
            state.terminal_output = TerminalStream(secrets=self._redaction.secret_count)
        named = state.terminal_output.meta(meta, self._redaction)
        missing = [t for t in named if t not in state.terminal_ids]
        if missing:  # a new list: payloads already built share the old one
            state.terminal_ids = [*state.terminal_ids, *missing][:64]

    def _diff(self, item: Mapping[str, Any]) -> DiffContent:
        new_text = self._redaction.text(str(item.get("newText") or ""))
        old = item.get("oldText")
        old_text = self._redaction.text(old) if isinstance(old, str) else None
        new_tail, new_bytes, cut_new = utf8_tail(new_text, DIFF_TEXT_BYTES)
        cut_old = False
        if old_text is not None:
            old_text, _, cut_old = utf8_tail(old_text, DIFF_TEXT_BYTES)
        return DiffContent(
            path=self._display_path(str(item.get("path", ""))),
            old_text=old_text,
            new_text=new_tail,
            truncated=cut_new or cut_old,
            new_text_bytes=new_bytes,
            new_text_sha256=hashlib.sha256(new_text.encode("utf-8", "surrogatepass")).hexdigest(),
        )

    def _output(self, state: ToolState) -> ToolOutput | None:
        """The bounded, redacted view of the call's output (its content text, else what its
        agent-side terminal streamed); reused while it is unchanged (and no secret was
        bound since): the same text redacts and hashes the same."""
        text = state.output_text
        if text is None:
            stream = state.terminal_output
            if stream is None or stream.empty:
                return None
            if state.done:
                stream.end(self._redaction)
            return stream.output(self._redaction)
        secrets = self._redaction.secret_count
        cached = state.output
        if cached is not None and cached[1] == secrets and cached[0] == text:
            return cached[2]
        output = bounded_output(self._redaction.text(text))
        state.output = (text, secrets, output)
        return output

    def _payload(self, cls: type[_ToolExecution], state: ToolState, **extra: Any) -> Payload:
        """Built without validation: every field is typed by construction here (see
        :mod:`baton.events.trusted`); the lists are replaced on merge, never mutated."""
        return trusted(
            cls,
            tool_call_id=state.tool_call_id,
            title=state.title,
            kind=state.kind,
            status=state.status,
            locations=state.locations,
            raw_input=state.raw_input,
            raw_output=state.raw_output,
            diffs=state.diffs,
            output=self._output(state),
            terminal_ids=state.terminal_ids,
            parent_tool_call_id=state.parent_tool_call_id,
            **extra,
        )


def _block_text(block: Mapping[str, Any]) -> str:
    """Text of one ContentBlock; non-text blocks are described, never inlined."""
    kind = block.get("type")
    if kind == "text":
        return str(block.get("text", ""))
    if kind == "resource_link":
        return f"[resource {block.get('uri', '')}]"
    if kind == "resource":
        resource = block.get("resource")
        if isinstance(resource, dict) and isinstance(resource.get("text"), str):
            return str(resource["text"])
        return "[embedded resource]"
    return f"[{kind} content]"
