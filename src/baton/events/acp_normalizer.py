"""ACP ``session/update`` → canonical payloads, sans-I/O.

One :class:`AcpNormalizer` per agent session. ``update()`` takes the plain
``params`` of a ``session/update`` and returns :class:`Draft` values (payload plus
the redacted native payload); the caller stamps them. No clocks, no I/O: the time
is passed in.

The variant table :data:`STABLE_VARIANTS` is closed: every stable ACP variant maps
to a canonical family; :data:`UNSTABLE_VARIANTS` are recognised and surfaced as
notices; anything else goes to the provider extension and, if unclaimed, becomes a
``provider.notice`` with category ``unclassified``. Nothing vanishes.

Transcript chunks are coalesced: consecutive chunks of the same kind and message
id become one event, flushed when anything else happens, when ``flush()`` is called
(the connection calls it after each read), or when the text reaches
:data:`COALESCE_MAX_BYTES`.

Length: one handler per stable ACP variant of the closed table, and the attribution and coalescing they share.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Callable, Collection, Mapping
from dataclasses import dataclass
from typing import Any, TypeGuard

from baton.events.bounds import bounded_value, clip_text, measured
from baton.events.extension import (
    AGENT_FAULTS,
    STABLE_VARIANTS,
    UNSTABLE_VARIANTS,
    MalformedPayload,
    NullExtension,
    ProviderExtension,
    TurnContext,
    require,
)
from baton.events.model import (
    CommandsUpdated,
    ConfigChanged,
    ModeChanged,
    Payload,
    PlanStep,
    PlanUpdated,
    ProviderNotice,
    SecurityRedactionFallback,
    SessionInfoUpdated,
    ToolExecutionProgressed,
    TranscriptAssistant,
    TranscriptThinking,
    TranscriptUser,
    UsageReported,
)
from baton.events.redaction import Redaction
from baton.events.tools import (
    TERMINAL_STATUSES,
    TOOL_KINDS,
    TOOL_STATUSES,
    ToolCallTracker,
    _block_text,
)
from baton.events.trusted import trusted

__all__ = [
    "COALESCE_MAX_BYTES",
    "KNOWN_CONTENT_TYPES",
    "KNOWN_FIELDS",
    "KNOWN_TOOL_CONTENT_TYPES",
    "MAX_COMMANDS",
    "MAX_PLAN_STEPS",
    "MAX_TRACKED_MESSAGES",
    "AcpNormalizer",
    "Draft",
]

COALESCE_MAX_BYTES = 64 * 1024
MAX_TRACKED_MESSAGES = 4096
"""Message ids remembered for attribution (oldest forgotten first)."""
MAX_PLAN_STEPS = 256
MAX_COMMANDS = 256

_CHUNK_TYPES: dict[str, type[TranscriptAssistant | TranscriptThinking | TranscriptUser]] = {
    "agent_message_chunk": TranscriptAssistant,
    "agent_thought_chunk": TranscriptThinking,
    "user_message_chunk": TranscriptUser,
}
KNOWN_FIELDS: dict[str, frozenset[str]] = {
    "user_message_chunk": frozenset({"sessionUpdate", "content", "messageId", "_meta"}),
    "agent_message_chunk": frozenset({"sessionUpdate", "content", "messageId", "_meta"}),
    "agent_thought_chunk": frozenset({"sessionUpdate", "content", "messageId", "_meta"}),
    "tool_call": frozenset(
        {
            "sessionUpdate",
            "toolCallId",
            "title",
            "kind",
            "status",
            "content",
            "locations",
            "rawInput",
            "rawOutput",
            "_meta",
        }
    ),
    "plan": frozenset({"sessionUpdate", "entries", "_meta"}),
    "available_commands_update": frozenset({"sessionUpdate", "availableCommands", "_meta"}),
    "current_mode_update": frozenset({"sessionUpdate", "currentModeId", "_meta"}),
    "config_option_update": frozenset({"sessionUpdate", "configOptions", "_meta"}),
    "session_info_update": frozenset({"sessionUpdate", "title", "updatedAt", "_meta"}),
    "usage_update": frozenset({"sessionUpdate", "used", "size", "cost", "_meta"}),
}
"""The fields ACP v1 defines for each stable variant (a test compares with the SDK)."""
KNOWN_FIELDS["tool_call_update"] = KNOWN_FIELDS["tool_call"]
_CHUNK_FIELDS = KNOWN_FIELDS["agent_message_chunk"]

KNOWN_CONTENT_TYPES = frozenset({"text", "image", "audio", "resource_link", "resource"})
"""ACP v1 ContentBlock types; any other block is kept whole in ``raw``."""
KNOWN_TOOL_CONTENT_TYPES = frozenset({"content", "diff", "terminal"})
"""ACP v1 ToolCallContent types; any other item is kept whole in ``raw``."""

_PLAN_STATUS = {"pending": "pending", "in_progress": "in_progress", "completed": "completed"}


@dataclass(slots=True)  # never changed; not frozen: one or two per update, a frozen init is 3x
class Draft:
    """A payload before stamping, with the (redacted, bounded) native payload.

    ``turn_id`` is the turn the agent's own ids place it in (``None``: whichever turn
    the caller stamps with); ``flags`` go on the event (:data:`EVENT_FLAGS`).
    """

    payload: Payload
    raw: Any = None
    turn_id: str | None = None
    flags: tuple[str, ...] = ()


@dataclass(slots=True)
class _Pending:
    variant: str
    message_id: str
    parts: list[str]
    size: int
    chunks: int
    content_type: str
    keep: dict[str, Any]
    """Native detail kept beside the text (``_meta``, unknown fields, unknown blocks)."""
    context: str = ""
    """What later chunks are redacted against (see :meth:`AcpNormalizer.flush_ready`)."""
    turn_id: str | None = None
    late: bool = False


def _unknown_fields(update: Mapping[str, Any], known: frozenset[str]) -> dict[str, Any]:
    """Fields of a known variant that ACP v1 does not define: kept, never dropped."""
    return {k: v for k, v in update.items() if k not in known}


class AcpNormalizer:
    """Stateful normalizer for one ACP session."""

    def __init__(
        self,
        *,
        redaction: Redaction,
        display_path: Callable[[str], str],
        extension: ProviderExtension | None = None,
        workspace: str = "",
    ) -> None:
        self._redaction = redaction
        self.extension: ProviderExtension = extension or NullExtension(family="generic")
        self.tools = ToolCallTracker(redaction=redaction, display_path=display_path)
        self.context = TurnContext(
            session_id=None,
            turn_id=None,
            workspace=workspace,
            redaction=redaction,
            next_plan_revision=self.next_plan_revision,
        )
        self._pending: _Pending | None = None
        self._auto_message = 0
        self._last_variant = ""
        self._last_chunk: tuple[str, str] | None = None
        self._message_turns: OrderedDict[str, str | None] = OrderedDict()
        """The turn each agent message id was first seen in (bounded, oldest forgotten)."""
        self._late_noticed: OrderedDict[str, None] = OrderedDict()
        self._answered = False
        self._plan_revision = 0
        self.usage_reported = False
        self.usage_updates = 0
        """``usage_update`` notifications normalized so far (a meter's O(1) "anything new?")."""
        self.tool_calls = 0

    # ------------------------------------------------------------------ turns

    def begin_turn(self, session_id: str, turn_id: str) -> list[Draft]:
        out = self.flush()
        self.context.session_id = session_id
        self.context.turn_id = turn_id
        self._answered = False
        self.context.usage_reported = False
        self.usage_reported = False
        out.extend(Draft(p) for p in self.extension.begin_turn(self.context))
        return out

    # Any: the agent's JSON (its ``usage``), read defensively.
    def end_turn(self, prompt_usage: Mapping[str, Any] | None) -> list[Draft]:
        """Flush, then report usage honestly: what was reported, or unavailable (and why)."""
        out = self.flush()
        context_only = self.usage_reported  # so far only usage_update (the context window)
        turn_usage = False
        if isinstance(prompt_usage, Mapping):
            usage = _prompt_usage(prompt_usage)
            if usage is not None:
                out.append(Draft(usage, raw=bounded_value(dict(prompt_usage))))
                self.usage_reported = turn_usage = True
        self.context.usage_reported = self.usage_reported
        extension_drafts = [Draft(p) for p in self.extension.end_turn(self.context)]
        out.extend(extension_drafts)
        if not turn_usage and not any(
            isinstance(d.payload, UsageReported) for d in extension_drafts
        ):
            reason = (
                "the agent reported only its context window (usage_update), no token counts "
                "for this turn"
                if context_only
                else "the agent reported no usage for this turn"
            )
            out.append(Draft(UsageReported(available=False, reason=reason)))
        return out

    # ---------------------------------------------------------------- updates

    # Any: the agent's JSON, untrusted; every field is checked before use.
    def update(self, params: Any, *, now_ms: float, answered: bool = False) -> list[Draft]:
        """Normalize one ``session/update`` notification's params.

        ``answered``: the current turn's prompt response has already arrived, so this
        update is late. Every draft says which turn it belongs to (:meth:`_owner`).
        The shapes of a flood take :meth:`hot`, everything else the generic path.
        """
        hot = self.hot(params, now_ms=now_ms, answered=answered)
        if hot is not None:
            return hot
        self._answered = answered
        if not _is_mapping(params) or not _is_mapping(params.get("update")):
            return self._notice("malformed", "session/update without an update object", params)
        update: Mapping[str, Any] = params["update"]
        variant = update.get("sessionUpdate")
        if not isinstance(variant, str):
            return self._notice("malformed", "session/update without sessionUpdate", update)
        owner, late = self._owner(variant, update)
        chunk_type = _CHUNK_TYPES.get(variant)
        if chunk_type is not None:
            out = self._chunk(variant, update, owner, late)
            if "_meta" in update:
                observed = self.extension.observe_update(variant, update, self.context)
                out.extend(self._attributed([Draft(p) for p in observed], owner, late))
            return out
        out = self.flush()
        self._last_variant = variant
        own: list[Draft] = []
        try:
            own.extend(self._dispatch(variant, update, now_ms))
        except AGENT_FAULTS as exc:  # only the agent's fault; a bug in baton propagates
            own.extend(self._malformed(variant, update, exc))
            out.extend(self._finish(variant, update, own, owner, late, observe=False))
        else:
            out.extend(self._finish(variant, update, own, owner, late, observe=True))
        return out

    def _finish(
        self,
        variant: str,
        update: Mapping[str, Any],
        own: list[Draft],
        owner: str | None,
        late: bool,
        *,
        observe: bool,
    ) -> list[Draft]:
        """How every update but a chunk ends (the generic path and :meth:`hot`'s): the
        extension's view of a stable variant, redaction fallbacks, the owner's turn."""
        if observe and variant in STABLE_VARIANTS:
            try:
                observed = self.extension.observe_update(variant, update, self.context)
            except AGENT_FAULTS as exc:
                own.extend(self._malformed(variant, update, exc))
            else:
                if observed:
                    own.extend(Draft(p) for p in observed)
        fallbacks = self._redaction.drain_fallbacks()
        if fallbacks:
            own.extend(self._fallbacks(self._subject(variant, update), fallbacks))
        return self._attributed(own, owner, late)

    def _malformed(self, variant: str, update: Mapping[str, Any], exc: Exception) -> list[Draft]:
        return self._notice(
            "malformed", f"{variant}: {type(exc).__name__}: {exc}", update, variant=variant
        )

    # ------------------------------------------------------------ the hot shapes

    # Any: the agent's JSON, untrusted (as update).
    def hot(self, params: Any, *, now_ms: float, answered: bool = False) -> list[Draft] | None:
        """:meth:`update` of the two shapes a flood is made of, in one pass; ``None`` (and
        nothing changed) for anything else, which takes :meth:`update`.

        * a transcript chunk of exactly ``sessionUpdate``, a ``{"type": "text", "text":
          str}`` block and maybe a non-empty ``messageId``: it coalesces (:meth:`_coalesce`);
        * a ``tool_call_update`` of a known, open call with only ``toolCallId``, ``title``,
          an open ``status``, text-block ``content`` items and ``rawOutput``: it progresses
          (:meth:`ToolCallTracker.progress`).

        No unknown fields, ``_meta``, unknown blocks or kinds: nothing to keep raw, no
        provider detail; the merge, redaction, bounds, extension hooks and attribution
        are the generic path's own functions. ``tests/events/test_hot_path.py`` holds the
        two paths equal.
        """
        if type(params) is not dict:
            return None
        update = params.get("update")
        if type(update) is not dict:
            return None
        variant = update.get("sessionUpdate")
        if variant == "tool_call_update":
            return self._hot_tool(update, now_ms, answered)
        if type(variant) is str and variant in _CHUNK_TYPES:
            return self._hot_chunk(variant, update, answered)
        return None

    def _hot_chunk(
        self, variant: str, update: dict[str, Any], answered: bool
    ) -> list[Draft] | None:
        content = update.get("content")
        message_id = update.get("messageId")
        if (
            len(update) != (2 if message_id is None else 3)  # exactly the keys read here
            or (message_id is not None and (type(message_id) is not str or not message_id))
            or type(content) is not dict
            or len(content) != 2
            or content.get("type") != "text"
            or type(text := content.get("text")) is not str
        ):
            return None
        self._answered = answered
        owner, late = self._owner(variant, update)
        if message_id is None:
            message_id = self._auto_id(variant)
        return self._coalesce(variant, message_id, text, "text", {}, owner, late)

    def _hot_tool(
        self, update: dict[str, Any], now_ms: float, answered: bool
    ) -> list[Draft] | None:
        tool_call_id = update.get("toolCallId")
        status = update.get("status")
        content = update.get("content")
        if (
            not update.keys() <= _HOT_TOOL_FIELDS
            or type(tool_call_id) is not str
            or (status is not None and (type(status) is not str or status not in _OPEN_STATUSES))
            or (content is not None and not _text_items(content))
        ):
            return None
        state = self.tools.get(tool_call_id)
        if state is None or state.done:
            return None
        self._answered = answered
        owner, late = self._owner("tool_call_update", update)
        out = self.flush()
        self._last_variant = "tool_call_update"
        parent = self.extension.parent_tool_call_id(update)
        payload = self.tools.progress(state, update, parent_tool_call_id=parent)
        own = [Draft(payload, turn_id=owner)]
        out.extend(self._finish("tool_call_update", update, own, owner, late, observe=True))
        return out

    def _owner(self, variant: str, update: Mapping[str, Any]) -> tuple[str | None, bool]:
        """The turn an update belongs to, by the agent's own ids, and whether it is late.

        A tool update belongs to the turn that started its tool call, a chunk to the turn
        its ``messageId`` was first seen in; anything else (no id) to the current turn.
        It is late when it belongs to an earlier turn, or when the current turn's prompt
        was already answered. A ``tool_call`` that reuses the id of a finished call of
        an earlier turn starts a new call.
        """
        current = self.context.turn_id
        owner = current
        if variant in ("tool_call", "tool_call_update"):
            tool_call_id = update.get("toolCallId")
            state = self.tools.get(str(tool_call_id)) if tool_call_id is not None else None
            if state is not None:
                if variant == "tool_call" and state.done and state.turn_id != current:
                    self.tools.forget(state.tool_call_id)
                else:
                    owner = state.turn_id
        elif variant in _CHUNK_TYPES:
            message_id = update.get("messageId")
            if isinstance(message_id, str) and message_id:
                turns = self._message_turns
                if message_id in turns:
                    owner = turns[message_id]
                else:
                    if len(turns) >= MAX_TRACKED_MESSAGES:
                        turns.popitem(last=False)
                    turns[message_id] = current
        late = self._answered or (owner is not None and owner != current)
        return owner, late

    def _attributed(self, drafts: list[Draft], owner: str | None, late: bool) -> list[Draft]:
        """``drafts`` placed in ``owner``'s turn; a late one flagged (and noticed once)."""
        if not drafts or (owner is None and not late):
            return drafts
        if not late:  # a draft made in its owner's turn already is that draft
            return [
                d if d.turn_id == owner else Draft(d.payload, d.raw, owner, d.flags) for d in drafts
            ]
        out = [Draft(d.payload, d.raw, owner, (*d.flags, "late")) for d in drafts]
        if late and owner is not None and owner not in self._late_noticed:
            if len(self._late_noticed) >= MAX_TRACKED_MESSAGES:
                self._late_noticed.popitem(last=False)
            self._late_noticed[owner] = None
            out.insert(
                0,
                Draft(
                    ProviderNotice(
                        category="late_update",
                        severity="info",
                        summary="the agent sent updates for this turn after its prompt "
                        "response; attributed to this turn by the agent's ids",
                        method="session/update",
                    ),
                    turn_id=owner,
                ),
            )
        return out

    def settle_open(self, status: str, now_ms: float) -> list[Draft]:
        """Close every unfinished tool call (the turn failed or was cancelled), each in
        the turn that started it."""
        current = self.context.turn_id
        return [
            Draft(
                payload,
                turn_id=turn_id,
                flags=("late",) if turn_id is not None and turn_id != current else (),
            )
            for turn_id, payload in self.tools.settle_open_by_turn(status, now_ms)
        ]

    def _subject(self, variant: str, update: Mapping[str, Any]) -> str:
        """Where a redaction fallback happened: variant, tool call, workspace-relative path."""
        subject = f"session/update {variant}"
        tool_call_id = update.get("toolCallId")
        if isinstance(tool_call_id, str):
            subject += f" {tool_call_id}"
            state = self.tools.get(tool_call_id)
            if state is not None and state.locations:
                subject += f" ({state.locations[0].path})"
        return subject

    def _dispatch(self, variant: str, update: Mapping[str, Any], now_ms: float) -> list[Draft]:
        if variant in ("tool_call", "tool_call_update"):
            tool_call_id = update.get("toolCallId")
            require(tool_call_id, (str, int), "toolCallId")
            if variant == "tool_call" and self.tools.get(str(tool_call_id)) is None:
                self.tool_calls += 1
            parent = self.extension.parent_tool_call_id(update)
            payloads = self.tools.upsert(
                update, now_ms=now_ms, parent_tool_call_id=parent, turn_id=self.context.turn_id
            )
            unknown = _unknown_tool_detail(update)
            if len(payloads) == 1 and isinstance(payloads[0], ToolExecutionProgressed):
                # Hot path: the normalized payload already holds every merged field;
                # the native envelope is kept for starts and completions, and for
                # whatever the payload has no place for (unknown fields and items).
                return [Draft(payloads[0], raw=self._kept(unknown))]
            raw = self._raw(update, drop=("content", "rawInput", "rawOutput"))
            if unknown.get("content") and isinstance(raw, dict):
                raw["content"] = self._kept({"content": unknown["content"]})["content"]
            return [Draft(p, raw=raw) for p in payloads]
        if variant == "plan":
            return [Draft(self._plan(update), raw=self._raw(update))]
        if variant == "available_commands_update":
            commands = update.get("availableCommands") or []
            if not isinstance(commands, list):
                raise MalformedPayload("availableCommands must be a list")
            kept = [
                self._redaction.value(c) for c in commands[:MAX_COMMANDS] if isinstance(c, dict)
            ]
            return [
                Draft(
                    CommandsUpdated(commands=[bounded_value(c, 2048) for c in kept]),
                    raw=self._kept(_unknown_fields(update, KNOWN_FIELDS[variant])),
                )
            ]
        if variant == "current_mode_update":
            mode_id = require(update.get("currentModeId"), str, "currentModeId")
            return [Draft(ModeChanged(mode_id=mode_id), raw=self._raw(update))]
        if variant == "config_option_update":
            options = update.get("configOptions")
            if not isinstance(options, list):
                raise MalformedPayload("configOptions must be a list")
            kept = [bounded_value(self._redaction.value(o)) for o in options if isinstance(o, dict)]
            return [
                Draft(
                    ConfigChanged(config_options=kept),
                    raw=self._kept(_unknown_fields(update, KNOWN_FIELDS[variant])),
                )
            ]
        if variant == "session_info_update":
            cleared = [k for k in ("title", "updatedAt") if k in update and update[k] is None]
            title = update.get("title")
            return [
                Draft(
                    SessionInfoUpdated(
                        title=clip_text(self._redaction.text(title))
                        if isinstance(title, str)
                        else None,
                        updated_at=str(update["updatedAt"]) if update.get("updatedAt") else None,
                        cleared=cleared,
                    ),
                    raw=self._raw(update),
                )
            ]
        if variant == "usage_update":
            usage = _context_usage(update)
            self.usage_updates += 1
            self.usage_reported = True
            self.context.usage_reported = True
            return [Draft(usage, raw=self._raw(update))]
        if variant in UNSTABLE_VARIANTS:
            return self._notice(
                "unstable_variant",
                UNSTABLE_VARIANTS[variant],
                update,
                variant=variant,
                severity="info",
            )
        claimed = self.extension.classify_update(variant, update, self.context)
        if claimed is not None:
            return [Draft(p, raw=self._raw(update)) for p in claimed]
        return self._notice(
            "unclassified",
            f"unknown session/update variant {variant!r} kept raw",
            update,
            variant=variant,
        )

    # --------------------------------------------------------------- transcript

    def _chunk(
        self, variant: str, update: Mapping[str, Any], owner: str | None, late: bool
    ) -> list[Draft]:
        content = update.get("content")
        if not _is_mapping(content):
            return self._notice("malformed", f"{variant} without content", update, variant=variant)
        content_type = str(content.get("type", "text"))
        text = content.get("text") if content_type == "text" else _block_text(content)
        if not isinstance(text, str):
            return self._notice(
                "malformed", f"{variant} text is not a string", update, variant=variant
            )
        keep = {} if update.keys() <= _CHUNK_FIELDS else _unknown_fields(update, _CHUNK_FIELDS)
        if "_meta" in update:
            keep["_meta"] = update["_meta"]
        if content_type not in KNOWN_CONTENT_TYPES:
            keep["content"] = content  # an unknown block: described in text, kept whole here
        message_id = update.get("messageId")
        if not isinstance(message_id, str) or not message_id:
            message_id = self._auto_id(variant)
        return self._coalesce(variant, message_id, text, content_type, keep, owner, late)

    def _auto_id(self, variant: str) -> str:
        """A chunk without an id: consecutive chunks of one kind are one message; anything
        else in between starts a new one."""
        last = self._last_chunk
        if last is not None and last[0] == variant and self._last_variant == variant:
            return last[1]
        self._auto_message += 1
        return f"auto-{self._auto_message}"

    def _coalesce(
        self,
        variant: str,
        message_id: str,
        text: str,
        content_type: str,
        keep: dict[str, Any],
        owner: str | None,
        late: bool,
    ) -> list[Draft]:
        """Add a chunk to the pending message, or flush that and start this one."""
        out: list[Draft] = []
        pending = self._pending
        if pending is not None and (
            pending.variant != variant
            or pending.message_id != message_id
            or pending.content_type != content_type
            or pending.keep != keep
            or pending.turn_id != owner
            or pending.late != late
        ):
            out.extend(self.flush())
            pending = None
        self._last_variant = variant
        self._last_chunk = (variant, message_id)
        if pending is None:
            self._pending = pending = _Pending(
                variant,
                message_id,
                [text],
                len(text),
                1,
                content_type,
                keep,
                turn_id=owner,
                late=late,
            )
        else:
            pending.parts.append(text)
            pending.size += len(text)
            pending.chunks += 1
        if pending.size >= COALESCE_MAX_BYTES:
            out.extend(self.flush_ready())
        return out

    def flush(self) -> list[Draft]:
        """Emit all coalesced transcript text: the message ends (something else came)."""
        pending = self._pending
        if pending is None:
            return []
        self._pending = None
        text = "".join(pending.parts)
        if not text:
            return []
        return self._transcript(pending, self._redaction.text_after(pending.context, text))

    def flush_ready(self) -> list[Draft]:
        """Emit the coalesced text that is safe to show now; hold back the rest.

        Called after each read from the agent's pipe, so live views stream. What may
        still be half a secret (the start of a bound credential, an unfinished word,
        a line that holds ``password:`` but not yet its value, a private key without
        its end) stays pending until the next chunk or the end of the message; what
        is shown is redacted against the shown part of its line (see
        ``Redactor.stream_cut``). The message stays open for its next chunks.
        """
        pending = self._pending
        if pending is None or not pending.parts:
            return []
        text = "".join(pending.parts)
        cut = self._redaction.stream_cut(text, pending.context)
        if cut <= 0:
            pending.parts = [text]
            return []
        shown, held = text[:cut], text[cut:]
        out = self._transcript(pending, self._redaction.text_after(pending.context, shown))
        pending.context = self._redaction.stream_context(pending.context, shown)
        pending.parts = [held] if held else []
        pending.size = len(held)
        pending.chunks = 1 if held else 0
        return out

    def _transcript(self, pending: _Pending, text: str) -> list[Draft]:
        payload = trusted(  # typed by construction: see _chunk
            _CHUNK_TYPES[pending.variant],
            message_id=pending.message_id,
            text=text,
            chunks=pending.chunks,
            content_type=pending.content_type,
        )
        raw = bounded_value(self._redaction.value(pending.keep)) if pending.keep else None
        drafts = [Draft(payload, raw=raw, turn_id=pending.turn_id)]
        reasons = self._redaction.drain_fallbacks()
        if reasons:
            drafts.extend(self._fallbacks(f"{pending.variant} {pending.message_id}", reasons))
        return self._attributed(drafts, pending.turn_id, pending.late)

    def _fallbacks(self, subject: str, reasons: list[str] | None = None) -> list[Draft]:
        """Every fail-closed redaction since the last call (or ``reasons``, already drained),
        as a visible security event."""
        return [
            Draft(
                SecurityRedactionFallback(
                    control="redaction",
                    subject=clip_text(self._redaction.text(subject), 200),
                    reason=reason,
                )
            )
            for reason in (self._redaction.drain_fallbacks() if reasons is None else reasons)
        ]

    # ------------------------------------------------------------------ helpers

    def _plan(self, update: Mapping[str, Any]) -> PlanUpdated:
        entries = update.get("entries")
        if not isinstance(entries, list):
            raise MalformedPayload("plan entries must be a list")
        steps = []
        for index, entry in enumerate(entries[:MAX_PLAN_STEPS]):
            if not isinstance(entry, Mapping):
                raise MalformedPayload("plan entry must be an object")
            native = str(entry.get("status", "pending"))
            status = _PLAN_STATUS.get(native, "pending")
            steps.append(
                PlanStep(
                    step_id=str(index + 1),
                    content=clip_text(self._redaction.text(str(entry.get("content", "")))),
                    status=status,
                    priority=str(entry["priority"]) if entry.get("priority") else None,
                    native_status=native if native != status else None,
                )
            )
        self._plan_revision += 1
        return PlanUpdated(
            source="acp.plan",
            revision=self._plan_revision,
            steps=steps,
            truncated=len(entries) > MAX_PLAN_STEPS,
        )

    # Any: the agent's JSON, untrusted (as update).
    def foreign(self, session_id: str, params: Mapping[str, Any]) -> list[Draft]:
        """An update for another session id: the extension's child view, never the parent's."""
        update = params.get("update")
        if not isinstance(update, Mapping):
            return self._notice("malformed", "session/update without an update object", params)
        out = self.flush()
        raw = bounded_value(self._redaction.value(dict(params)))
        claimed = self.extension.foreign_session_update(session_id, update, self.context)
        if claimed:
            # The native update stays with the first payload it produced: kept, not just
            # announced as kept.
            out.append(Draft(claimed[0], raw=raw))
            out.extend(Draft(p) for p in claimed[1:])
        else:
            variant = update.get("sessionUpdate")
            out.append(
                Draft(
                    ProviderNotice(
                        category="foreign_session",
                        severity="info",
                        summary=clip_text(
                            self._redaction.text(
                                f"update for session {session_id!r}, not this session; "
                                "kept raw, not attributed to it"
                            )
                        ),
                        method="session/update",
                        variant=clip_text(variant, 200) if isinstance(variant, str) else None,
                    ),
                    raw=raw,
                )
            )
        out.extend(self._fallbacks(f"session/update for session {clip_text(session_id, 160)}"))
        return out

    def next_plan_revision(self) -> int:
        """Plan revisions are shared with extensions that emit plans (Cursor todos)."""
        self._plan_revision += 1
        return self._plan_revision

    def _kept(self, detail: dict[str, Any]) -> Any:
        """Native detail the canonical payload has no place for; ``None`` when there is none."""
        if not detail:
            return None
        return bounded_value(self._redaction.value(detail))

    def _raw(self, update: Mapping[str, Any], drop: tuple[str, ...] = ()) -> Any:
        kept = {k: v for k, v in update.items() if k not in drop} if drop else dict(update)
        return bounded_value(self._redaction.value(kept))

    def _notice(
        self,
        category: str,
        summary: str,
        raw: Any,
        *,
        variant: str | None = None,
        severity: str = "warning",
    ) -> list[Draft]:
        out = self.flush()
        out.append(
            Draft(
                ProviderNotice(
                    category=category,
                    severity=severity,
                    summary=clip_text(self._redaction.text(summary)),
                    method="session/update",
                    variant=clip_text(variant, 200) if variant else None,
                ),
                raw=bounded_value(self._redaction.value(raw)),
            )
        )
        out.extend(self._fallbacks(f"session/update {variant or '?'}"))
        return out


def _is_mapping(value: Any) -> TypeGuard[Mapping[str, Any]]:
    """``isinstance(value, Mapping)``, the common case first (a parsed JSON object is a
    dict): the ABC check alone cost more than a small update's other field checks."""
    return type(value) is dict or isinstance(value, Mapping)


def _in(value: Any, vocabulary: Collection[str]) -> bool:
    """Whether an agent-given value is a word of ``vocabulary`` (any JSON value may come)."""
    return isinstance(value, str) and value in vocabulary


_TOOL_FIELDS = KNOWN_FIELDS["tool_call"]
_HOT_TOOL_FIELDS = frozenset(
    {"sessionUpdate", "toolCallId", "title", "status", "content", "rawOutput"}
)
_OPEN_STATUSES = TOOL_STATUSES - TERMINAL_STATUSES


def _text_items(content: Any) -> bool:
    """Whether ``content`` is a list of ``{"type": "content", "content": <text block>}``
    items and nothing else (what :meth:`AcpNormalizer.hot` takes)."""
    if type(content) is not list:
        return False
    for item in content:
        if type(item) is not dict or len(item) != 2 or item.get("type") != "content":
            return False
        block = item.get("content")
        if (
            type(block) is not dict
            or len(block) != 2
            or block.get("type") != "text"
            or type(block.get("text")) is not str
        ):
            return False
    return True


def _unknown_tool_detail(update: Mapping[str, Any]) -> dict[str, Any]:
    """Unknown fields of a tool update, values outside ACP's kind/status vocabulary, and
    content items of unknown types (whole)."""
    detail = {} if update.keys() <= _TOOL_FIELDS else _unknown_fields(update, _TOOL_FIELDS)
    for key, known in (("kind", TOOL_KINDS), ("status", TOOL_STATUSES)):
        value = update.get(key)
        if value is not None and not _known(value, known):
            detail[key] = value
    content = update.get("content")
    if isinstance(content, list):
        unknown = [item for item in content if not _known_tool_item(item)]
        if unknown:
            detail["content"] = unknown
    return detail


def _known(value: Any, vocabulary: frozenset[str]) -> bool:
    return isinstance(value, str) and value in vocabulary


def _known_tool_item(item: Any) -> bool:
    """A ToolCallContent item ACP v1 defines (a ``content`` one with a known block)."""
    if not _is_mapping(item) or not _known(item.get("type"), KNOWN_TOOL_CONTENT_TYPES):
        return False
    block = item.get("content")
    return not (
        item["type"] == "content"
        and _is_mapping(block)
        and not _known(block.get("type"), KNOWN_CONTENT_TYPES)
    )


def _int_or_none(value: Any) -> int | None:
    if isinstance(value, bool):
        return None
    if isinstance(value, int):
        return value
    if isinstance(value, float) and value.is_integer():
        return int(value)
    return None


def _context_usage(update: Mapping[str, Any]) -> UsageReported:
    cost = update.get("cost")
    amount = measured(cost.get("amount")) if isinstance(cost, Mapping) else None
    currency = None
    if isinstance(cost, Mapping) and amount is not None:
        currency = str(cost.get("currency") or "") or None
    used, size = _int_or_none(update.get("used")), _int_or_none(update.get("size"))
    if used is None and size is None and amount is None:
        raise MalformedPayload("usage_update carries no numbers")
    return UsageReported(
        available=True,
        scope="context",
        context_used=used,
        context_size=size,
        cost_amount=amount,
        cost_currency=currency,
    )


def _prompt_usage(usage: Mapping[str, Any]) -> UsageReported | None:
    fields = {
        "input_tokens": _int_or_none(usage.get("inputTokens")),
        "output_tokens": _int_or_none(usage.get("outputTokens")),
        "total_tokens": _int_or_none(usage.get("totalTokens")),
        "thought_tokens": _int_or_none(usage.get("thoughtTokens")),
        "cached_read_tokens": _int_or_none(usage.get("cachedReadTokens")),
        "cached_write_tokens": _int_or_none(usage.get("cachedWriteTokens")),
    }
    if all(v is None for v in fields.values()):
        return None
    return UsageReported(available=True, scope="turn", **fields)
