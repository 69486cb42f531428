"""Claude Code (``claude-agent-acp``): delegation lineage and its ``_claude`` detail.

What Claude adds to stable ACP, and where it goes:

* ``_meta.claudeCode.parentToolUseId`` on a tool call names the ``Task`` tool call
  whose subagent made it: :meth:`ClaudeExtension.parent_tool_call_id` hands it to the
  generic tool layer as ``parent_tool_call_id`` (delegation lineage).
* The ``Task``/``Agent`` tool itself (``_meta.claudeCode.toolName``, rawInput
  ``{description, prompt, subagent_type}``) becomes ``delegation.started`` when it
  appears, ``delegation.updated`` when its subagent first acts, and
  ``delegation.completed`` when the tool call ends (:class:`TaskToolTracker`).
* ``usage_update._meta["_claude/model"]`` → an ``info`` notice ``model_identity`` when
  the effective model changes; ``_meta["_claude/rateLimit"]`` → a ``rate_limit``
  notice when the window status changes (a warning unless plainly ``allowed``);
  ``_meta["_claude/origin"]`` stays raw (who started the turn is not canonical).
* ``_claude/sdkMessage`` notifications (raw SDK messages; only sent when a client
  opts in, which baton does not) → an ``info`` notice naming the message type.
  acp.md also names ``_claude/task|rateLimit|origin|model`` as extension methods:
  they are accepted in either form.

Mode values ``default|acceptEdits|plan|dontAsk|bypassPermissions`` and the
``mode``/``model``/``effort`` options go through
:func:`baton.providers.registry.select_config`, which never sends an id Claude did
not advertise (an unknown id kills the session: acp.md §1.9).
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from baton.events.bounds import clip_text
from baton.events.extension import MalformedPayload, TurnContext, VendorOutcome
from baton.events.model import (
    DelegationChild,
    DelegationCompleted,
    DelegationStarted,
    DelegationUpdated,
    Payload,
)
from baton.events.redaction import Redaction
from baton.jsontypes import JsonMapping
from baton.providers.inventory import CLAUDE_INVENTORY, CapabilityClaim, TableExtension, notice

MAX_TRACKED_TASKS = 256
TASK_TOOL_NAMES = frozenset({"Task", "Agent"})
_TERMINAL_TOOL = {"completed": "completed", "failed": "failed", "cancelled": "cancelled"}


@dataclass(slots=True)
class _TaskChild:
    tool_call_id: str
    role: str | None = None
    description: str | None = None
    status: str = "running"
    active: bool = False
    done: bool = False

    def canonical(self) -> DelegationChild:
        return DelegationChild(
            child_id=f"task:{self.tool_call_id}"[:160],
            role=self.role,
            description=self.description,
            status=self.status,
            parent_tool_call_id=self.tool_call_id,
        )


class TaskToolTracker:
    """Delegation events from a task-like tool call (Claude ``Task``, OpenCode ``task``).

    The tool call is the only handle these agents give on a subagent: it starts,
    its rawInput arrives (often later, in an update) with the role and task, and it
    ends. Role and description are kept across updates; at most
    :data:`MAX_TRACKED_TASKS` are remembered (oldest finished ones forgotten first).
    """

    def __init__(self, source: str, is_task: Callable[[JsonMapping], bool]) -> None:
        self.source = source
        self._is_task = is_task
        self._tasks: OrderedDict[str, _TaskChild] = OrderedDict()

    def tool_update(self, update: JsonMapping, redaction: Redaction) -> list[Payload]:
        tool_call_id = update.get("toolCallId")
        if not isinstance(tool_call_id, str) or not tool_call_id:
            return []
        task = self._tasks.get(tool_call_id)
        started = False
        if task is None:
            if not self._is_task(update):
                return []
            task = _TaskChild(tool_call_id=clip_text(tool_call_id, 150))
            self._remember(tool_call_id, task)
            started = True
        if task.done:
            return []
        changed = _learn(task, update.get("rawInput"), redaction)
        status = update.get("status")
        terminal = _TERMINAL_TOOL.get(status) if isinstance(status, str) else None
        if terminal is not None:
            task.status = terminal
            task.done = True
            out: list[Payload] = []
            if started:
                out.append(DelegationStarted(source=self.source, children=[task.canonical()]))
            out.append(DelegationCompleted(source=self.source, children=[task.canonical()]))
            return out
        if started:
            return [DelegationStarted(source=self.source, children=[task.canonical()])]
        if changed:
            return [DelegationUpdated(source=self.source, children=[task.canonical()])]
        return []

    def child_activity(self, parent_tool_call_id: str) -> list[Payload]:
        """First sign of life of a subagent (a tool call it made): one ``updated``."""
        task = self._tasks.get(parent_tool_call_id)
        if task is None or task.active or task.done:
            return []
        task.active = True
        return [DelegationUpdated(source=self.source, children=[task.canonical()])]

    def _remember(self, key: str, task: _TaskChild) -> None:
        self._tasks[key] = task
        while len(self._tasks) > MAX_TRACKED_TASKS:
            oldest = next((k for k, t in self._tasks.items() if t.done), None)
            self._tasks.pop(oldest if oldest is not None else next(iter(self._tasks)))


def _learn(task: _TaskChild, raw_input: Any, redaction: Redaction) -> bool:
    if not isinstance(raw_input, Mapping):
        return False
    changed = False
    role = raw_input.get("subagent_type")
    if isinstance(role, str) and role and task.role is None:
        task.role = clip_text(role, 200)
        changed = True
    description = raw_input.get("description")
    if isinstance(description, str) and description and task.description is None:
        task.description = clip_text(redaction.text(description))
        changed = True
    return changed


def claude_code_meta(update: JsonMapping) -> JsonMapping:
    meta = update.get("_meta")
    claude = meta.get("claudeCode") if isinstance(meta, Mapping) else None
    return claude if isinstance(claude, Mapping) else {}


def names_subagent(update: JsonMapping) -> bool:
    """A tool call whose rawInput names a subagent type (the ``task`` tool of Claude and
    OpenCode)."""
    raw_input = update.get("rawInput")
    return isinstance(raw_input, Mapping) and isinstance(raw_input.get("subagent_type"), str)


def is_claude_task(update: JsonMapping) -> bool:
    tool_name = claude_code_meta(update).get("toolName")
    if isinstance(tool_name, str):
        return tool_name in TASK_TOOL_NAMES
    return names_subagent(update)


class ClaudeExtension(TableExtension):
    """Claude's native detail → canonical payloads (see the module docstring)."""

    usage_unavailable_reason = "Claude reported no usage for this turn"

    def __init__(self) -> None:
        super().__init__(CLAUDE_INVENTORY)
        self.tasks = TaskToolTracker("claude.task", is_claude_task)
        self._model: str | None = None
        self._rate: tuple[Any, ...] | None = None
        self.observe("tool_call", self._tool)
        self.observe("tool_call_update", self._tool)
        self.on_meta("claudeCode", self._meta_claude_code)
        self.on_meta("_claude/model", self._meta_model)
        self.on_meta("_claude/rateLimit", self._meta_rate_limit)
        self.on_method("_claude/sdkMessage", self._sdk_message, fallback={})
        self.on_method("_claude/task", self._task, fallback={})
        self.on_method("_claude/model", self._model_method, fallback={})
        self.on_method("_claude/rateLimit", self._rate_limit_method, fallback={})

    def parent_tool_call_id(self, update: JsonMapping) -> str | None:
        parent = claude_code_meta(update).get("parentToolUseId")
        return clip_text(parent, 160) if isinstance(parent, str) and parent else None

    # ------------------------------------------------------------------ updates

    def _tool(self, update: JsonMapping, ctx: TurnContext) -> list[Payload]:
        out = self.tasks.tool_update(update, ctx.redaction)
        parent = self.parent_tool_call_id(update)
        if parent is not None:
            out.extend(self.tasks.child_activity(parent))
        return out

    def _meta_claude_code(
        self, key: str, value: Any, update: JsonMapping, ctx: TurnContext
    ) -> list[Payload]:
        """Consumed by :meth:`parent_tool_call_id` and the task tracker; the rest stays raw."""
        return []

    def _meta_model(
        self, key: str, value: Any, update: JsonMapping, ctx: TurnContext
    ) -> list[Payload]:
        if not isinstance(value, str) or not value or value == self._model:
            return []
        self._model = value
        return [
            notice(
                "model_identity",
                f"Claude reports the effective model {clip_text(value, 200)!r}",
                ctx=ctx,
                severity="info",
            )
        ]

    def _meta_rate_limit(
        self, key: str, value: Any, update: JsonMapping, ctx: TurnContext
    ) -> list[Payload]:
        if not isinstance(value, Mapping):
            raise MalformedPayload("_claude/rateLimit is not an object")
        status = value.get("status")
        fingerprint = (status, value.get("rateLimitType"), value.get("resetsAt"))
        if fingerprint == self._rate:
            return []
        self._rate = fingerprint
        parts = [f"status {status!r}"]
        for field in ("rateLimitType", "utilization", "resetsAt"):
            if value.get(field) is not None:
                parts.append(f"{field} {value[field]!r}")
        return [
            notice(
                "rate_limit",
                "Claude rate limit: " + ", ".join(parts),
                ctx=ctx,
                severity="info" if status == "allowed" else "warning",
            )
        ]

    # ------------------------------------------------------------------ methods

    def _sdk_message(self, params: JsonMapping, has_id: bool, ctx: TurnContext) -> VendorOutcome:
        message = params.get("message")
        kind = subtype = None
        if isinstance(message, Mapping):
            kind, subtype = message.get("type"), message.get("subtype")
        label = "/".join(str(p) for p in (kind, subtype) if p is not None) or "unknown"
        text = f"Claude SDK message {clip_text(label, 120)} (raw passthrough; kept raw)"
        return _ack(has_id, _kept_raw("sdk_message", text, "_claude/sdkMessage", ctx))

    def _task(self, params: JsonMapping, has_id: bool, ctx: TurnContext) -> VendorOutcome:
        keys = ", ".join(sorted(str(k) for k in params)[:12])
        text = f"Claude task notification with fields {keys or 'none'} (kept raw)"
        return _ack(has_id, _kept_raw("sdk_task", text, "_claude/task", ctx))

    def _model_method(self, params: JsonMapping, has_id: bool, ctx: TurnContext) -> VendorOutcome:
        value = params.get("model", params.get("modelId"))
        return _ack(has_id, self._meta_model("_claude/model", value, params, ctx))

    def _rate_limit_method(
        self, params: JsonMapping, has_id: bool, ctx: TurnContext
    ) -> VendorOutcome:
        value = params.get("rateLimit", params)
        return _ack(has_id, self._meta_rate_limit("_claude/rateLimit", value, params, ctx))


def _ack(has_id: bool, payloads: list[Payload]) -> VendorOutcome:
    """The method handled: an empty result when it was a request, nothing for a notification."""
    return VendorOutcome(payloads=payloads, result={} if has_id else None)


def _kept_raw(category: str, text: str, method: str, ctx: TurnContext) -> list[Payload]:
    """An ``info`` notice for a method whose message the normalizer keeps raw."""
    return [notice(category, text, ctx=ctx, severity="info", method=method)]


_ACP = "acp.md"
DECLARATIONS: Mapping[str, CapabilityClaim] = {
    "questions": CapabilityClaim(
        "partial",
        "AskUserQuestion arrives as elicitation/create (form) when the client advertises "
        "elicitation; documents and answers are baton.requests'; not yet qualified live",
    ),
    "plans": CapabilityClaim(
        "partial",
        "ExitPlanMode arrives as a session/request_permission (switch_mode) with the plan in "
        "rawInput: approvable, but not a dedicated revision-bound plan document",
    ),
    "child_activity": CapabilityClaim(
        "partial",
        "_meta.claudeCode.parentToolUseId → parent_tool_call_id on the subagent's tool calls, "
        "and one delegation.updated on its first activity; subagent text is not separated",
    ),
    "subagent_tasks": CapabilityClaim(
        "partial",
        "Task/Agent tool calls → delegation.started/completed with role (subagent_type) and "
        "description; no model or duration is reported",
    ),
    "images": CapabilityClaim("unsupported", "Claude has no image-generation event over ACP"),
    "files_diffs": CapabilityClaim(
        "partial",
        "diff content normalized by the generic tool layer; the structured patch in "
        "_meta.claudeCode.toolResponse is kept raw only",
    ),
    "steering": CapabilityClaim(
        "unverified",
        f"claude-agent-acp advertises _session/steering ({_ACP} §1.11); baton does not send it",
    ),
    "queueing": CapabilityClaim(
        "unverified",
        f"initialize may advertise _meta.claudeCode.promptQueueing ({_ACP} §1.3); baton does not "
        "queue through the agent",
    ),
    "cancellation": CapabilityClaim(
        "partial", "session/cancel through the runner; not qualified live"
    ),
    "settlement": CapabilityClaim(
        "partial",
        "the prompt result (with usage) ends the turn; late updates are tolerated by the runner",
    ),
    "session_continuity": CapabilityClaim(
        "partial", f"session/load and session/resume per the advertised capabilities ({_ACP} §1.5)"
    ),
    "discovery": CapabilityClaim(
        "partial", f"session/list when advertised ({_ACP} §1.5); no browsing UI"
    ),
    "fork_resume": CapabilityClaim(
        "unverified", "resume/fork depend on the claude-agent-acp version; check a probe"
    ),
    "modes": CapabilityClaim(
        "implemented",
        "mode config option (default|acceptEdits|plan|dontAsk|bypassPermissions) via "
        "select_config; current_mode_update → mode.changed",
    ),
    "model_selection": CapabilityClaim(
        "implemented",
        "model config option via select_config: exact value or refusal; only advertised ids are "
        f"sent (unknown ids kill Claude sessions, {_ACP} §1.9); _claude/model changes noticed",
    ),
    "prompt_media": CapabilityClaim(
        "unverified", "promptCapabilities as advertised; not probed here"
    ),
    "mcp": CapabilityClaim(
        "partial", "session mcpServers; ambient project config refused by admission"
    ),
    "hooks_memory": CapabilityClaim(
        "unsupported",
        "hooks and memory are not surfaced over ACP; _claude/sdkMessage could carry them "
        "but baton does not opt in",
    ),
    "subagent_questions": CapabilityClaim(
        "unverified", "whether a subagent's AskUserQuestion reaches the client is not known"
    ),
    "goals_lineage": CapabilityClaim(
        "unverified",
        "newer claude-agent-acp ships a goal extension (third-party source listing); not mapped",
    ),
}

__all__ = [
    "DECLARATIONS",
    "TASK_TOOL_NAMES",
    "ClaudeExtension",
    "TaskToolTracker",
    "claude_code_meta",
    "is_claude_task",
    "names_subagent",
]
