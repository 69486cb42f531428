"""``cursor/task`` → ``delegation.completed``: a subagent task that finished.

Params (acp.md §2): ``{toolCallId, description, prompt, subagentType, model?,
agentId?, durationMs?}``, sent when the parent's ``Task`` tool call completes (with
a JSON-RPC id, though documented as a notification). ``subagentType`` is one of
``unspecified|computer_use|explore|video_review|browser_use|shell|vm_setup_helper``
or ``{"custom": name}``; it becomes the child's ``role`` (``custom:<name>`` for
custom agents) so surfaces can tell an explorer from a shell helper.

The task is reported once, complete, so it is a single :class:`DelegationCompleted`
(no synthetic ``started``). When the same agent was announced by
``subagent_spawned`` (see :mod:`.children`), the task reuses that child's id so a
surface sees one child, and a conflicting origin (a different spawning tool call)
is a ``child_identity`` notice. The prompt is not copied into the event (it can be
long and is in the raw payload); ``durationMs`` goes to ``duration_ms``.

Reply: ``{"outcome": {"outcome": "completed", "agentId"?, "durationMs"?}}``.
"""

from __future__ import annotations

from collections.abc import Mapping
from functools import partial

from baton.events.bounds import clip_text, measured
from baton.events.model import DelegationChild, DelegationCompleted, Payload
from baton.events.redaction import NoRedaction, Redaction
from baton.jsontypes import JsonMapping, JsonObject, JsonValue
from baton.providers.cursor._common import native_id, opt_str, outcome, safe_id
from baton.providers.cursor.children import ChildNormalizer
from baton.providers.inventory import notice

__all__ = [
    "METHOD",
    "SOURCE",
    "SUBAGENT_TYPES",
    "role_of",
    "task_completed",
]

METHOD = "cursor/task"
_notice = partial(notice, method=METHOD)
"""A notice of this method (bounded; ``severity=`` for another than a warning)."""
SOURCE = "cursor.task"
SUBAGENT_TYPES = frozenset(
    {
        "unspecified",
        "computer_use",
        "explore",
        "video_review",
        "browser_use",
        "shell",
        "vm_setup_helper",
    }
)


def role_of(subagent_type: JsonValue) -> str | None:
    """The canonical role for Cursor's ``subagentType`` (``None`` when absent or odd)."""
    if isinstance(subagent_type, str) and subagent_type:
        return clip_text(subagent_type, 200)
    if isinstance(subagent_type, Mapping):
        custom = subagent_type.get("custom")
        if isinstance(custom, str) and custom:
            return clip_text(f"custom:{custom}", 200)
    return None


def task_completed(
    params: JsonMapping,
    *,
    children: ChildNormalizer | None = None,
    redaction: Redaction | None = None,
) -> tuple[list[Payload], JsonObject]:
    """Payloads and the reply for one ``cursor/task``."""
    redaction = redaction or NoRedaction()
    tool_call_id = opt_str(native_id(params.get("toolCallId")), 160)
    agent_id = opt_str(native_id(params.get("agentId")), 160)
    duration = params.get("durationMs")
    ms = measured(duration)
    duration_ms = int(ms) if ms is not None else None
    description = params.get("description")
    payloads: list[Payload] = []
    role = role_of(params.get("subagentType"))
    if params.get("subagentType") is not None and role is None:
        payloads.append(_notice("malformed", "subagentType is neither a name nor {custom}"))
    elif role is not None and ":" not in role and role not in SUBAGENT_TYPES:
        payloads.append(
            _notice("unclassified", f"unknown subagentType {role!r} kept as role", severity="info")
        )

    spawned = children.by_agent_id(agent_id) if children is not None and agent_id else None
    model_fallback: str | None = None
    if spawned is not None:
        child_id = spawned.child_id
        if tool_call_id and spawned.tool_call_id and tool_call_id != spawned.tool_call_id:
            payloads.append(
                _notice(
                    "child_identity",
                    f"cursor/task for agent {agent_id!r} names tool call {tool_call_id!r}, but "
                    f"the agent was spawned by {spawned.tool_call_id!r}; kept the spawn's origin",
                )
            )
            tool_call_id = spawned.tool_call_id
        role = role or spawned.role
        model_fallback = spawned.model
    elif agent_id:
        child_id = safe_id(agent_id, "agent")
    elif tool_call_id:
        child_id = safe_id(f"task:{tool_call_id}", "task")
    else:
        child_id = "task-unidentified"
        payloads.append(_notice("malformed", "cursor/task without agentId or toolCallId"))

    model = params.get("model")
    child = DelegationChild(
        child_id=child_id,
        role=role,
        description=clip_text(redaction.text(description))
        if isinstance(description, str)
        else None,
        model=clip_text(model, 200) if isinstance(model, str) else model_fallback,
        agent_id=agent_id,
        status="completed",
        duration_ms=duration_ms,
        parent_tool_call_id=tool_call_id,
    )
    payloads.append(DelegationCompleted(source=SOURCE, children=[child]))
    return payloads, outcome("completed", agentId=agent_id, durationMs=duration_ms)
