"""Claude, Codex and OpenCode native detail."""

from __future__ import annotations

from typing import Any

from baton.events.extension import TurnContext
from baton.events.model import (
    DelegationCompleted,
    DelegationStarted,
    DelegationUpdated,
    ProviderNotice,
    UsageReported,
)
from baton.providers.claude import ClaudeExtension
from baton.providers.codex import CodexExtension, describe_mode
from baton.providers.opencode import OpenCodeExtension
from baton.providers.registry import extension_for


def ctx() -> TurnContext:
    return TurnContext(session_id="s", turn_id="t", workspace="/w")


def cats(payloads: Any) -> list[str]:
    return [p.category for p in payloads if isinstance(p, ProviderNotice)]


def task_call(status: str = "pending", **extra: Any) -> dict[str, Any]:
    return {
        "sessionUpdate": "tool_call",
        "toolCallId": "toolu_1",
        "title": "Task",
        "status": status,
        "_meta": {"claudeCode": {"toolName": "Task"}},
        **extra,
    }


def test_claude_parent_tool_use_id_is_delegation_lineage() -> None:
    ext = ClaudeExtension()
    update = {"toolCallId": "c", "_meta": {"claudeCode": {"parentToolUseId": "toolu_1"}}}
    assert ext.parent_tool_call_id(update) == "toolu_1"
    assert ext.parent_tool_call_id({"toolCallId": "c"}) is None


def test_claude_task_tool_is_a_delegation_with_role_kept_across_updates() -> None:
    ext = ClaudeExtension()
    c = ctx()
    (started,) = ext.observe_update("tool_call", task_call(), c)
    assert isinstance(started, DelegationStarted)
    (updated,) = ext.observe_update(
        "tool_call_update",
        {
            "sessionUpdate": "tool_call_update",
            "toolCallId": "toolu_1",
            "rawInput": {"subagent_type": "Explore", "description": "Map it", "prompt": "p"},
        },
        c,
    )
    assert isinstance(updated, DelegationUpdated) and updated.children[0].role == "Explore"
    child_tool = {
        "sessionUpdate": "tool_call",
        "toolCallId": "toolu_9",
        "_meta": {"claudeCode": {"parentToolUseId": "toolu_1", "toolName": "Read"}},
    }
    (active,) = ext.observe_update("tool_call", child_tool, c)
    assert isinstance(active, DelegationUpdated)
    assert ext.observe_update("tool_call", {**child_tool, "toolCallId": "toolu_10"}, c) == []
    (done,) = ext.observe_update(
        "tool_call_update",
        {"sessionUpdate": "tool_call_update", "toolCallId": "toolu_1", "status": "completed"},
        c,
    )
    assert isinstance(done, DelegationCompleted)
    child = done.children[0]
    assert (child.role, child.description, child.status, child.parent_tool_call_id) == (
        "Explore",
        "Map it",
        "completed",
        "toolu_1",
    )


def test_claude_model_and_rate_limit_meta_are_noticed_on_change_only() -> None:
    ext = ClaudeExtension()
    c = ctx()
    usage = {
        "sessionUpdate": "usage_update",
        "used": 1,
        "size": 2,
        "_meta": {"_claude/model": "sonnet", "_claude/origin": {"kind": "human"}},
    }
    assert cats(ext.observe_update("usage_update", usage, c)) == ["model_identity"]
    assert ext.observe_update("usage_update", usage, c) == []
    limit = {
        **usage,
        "_meta": {"_claude/rateLimit": {"status": "allowed_warning", "utilization": 0.9}},
    }
    (notice,) = ext.observe_update("usage_update", limit, c)
    assert (
        isinstance(notice, ProviderNotice)
        and notice.severity == "warning"
        and "0.9" in notice.summary
    )
    assert ext.observe_update("usage_update", limit, c) == []


def test_claude_extension_methods_are_acknowledged() -> None:
    ext = ClaudeExtension()
    out = ext.vendor_method(
        "_claude/sdkMessage",
        {"sessionId": "s", "message": {"type": "system", "subtype": "compact_boundary"}},
        has_id=False,
        ctx=ctx(),
    )
    assert out is not None and out.result is None and cats(out.payloads) == ["sdk_message"]
    out = ext.vendor_method("_claude/origin", {"kind": "human"}, has_id=True, ctx=ctx())
    assert out is not None and cats(out.payloads) == ["unsupported"]
    out = ext.vendor_method("_claude/rateLimit", {"status": 3}, has_id=True, ctx=ctx())
    assert out is not None and out.result == {}


def test_codex_modes_are_approval_presets_and_full_access_warns() -> None:
    ext = CodexExtension()
    c = ctx()
    (notice,) = ext.observe_update(
        "current_mode_update",
        {"sessionUpdate": "current_mode_update", "currentModeId": "agent-full-access"},
        c,
    )
    assert (
        isinstance(notice, ProviderNotice)
        and notice.category == "approval_preset"
        and notice.severity == "warning"
    )
    assert (
        ext.observe_update(
            "current_mode_update",
            {"sessionUpdate": "current_mode_update", "currentModeId": "agent-full-access"},
            c,
        )
        == []
    )
    config = {
        "sessionUpdate": "config_option_update",
        "configOptions": [
            {
                "id": "mode",
                "currentValue": "custom-x",
                "options": [{"value": "custom-x", "_meta": {"kind": "plan"}}],
            }
        ],
    }
    (notice,) = ext.observe_update("config_option_update", config, c)
    assert (
        isinstance(notice, ProviderNotice)
        and "planning only" in notice.summary
        and notice.severity == "info"
    )
    assert describe_mode("read-only")[1] is False


def test_codex_rate_limits_notification() -> None:
    out = CodexExtension().vendor_method(
        "_account/rate_limits_update",
        {
            "rateLimits": {
                "limitId": "codex",
                "primary": {"usedPercent": 100},
                "rateLimitReachedType": "primary",
            }
        },
        has_id=False,
        ctx=ctx(),
    )
    assert out is not None and cats(out.payloads) == ["rate_limit"]
    (notice,) = out.payloads
    assert isinstance(notice, ProviderNotice) and notice.severity == "warning"


def test_opencode_task_tool_is_a_delegation() -> None:
    ext = OpenCodeExtension()
    c = ctx()
    pending = {
        "sessionUpdate": "tool_call",
        "toolCallId": "t1",
        "status": "pending",
        "rawInput": {},
    }
    assert ext.observe_update("tool_call", pending, c) == []
    running = {
        "sessionUpdate": "tool_call_update",
        "toolCallId": "t1",
        "status": "in_progress",
        "rawInput": {"description": "d", "prompt": "p", "subagent_type": "general"},
    }
    (started,) = ext.observe_update("tool_call_update", running, c)
    assert isinstance(started, DelegationStarted) and started.children[0].role == "general"
    (done,) = ext.observe_update("tool_call_update", {**running, "status": "failed"}, c)
    assert isinstance(done, DelegationCompleted) and done.children[0].status == "failed"


def test_every_provider_reports_usage_unavailable_when_nothing_was_reported() -> None:
    for family in ("builtin", "cursor", "claude", "codex", "gemini", "opencode", "qwen"):
        ext = extension_for(family)
        c = ctx()
        (usage,) = [p for p in ext.end_turn(c) if isinstance(p, UsageReported)]
        assert not usage.available and usage.reason
        c.usage_reported = True
        assert not any(isinstance(p, UsageReported) for p in ext.end_turn(c))
