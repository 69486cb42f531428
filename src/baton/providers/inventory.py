"""Closed inventories: every native event a provider is known to emit, and where it goes.

An agent upgrade that adds an update variant, a vendor method or a ``_meta`` key must
show up, not vanish. So each provider has a table, in code, of what it is known to
emit (stable ACP variants it uses, its vendor methods, its ``_meta`` keys) and the
canonical event family each one feeds, or ``None`` with the reason it is not mapped.
The table is the authority, three ways:

* :class:`TableExtension`, the base of every provider extension, dispatches only
  through handler tables that tests compare with the inventory (a handler for a
  native the inventory does not list fails the suite);
* a native that is not in the table becomes ``provider.notice`` ``unclassified``
  (:mod:`baton.providers.registry` ``dispatch_*``), and a listed one that is
  deliberately unmapped becomes an ``info`` notice ``unsupported`` with the reason;
* the capability matrix (:mod:`baton.providers.capabilities`) is derived from these
  tables plus per-provider declarations, so docs cannot drift from code.

Evidence levels say how we know an entry: ``observed`` (seen on the wire, in a
recorded trace or a shipped source file we read), ``documented`` (vendor docs, the
ACP reference, the seed's probe), ``inferred`` (third-party reading or a sibling
agent; the mapping is implemented but the emission is unconfirmed). The capability
matrix turns ``inferred``-only evidence into ``unverified``.

What the generic normalizer tells an extension about the turn travels in the typed
fields of :class:`~baton.events.extension.TurnContext` (``redaction``,
``usage_reported``, ``next_plan_revision``).

Length: the closed inventories of every family are data tables; the table-driven extension base beside them is what reads them.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from functools import partial
from typing import Any, Literal

from baton.events.agent_terminals import TERMINAL_META_KEYS
from baton.events.bounds import clip_text
from baton.events.extension import (
    AGENT_FAULTS,
    STABLE_VARIANTS,
    InventoryEntry,
    TurnContext,
    VendorOutcome,
)
from baton.events.model import PAYLOAD_TYPES, Payload, ProviderNotice, UsageReported
from baton.jsontypes import JsonMapping, JsonValue

__all__ = [
    "BUILTIN_INVENTORY",
    "CLAUDE_INVENTORY",
    "CODEX_INVENTORY",
    "CURSOR_INVENTORY",
    "CURSOR_SDK_INVENTORY",
    "GEMINI_INVENTORY",
    "GENERIC_METHODS",
    "INVENTORIES",
    "OPENCODE_INVENTORY",
    "QWEN_INVENTORY",
    "CapabilityClaim",
    "Evidence",
    "NativeEvent",
    "ProviderInventory",
    "TableExtension",
    "UpdateHandler",
    "is_canonical_family",
    "notice",
]


Evidence = Literal["observed", "documented", "inferred"]
Kind = Literal["update", "method", "meta"]
Status = Literal["implemented", "partial", "unsupported", "unverified"]

GENERIC_METHODS: Mapping[str, str] = {
    "session/request_permission": "request",
    "elicitation/create": "request",
}
"""Stable agent→client requests owned by the runner and :mod:`baton.requests`.

Client services (``fs/*``, ``terminal/*``) are the runner's and are not inventoried
per provider: they are not events, and their paths are checked by ``baton.security``.
"""

MAX_NOTICED = 256
"""How many distinct (kind, native) notices an extension remembers to avoid repeats."""


def is_canonical_family(name: str) -> bool:
    """Whether ``name`` is a canonical event type or a family prefix of one."""
    return name in PAYLOAD_TYPES or any(t.startswith(name + ".") for t in PAYLOAD_TYPES)


@dataclass(frozen=True, slots=True)
class NativeEvent(InventoryEntry):
    """An :class:`InventoryEntry` with how we know it (see the module docstring)."""

    evidence: Evidence = "documented"
    source: str = ""
    """Where the evidence is (reference section, source file, trace)."""


@dataclass(frozen=True, slots=True)
class CapabilityClaim:
    """One provider's declared answer for a capability-matrix row."""

    status: Status
    evidence: str


@dataclass(frozen=True, slots=True)
class ProviderInventory:
    """The closed table of one provider family."""

    family: str
    entries: tuple[NativeEvent, ...]

    def __post_init__(self) -> None:
        seen: set[tuple[str, str]] = set()
        for entry in self.entries:
            key = (entry.kind, entry.native)
            if key in seen:
                raise ValueError(f"{self.family}: duplicate inventory entry {key}")
            seen.add(key)
            if entry.canonical is None and not entry.note:
                raise ValueError(f"{self.family}: {key} is unmapped without a reason")
            if entry.canonical is not None and not is_canonical_family(entry.canonical):
                raise ValueError(f"{self.family}: {key} maps to unknown {entry.canonical!r}")

    def get(self, kind: str, native: str) -> NativeEvent | None:
        return next((e for e in self.entries if e.kind == kind and e.native == native), None)

    def natives(self, kind: str) -> frozenset[str]:
        return frozenset(e.native for e in self.entries if e.kind == kind)


def _entry(
    kind: Kind,
    native: str,
    canonical: str | None,
    note: str = "",
    evidence: Evidence = "documented",
    source: str = "",
) -> NativeEvent:
    return NativeEvent(native, kind, canonical, note, evidence, source)


_u = partial(_entry, "update")
_m = partial(_entry, "method")
_meta = partial(_entry, "meta")


def _stable(
    variants: Iterable[str], evidence: Evidence, source: str, notes: Mapping[str, str] | None = None
) -> tuple[NativeEvent, ...]:
    notes = notes or {}
    return tuple(_u(v, STABLE_VARIANTS[v], notes.get(v, ""), evidence, source) for v in variants)


_CHUNKS = ("agent_message_chunk", "agent_thought_chunk")
_TOOLS = ("tool_call", "tool_call_update")
_SEED = "Cursor capability inventory, 2026-09-28"
_ACP2 = "acp.md §2 (Cursor extensions)"

CURSOR_INVENTORY = ProviderInventory(
    "cursor",
    (
        *_stable(_CHUNKS, "documented", _SEED),
        _u(
            "user_message_chunk",
            "transcript.user",
            "only while session/load replays history",
            "documented",
            _SEED,
        ),
        *_stable(
            _TOOLS,
            "documented",
            _SEED,
            {
                "tool_call_update": "Cursor is reported never to mark a tool failed; failure "
                "is only visible inside rawOutput (third-party source reading)"
            },
        ),
        _u("plan", "plan.updated", "sent alongside cursor/create_plan", "documented", _SEED),
        *_stable(
            (
                "available_commands_update",
                "current_mode_update",
                "config_option_update",
                "session_info_update",
            ),
            "documented",
            _SEED,
            {"session_info_update": "title after automatic naming; may follow the prompt result"},
        ),
        _u(
            "subagent_spawned",
            "delegation",
            "child session announced on its parent's session; needs client _meta.subagents",
            "documented",
            _SEED,
        ),
        _u(
            "subagent_state_update",
            "delegation",
            "terminal child states completed|failed|cancelled|disconnected",
            "documented",
            _SEED,
        ),
        _m("session/request_permission", "request", "allow-once/allow-always/reject-once"),
        _m("cursor/ask_question", "request", "durable question (route human)", source=_ACP2),
        _m("cursor/create_plan", "request", "durable plan approval (route human)", source=_ACP2),
        _m(
            "cursor/update_todos", "plan.updated", "merge by native id; acked at once", source=_ACP2
        ),
        _m("cursor/task", "delegation", "completed subagent task; acked at once", source=_ACP2),
        _m(
            "cursor/generate_image", "artifact", "path references only; acked at once", source=_ACP2
        ),
        _meta(
            "cursor",
            "delegation",
            "toolCallId/agentId/model identity of subagent_spawned",
            "inferred",
            "third-party reading of Cursor's ACP bundle",
        ),
    ),
)

_CLAUDE_SRC = "claude-agent-acp scenario snapshots (third-party repository)"
CLAUDE_INVENTORY = ProviderInventory(
    "claude",
    (
        *_stable(_CHUNKS, "documented", "acp.md §1.8"),
        _u("user_message_chunk", "transcript.user", "history replay and tool-result echoes"),
        *_stable(_TOOLS, "documented", "acp.md §1.8"),
        _u("plan", "plan.updated", "TodoWrite", "inferred", _CLAUDE_SRC),
        *_stable(
            (
                "available_commands_update",
                "current_mode_update",
                "config_option_update",
                "session_info_update",
                "usage_update",
            ),
            "observed",
            _CLAUDE_SRC,
        ),
        _m("session/request_permission", "request", "tool approvals; ExitPlanMode as switch_mode"),
        _m(
            "elicitation/create",
            "request",
            "AskUserQuestion as a form, when the client advertises elicitation",
            "inferred",
            _CLAUDE_SRC,
        ),
        _m(
            "_claude/sdkMessage",
            "provider.notice",
            "raw Claude SDK messages, opt-in via session _meta (baton does not opt in)",
            "observed",
            "claude-agent-acp PR #527 (third-party clients)",
        ),
        _m(
            "_claude/task",
            "provider.notice",
            "named by acp.md §1.11; shape unknown, surfaced as a notice",
            "inferred",
            "acp.md §1.11",
        ),
        _m(
            "_claude/rateLimit",
            "provider.notice",
            "named as a method by acp.md §1.11; observed as a usage_update _meta key",
            "inferred",
            "acp.md §1.11",
        ),
        _m(
            "_claude/model",
            "provider.notice",
            "named as a method by acp.md §1.11; observed as a usage_update _meta key",
            "inferred",
            "acp.md §1.11",
        ),
        _m(
            "_claude/origin",
            None,
            "who started the turn (human, task notification): not a canonical concept, kept raw",
            "inferred",
            "acp.md §1.11",
        ),
        _meta(
            "claudeCode",
            "delegation",
            "parentToolUseId → parent_tool_call_id (lineage); toolName Task/Agent → "
            "delegation; toolResponse kept raw",
            "documented",
            "acp.md §1.8",
        ),
        _meta(
            "_claude/rateLimit",
            "provider.notice",
            "rate-limit window status on usage_update",
            "observed",
            _CLAUDE_SRC,
        ),
        _meta(
            "_claude/model",
            "provider.notice",
            "effective model on usage_update",
            "observed",
            _CLAUDE_SRC,
        ),
        _meta(
            "_claude/origin",
            None,
            "who started the turn (human, task notification): not a canonical concept, kept raw",
            "observed",
            _CLAUDE_SRC,
        ),
    ),
)

_CODEX_SRC = "codex-acp sources (agentclientprotocol/codex-acp)"
CODEX_INVENTORY = ProviderInventory(
    "codex",
    (
        *_stable(_CHUNKS, "documented", "acp.md §6 (app-server → ACP)"),
        _u("user_message_chunk", "transcript.user", "history replay"),
        *_stable(_TOOLS, "documented", "acp.md §6"),
        _u("plan", "plan.updated", "turn/plan/updated", "documented", "acp.md §6"),
        *_stable(("available_commands_update", "session_info_update"), "inferred", _CODEX_SRC),
        _u(
            "current_mode_update",
            "mode.changed",
            "modes are approval/sandbox presets; baton adds an approval_preset notice",
            "documented",
            "acp.md §1.9",
        ),
        _u(
            "config_option_update",
            "config.changed",
            "mode option carries the approval preset; baton adds an approval_preset notice",
            "documented",
            "acp.md §1.9",
        ),
        _u(
            "usage_update", "usage.reported", "thread/tokenUsage/updated", "documented", "acp.md §6"
        ),
        _m(
            "session/request_permission",
            "request",
            "command/file-change approvals",
            source="acp.md §6",
        ),
        _m("elicitation/create", "request", "MCP elicitation", "inferred", _CODEX_SRC),
        _m(
            "_account/rate_limits_update",
            "provider.notice",
            "account usage windows (interim _meta extension)",
            "inferred",
            _CODEX_SRC,
        ),
        _meta(
            "codex",
            None,
            "client message correlation (clientUserMessageId, livePeer): kept raw",
            "inferred",
            _CODEX_SRC,
        ),
    ),
)

_GEMINI_SRC = "gemini-cli zed-integration sources (older snapshot than the pinned 0.61.0)"
GEMINI_INVENTORY = ProviderInventory(
    "gemini",
    (
        *_stable(_CHUNKS, "observed", _GEMINI_SRC),
        _u("user_message_chunk", "transcript.user", "history replay", "observed", _GEMINI_SRC),
        *_stable(_TOOLS, "observed", _GEMINI_SRC),
        _u("plan", "plan.updated", "todo list (planParser)", "inferred", _GEMINI_SRC),
        *_stable(("available_commands_update", "current_mode_update"), "inferred", _GEMINI_SRC),
        _m("session/request_permission", "request", "tool confirmations", "observed", _GEMINI_SRC),
    ),
)

_QWEN_SRC = "Qwen Code is a Gemini CLI fork; entries mirror Gemini's"
_QWEN_LIVE = "tests/integration/test_qwen_baton.py (qwen-code 0.24.4, offline)"
QWEN_INVENTORY = ProviderInventory(
    "qwen",
    (
        *_stable(_CHUNKS, "inferred", _QWEN_SRC),
        _u("user_message_chunk", "transcript.user", "history replay", "inferred", _QWEN_SRC),
        *_stable(_TOOLS, "inferred", _QWEN_SRC),
        _u("plan", "plan.updated", "todo list", "inferred", _QWEN_SRC),
        *_stable(("available_commands_update", "current_mode_update"), "inferred", _QWEN_SRC),
        _m("session/request_permission", "request", "tool confirmations", "inferred", _QWEN_SRC),
        _meta(
            "usage",
            "usage.reported",
            "per model call on agent_message_chunk: inputTokens, outputTokens, totalTokens, "
            "thoughtTokens, cachedReadTokens; summed per turn",
            "observed",
            _QWEN_LIVE,
        ),
        _meta(
            "durationMs", None, "model call duration on agent_message_chunk", "observed", _QWEN_LIVE
        ),
        _meta("toolName", None, "the native tool name on tool calls", "observed", _QWEN_LIVE),
        _meta("provenance", None, "builtin or MCP, on tool calls", "observed", _QWEN_LIVE),
        _meta("phase", None, "'preparing' on the first tool_call", "observed", _QWEN_LIVE),
        _meta("availableSkills", None, "on available_commands_update", "observed", _QWEN_LIVE),
        _meta(
            "availableSkillDetails", None, "on available_commands_update", "observed", _QWEN_LIVE
        ),
    ),
)

_OPENCODE_SRC = "acp.md §5 offline OpenCode run (opencode-ai 1.18.33)"
_OPENCODE_LIVE = "tests/providers/test_opencode_live.py (opencode-ai 1.18.33, offline)"
OPENCODE_INVENTORY = ProviderInventory(
    "opencode",
    (
        _u(
            "agent_message_chunk",
            "transcript.assistant",
            "with messageId",
            "observed",
            _OPENCODE_SRC,
        ),
        _u(
            "agent_thought_chunk",
            "transcript.thinking",
            "reasoning models",
            "inferred",
            _OPENCODE_SRC,
        ),
        _u(
            "user_message_chunk",
            "transcript.user",
            "session/load replay",
            "observed",
            _OPENCODE_SRC,
        ),
        _u(
            "tool_call",
            "tool.execution",
            "pending with empty rawInput first; the task tool (kind think) → delegation",
            "observed",
            _OPENCODE_SRC,
        ),
        _u(
            "tool_call_update",
            "tool.execution",
            "in_progress with rawInput, completed with rawOutput",
            "observed",
            _OPENCODE_SRC,
        ),
        _u("plan", "plan.updated", "todowrite tool", "inferred", _OPENCODE_SRC),
        _u("available_commands_update", "commands.updated", "", "observed", _OPENCODE_SRC),
        *_stable(
            ("current_mode_update", "config_option_update", "session_info_update"),
            "inferred",
            _OPENCODE_SRC,
        ),
        _u(
            "usage_update",
            "usage.reported",
            "context used/size and cost after each model call",
            "observed",
            _OPENCODE_LIVE,
        ),
        _m(
            "session/request_permission",
            "request",
            "edit/bash when its permission config says ask",
            "observed",
            "tests/support/opencode.py",
        ),
    ),
)

_BUILTIN_SRC = "baton.agents.builtin.updates"
BUILTIN_INVENTORY = ProviderInventory(
    "builtin",
    (
        _u(
            "agent_message_chunk",
            "transcript.assistant",
            "replies and summaries",
            "observed",
            _BUILTIN_SRC,
        ),
        _u(
            "user_message_chunk", "transcript.user", "session/load replay", "observed", _BUILTIN_SRC
        ),
        _u("tool_call", "tool.execution", "one per runbook step", "observed", _BUILTIN_SRC),
        _u(
            "tool_call_update",
            "tool.execution",
            "step result, diff content for file steps",
            "observed",
            _BUILTIN_SRC,
        ),
        _u("plan", "plan.updated", "the runbook's steps", "observed", _BUILTIN_SRC),
        _m(
            "session/request_permission",
            "request",
            "before execute and edit steps",
            "observed",
            "baton.agents.builtin.channel",
        ),
    ),
)

_SDK_TYPES = "@cursor/sdk 1.0.32 messages.d.ts and cursor-sdk 1.1.0 types.py (SDKMessage)"
_SDK_MAP = "baton.providers.cursor_sdk.translate (the cursor-sdk transport's mapping)"
CURSOR_SDK_INVENTORY = ProviderInventory(
    "cursor-sdk",
    (
        _u(
            "agent_message_chunk",
            "transcript.assistant",
            "SDK assistant text (one message per delta, coalesced)",
            "documented",
            _SDK_TYPES,
        ),
        _u(
            "agent_thought_chunk",
            "transcript.thinking",
            "SDK thinking text",
            "documented",
            _SDK_TYPES,
        ),
        _u(
            "user_message_chunk",
            "transcript.user",
            "SDK user message (the prompt as the run recorded it)",
            "documented",
            _SDK_TYPES,
        ),
        _u(
            "tool_call",
            "tool.execution",
            "SDK tool_call (running); kind from the tool-name table",
            "documented",
            _SDK_TYPES,
        ),
        _u(
            "tool_call_update",
            "tool.execution",
            "SDK tool_call (completed | error) with args and result",
            "documented",
            _SDK_TYPES,
        ),
        _u("plan", "plan.updated", "an updateTodos tool call's todos", "documented", _SDK_TYPES),
        _u(
            "current_mode_update",
            "mode.changed",
            "the transport's mode (ask/agent) after session/set_mode",
            "documented",
            _SDK_MAP,
        ),
        _u(
            "cursor_sdk_subagent",
            "delegation",
            "a task tool call (a subagent): started, then completed or failed",
            "documented",
            _SDK_TYPES,
        ),
        _u(
            "cursor_sdk_thinking_completed",
            "provider.notice",
            "thinking finished, with its duration (no canonical field)",
            "documented",
            _SDK_TYPES,
        ),
        _u(
            "cursor_sdk_system",
            "provider.notice",
            "system init: the model and the tools the run offers",
            "documented",
            _SDK_TYPES,
        ),
        _u(
            "cursor_sdk_summary",
            "provider.notice",
            "SDK task message (a conversation summary)",
            "documented",
            _SDK_TYPES,
        ),
        _u(
            "cursor_sdk_request",
            "provider.notice",
            "the run's request id (for Cursor support)",
            "documented",
            _SDK_TYPES,
        ),
        _u(
            "cursor_sdk_block",
            "provider.notice",
            "an assistant content block that is not text (tool_use): kept raw",
            "documented",
            _SDK_TYPES,
        ),
        _m(
            "session/request_permission",
            "request",
            "baton's own custom tools (write_file, edit_file, run_command) in ask mode",
            "observed",
            _SDK_MAP,
        ),
        _meta(
            "cursor-sdk/tool",
            "tool.execution",
            "the SDK tool name; a name outside the tool table is flagged",
            "documented",
            _SDK_TYPES,
        ),
        _meta(
            "cursor-sdk/truncated",
            None,
            "which of args/result the SDK truncated: kept raw",
            "documented",
            _SDK_TYPES,
        ),
    ),
)

INVENTORIES: Mapping[str, ProviderInventory] = {
    inv.family: inv
    for inv in (
        BUILTIN_INVENTORY,
        CURSOR_INVENTORY,
        CLAUDE_INVENTORY,
        CODEX_INVENTORY,
        GEMINI_INVENTORY,
        OPENCODE_INVENTORY,
        QWEN_INVENTORY,
        CURSOR_SDK_INVENTORY,
    )
}
"""Every provider family baton ships, in matrix column order."""


# --------------------------------------------------------------------------- helpers


def notice(
    category: str,
    summary: str,
    *,
    ctx: TurnContext | None = None,
    severity: Literal["info", "warning", "error"] = "warning",
    method: str | None = None,
    variant: str | None = None,
) -> ProviderNotice:
    """A bounded (and, with ``ctx``, redacted) :class:`ProviderNotice`."""
    text = ctx.redaction.text(summary) if ctx is not None else summary
    return ProviderNotice(
        category=category,
        severity=severity,
        summary=clip_text(text),
        method=method,
        variant=variant,
    )


UpdateHandler = Callable[[JsonMapping, TurnContext], list[Payload]]
MethodHandler = Callable[[JsonMapping, bool, TurnContext], VendorOutcome]
MetaHandler = Callable[[str, Any, JsonMapping, TurnContext], list[Payload]]
ForeignHandler = Callable[[str, JsonMapping, TurnContext], list[Payload]]

_HANDLER_ERRORS = AGENT_FAULTS
"""What a handler may raise on malformed agent input (an explicit check's
:class:`~baton.events.extension.MalformedPayload`, pydantic's ``ValidationError``);
it becomes a ``malformed`` notice. Anything else is a bug in baton and propagates."""


class TableExtension:
    """Base of baton's provider extensions: dispatch through tables the inventory vets.

    Subclasses register bound methods in ``__init__`` with :meth:`on_update`,
    :meth:`on_method`, :meth:`on_meta` and :meth:`observe`. Registration refuses a
    native the inventory does not list, and :meth:`handled` lets tests compare the
    tables with the inventory both ways. Handlers get plain data and must not do I/O.

    Beyond :class:`~baton.events.extension.ProviderExtension`, the runner may call
    :meth:`observe_update` for every stable variant (to add, never replace, payloads
    from native detail such as ``_meta``) and :meth:`foreign_session_update` for a
    ``session/update`` whose ``sessionId`` is not the turn's session.
    """

    usage_unavailable_reason = "the agent reported no usage for this turn"

    def __init__(self, inventory: ProviderInventory) -> None:
        self.family = inventory.family
        self.inventory = inventory
        self._updates: dict[str, UpdateHandler] = {}
        self._methods: dict[str, tuple[MethodHandler, Any]] = {}
        self._metas: dict[str, MetaHandler] = {}
        self._observers: dict[str, UpdateHandler] = {}
        self._noticed: OrderedDict[tuple[str, str], None] = OrderedDict()

    # -------------------------------------------------------------- registration

    def _listed(self, kind: str, native: str) -> None:
        if self.inventory.get(kind, native) is None:
            raise LookupError(f"{self.family}: {kind} {native!r} is not in the inventory")

    def on_update(self, variant: str, handler: UpdateHandler) -> None:
        self._listed("update", variant)
        if variant in STABLE_VARIANTS:
            raise LookupError(f"{variant!r} is owned by the generic layer; use observe()")
        self._updates[variant] = handler

    def on_method(self, method: str, handler: MethodHandler, *, fallback: JsonValue) -> None:
        """``fallback`` answers the request if the handler fails on malformed params."""
        self._listed("method", method)
        self._methods[method] = (handler, fallback)

    def on_meta(self, key: str, handler: MetaHandler) -> None:
        self._listed("meta", key)
        self._metas[key] = handler

    def observe(self, variant: str, handler: UpdateHandler) -> None:
        self._listed("update", variant)
        if variant not in STABLE_VARIANTS:
            raise LookupError(f"{variant!r} is not a generic variant; use on_update()")
        self._observers[variant] = handler

    def handled(self) -> frozenset[tuple[str, str]]:
        """Every ``(kind, native)`` this extension has a handler for."""
        return frozenset(
            [("update", v) for v in self._updates]
            + [("update", v) for v in self._observers]
            + [("method", m) for m in self._methods]
            + [("meta", k) for k in self._metas]
        )

    # ----------------------------------------------------------------- protocol

    def classify_update(
        self, variant: str, update: JsonMapping, ctx: TurnContext
    ) -> list[Payload] | None:
        handler = self._updates.get(variant)
        if handler is not None:
            return self._guard(partial(handler, update, ctx), ctx, variant=variant)
        entry = self.inventory.get("update", variant)
        if entry is None or variant in STABLE_VARIANTS:
            return None
        return [self._unsupported(entry, ctx, variant=variant)]

    def vendor_method(
        self, method: str, params: JsonMapping, *, has_id: bool, ctx: TurnContext
    ) -> VendorOutcome | None:
        spec = self._methods.get(method)
        if spec is not None:
            handler, fallback = spec
            try:
                return handler(params, has_id, ctx)
            except _HANDLER_ERRORS as exc:
                return VendorOutcome(
                    payloads=[self._malformed(exc, ctx, method=method)],
                    route="reply",
                    result=fallback if has_id else None,
                )
        entry = self.inventory.get("method", method)
        if entry is None or method in GENERIC_METHODS:
            return None
        return VendorOutcome(payloads=[self._unsupported(entry, ctx, method=method)], result=None)

    def parent_tool_call_id(self, update: JsonMapping) -> str | None:
        return None

    def begin_turn(self, ctx: TurnContext) -> list[Payload]:
        return []

    def end_turn(self, ctx: TurnContext) -> list[Payload]:
        if ctx.usage_reported:
            return []
        return [UsageReported(available=False, reason=self.usage_unavailable_reason)]

    # ------------------------------------------------------------- native detail

    def observe_update(self, variant: str, update: JsonMapping, ctx: TurnContext) -> list[Payload]:
        """Extra payloads from the native detail of a stable variant (``_meta`` keys ...).

        Unknown ``_meta`` keys get one ``unclassified`` notice per (variant, key), not
        one per update: a chatty agent must stay visible without flooding the stream.
        """
        out: list[Payload] = []
        observer = self._observers.get(variant)
        if observer is not None:
            out.extend(self._guard(partial(observer, update, ctx), ctx, variant=variant))
        meta = update.get("_meta")
        if not isinstance(meta, Mapping):
            return out
        for key, value in meta.items():
            key = str(key)
            handler = self._metas.get(key)
            if handler is not None:
                out.extend(
                    self._guard(partial(handler, key, value, update, ctx), ctx, variant=variant)
                )
            elif self._unlisted_meta(key) and self._first_time("meta", f"{variant}:{key}"):
                out.append(
                    notice(
                        "unclassified",
                        f"{self.family}: unknown _meta key {key!r} on {variant} (kept raw)",
                        ctx=ctx,
                        variant=variant,
                    )
                )
        return out

    def foreign_session_update(
        self, session_id: str, update: JsonMapping, ctx: TurnContext
    ) -> list[Payload]:
        """A ``session/update`` for a session that is not the turn's: never fails the parent."""
        variant = str(update.get("sessionUpdate", "?"))
        if not self._first_time("foreign", session_id):
            return []
        return [
            notice(
                "foreign_session",
                f"{self.family}: update {variant!r} for session {clip_text(session_id, 160)!r}, "
                "which is not this turn's session; kept raw",
                ctx=ctx,
                variant=variant,
            )
        ]

    # ----------------------------------------------------------------- helpers

    def _unlisted_meta(self, key: str) -> bool:
        return (
            self.inventory.get("meta", key) is None
            and key not in _W3C_META
            and key not in TERMINAL_META_KEYS  # the generic tool layer reads them
        )

    def _first_time(self, kind: str, key: str) -> bool:
        """Remember (bounded, oldest forgotten first) that a notice was given."""
        marker = (kind, key)
        if marker in self._noticed:
            return False
        self._noticed[marker] = None
        while len(self._noticed) > MAX_NOTICED:
            self._noticed.popitem(last=False)
        return True

    def _guard(
        self, call: Callable[[], list[Payload]], ctx: TurnContext, *, variant: str
    ) -> list[Payload]:
        try:
            return call()
        except _HANDLER_ERRORS as exc:
            return [self._malformed(exc, ctx, variant=variant)]

    def _malformed(
        self,
        exc: BaseException,
        ctx: TurnContext,
        *,
        method: str | None = None,
        variant: str | None = None,
    ) -> ProviderNotice:
        what = method or variant or "?"
        return notice(
            "malformed",
            f"{self.family}: {what}: {type(exc).__name__}: {exc}",
            ctx=ctx,
            method=method,
            variant=variant,
        )

    def _unsupported(
        self,
        entry: InventoryEntry,
        ctx: TurnContext,
        *,
        method: str | None = None,
        variant: str | None = None,
    ) -> ProviderNotice:
        return notice(
            "unsupported",
            f"{self.family}: {entry.native} is known but not mapped: {entry.note}",
            ctx=ctx,
            severity="info",
            method=method,
            variant=variant,
        )


_W3C_META = frozenset({"traceparent", "tracestate", "baggage"})
"""Root ``_meta`` keys ACP reserves for W3C trace context: never provider detail."""
