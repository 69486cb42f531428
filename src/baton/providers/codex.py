"""Codex (``codex-acp``): approval/sandbox presets as modes, and account rate limits.

Codex's ACP modes are not conversation styles but *approval and sandbox presets*:
switching to ``agent-full-access`` lets the agent run anything without asking.
The generic layer reports the switch as ``mode.changed``; this extension adds an
``approval_preset`` notice saying what the preset means (a warning for full
access), from :data:`MODE_PRESETS` or, when the option carries it, the preset's
``_meta.kind``. ``usage_update`` is standard (generic layer). The interim
``_account/rate_limits_update`` notification becomes a ``rate_limit`` notice.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from baton.events.bounds import clip_text
from baton.events.extension import MalformedPayload, TurnContext, VendorOutcome
from baton.events.model import Payload
from baton.jsontypes import JsonMapping
from baton.providers.inventory import CODEX_INVENTORY, CapabilityClaim, TableExtension, notice


@dataclass(frozen=True, slots=True)
class ModePreset:
    """What a Codex mode means for approvals and the sandbox."""

    title: str
    sandbox: str
    approvals: str
    kind: str
    """codex-acp's ``_meta.kind``: ``plan``, ``standard``, ``auto_review``, ``full_access``."""


MODE_PRESETS: Mapping[str, ModePreset] = {
    "read-only": ModePreset("Read only", "read-only", "on-request", "standard"),
    "workspace-write": ModePreset("Ask for approval", "workspace-write", "on-request", "standard"),
    "edit-internal": ModePreset("Ask for approval", "workspace-write", "on-request", "standard"),
    "agent": ModePreset("Approve for me", "workspace-write", "auto-review", "auto_review"),
    "agent-full-access": ModePreset("Full access", "danger-full-access", "never", "full_access"),
}
"""acp.md §1.9 (``read-only``, ``workspace-write``, ``agent``, ``agent-full-access``) and
codex-acp's ``AgentMode`` (``edit-internal``)."""

_KIND_TEXT: Mapping[str, str] = {
    "plan": "planning only",
    "standard": "asks before acting outside its sandbox",
    "auto_review": "asks only for actions its reviewer flags as unsafe",
    "full_access": "no sandbox and no approvals: it can change anything on this machine",
}


def describe_mode(mode_id: str, kind: str | None = None) -> tuple[str, bool]:
    """A one-line meaning of a Codex mode, and whether it grants full access."""
    preset = MODE_PRESETS.get(mode_id)
    kind = kind or (preset.kind if preset else None)
    if preset is not None:
        text = (
            f"Codex mode {mode_id!r} ({preset.title}): sandbox {preset.sandbox}, approvals "
            f"{preset.approvals}"
        )
    else:
        text = f"Codex mode {clip_text(mode_id, 80)!r} is not a known preset"
    if kind is not None and kind in _KIND_TEXT:
        text += f"; {_KIND_TEXT[kind]}"
    return text, kind == "full_access"


class CodexExtension(TableExtension):
    """Codex's native detail → canonical payloads (see the module docstring)."""

    usage_unavailable_reason = "Codex reported no usage for this turn"

    def __init__(self) -> None:
        super().__init__(CODEX_INVENTORY)
        self._mode: str | None = None
        self.observe("current_mode_update", self._mode_update)
        self.observe("config_option_update", self._config_update)
        self.on_method("_account/rate_limits_update", self._rate_limits, fallback={})

    def _mode_update(self, update: JsonMapping, ctx: TurnContext) -> list[Payload]:
        mode = update.get("currentModeId")
        return self._preset(mode, None, ctx) if isinstance(mode, str) else []

    def _config_update(self, update: JsonMapping, ctx: TurnContext) -> list[Payload]:
        options = update.get("configOptions")
        if not isinstance(options, Sequence):
            return []
        for option in options:
            if not isinstance(option, Mapping):
                continue
            if option.get("id") != "mode" and option.get("category") != "mode":
                continue
            value = option.get("currentValue")
            if not isinstance(value, str):
                return []
            return self._preset(value, _value_kind(option, value), ctx)
        return []

    def _preset(self, mode: str, kind: str | None, ctx: TurnContext) -> list[Payload]:
        if mode == self._mode:
            return []
        self._mode = mode
        text, full_access = describe_mode(mode, kind)
        return [
            notice(
                "approval_preset",
                text,
                ctx=ctx,
                severity="warning" if full_access else "info",
            )
        ]

    def _rate_limits(self, params: JsonMapping, has_id: bool, ctx: TurnContext) -> VendorOutcome:
        limits = params.get("rateLimits")
        if not isinstance(limits, Mapping):
            raise MalformedPayload("rateLimits is not an object")
        parts = [f"limit {limits.get('limitId')!r}"]
        for window in ("primary", "secondary"):
            spec = limits.get(window)
            if isinstance(spec, Mapping) and spec.get("usedPercent") is not None:
                parts.append(f"{window} {spec['usedPercent']}% used")
        reached = limits.get("rateLimitReachedType")
        if reached is not None:
            parts.append(f"reached {reached!r}")
        return VendorOutcome(
            payloads=[
                notice(
                    "rate_limit",
                    "Codex account rate limits: " + ", ".join(parts),
                    ctx=ctx,
                    severity="warning" if reached is not None else "info",
                    method="_account/rate_limits_update",
                )
            ],
            result={} if has_id else None,
        )


def _value_kind(option: Mapping[str, Any], value: str) -> str | None:
    for choice in option.get("options") or ():
        if isinstance(choice, Mapping) and choice.get("value") == value:
            meta = choice.get("_meta")
            kind = meta.get("kind") if isinstance(meta, Mapping) else None
            return kind if isinstance(kind, str) else None
    return None


DECLARATIONS: Mapping[str, CapabilityClaim] = {
    "questions": CapabilityClaim(
        "unverified",
        "codex-acp forwards MCP elicitations as elicitation/create (source reading); the plan-mode "
        "user-input request has no ACP counterpart here",
    ),
    "plans": CapabilityClaim(
        "unsupported", "no plan-approval request over ACP; plans arrive as checklists"
    ),
    "child_activity": CapabilityClaim(
        "unverified",
        "newer codex-acp documents subagent_spawned/subagent_state_update child sessions "
        "(third-party reading); not in the pinned 2.6 inventory",
    ),
    "subagent_tasks": CapabilityClaim(
        "unverified", "collabAgentToolCall arrives as an ordinary tool call; no delegation mapping"
    ),
    "images": CapabilityClaim(
        "unverified", "imageView/imageGeneration items have no known ACP mapping in codex-acp"
    ),
    "files_diffs": CapabilityClaim(
        "partial", "fileChange → tool_call kind edit with diff content (acp.md §6), generic layer"
    ),
    "steering": CapabilityClaim(
        "unverified",
        "codex-acp implements _session/steering (acp.md §1.11); baton does not send it",
    ),
    "queueing": CapabilityClaim("unsupported", "no queue method over ACP"),
    "cancellation": CapabilityClaim(
        "partial", "session/cancel → turn/interrupt (acp.md §6), via the runner"
    ),
    "settlement": CapabilityClaim("partial", "the prompt result ends the turn; not qualified live"),
    "session_continuity": CapabilityClaim(
        "partial", "session/load/resume → thread/resume (acp.md §6)"
    ),
    "discovery": CapabilityClaim("partial", "session/list → thread/list (acp.md §6)"),
    "fork_resume": CapabilityClaim(
        "partial", "session/fork and session/resume map to thread fork/resume (acp.md §6)"
    ),
    "modes": CapabilityClaim(
        "implemented",
        "approval/sandbox presets via select_config; mode.changed plus an approval_preset notice "
        "(a warning for full access)",
    ),
    "model_selection": CapabilityClaim(
        "implemented", "model config option via select_config: exact value or refusal"
    ),
    "prompt_media": CapabilityClaim(
        "unverified", "promptCapabilities as advertised; not probed here"
    ),
    "mcp": CapabilityClaim(
        "partial", "session mcpServers; ambient Codex config is the private CODEX_HOME"
    ),
    "hooks_memory": CapabilityClaim(
        "unsupported", "hookPrompt and contextCompaction items are not forwarded over ACP"
    ),
    "subagent_questions": CapabilityClaim(
        "unverified", "child sessions are not in the pinned inventory"
    ),
    "goals_lineage": CapabilityClaim(
        "unverified",
        "newer codex-acp ships a goal-control extension and fork origins (third-party source "
        "listing); not mapped",
    ),
}

__all__ = ["DECLARATIONS", "MODE_PRESETS", "CodexExtension", "ModePreset", "describe_mode"]
