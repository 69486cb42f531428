"""One sample native payload per non-generic inventory entry, for the table-driven tests.

Keyed by ``(family, kind, native)``. A test fails when an inventory entry has no
sample here, so adding a native event to an inventory means showing what it looks
like. ``meta`` samples are the value of that ``_meta`` key and the stable variant it
rides on.
"""

from __future__ import annotations

from typing import Any

SPAWN = {
    "subagentSessionId": "sub-1",
    "name": "explore",
    "task": "Map the parser",
    "capabilities": {},
    "_meta": {"cursor": {"toolCallId": "tc-1", "agentId": "agent-1", "model": "m"}},
}

SAMPLES: dict[tuple[str, str, str], Any] = {
    # cursor --------------------------------------------------------------
    ("cursor", "update", "subagent_spawned"): SPAWN,
    ("cursor", "update", "subagent_state_update"): {
        "subagentSessionId": "sub-1",
        "state": "completed",
    },
    ("cursor", "method", "cursor/ask_question"): {
        "toolCallId": "tc-q",
        "questions": [{"id": "q", "prompt": "Go?", "options": [{"id": "y", "label": "Yes"}]}],
    },
    ("cursor", "method", "cursor/create_plan"): {
        "toolCallId": "tc-p",
        "plan": "# Plan\n",
        "todos": [{"id": "1", "content": "Do", "status": "pending"}],
    },
    ("cursor", "method", "cursor/update_todos"): {
        "toolCallId": "tc-t",
        "todos": [{"id": "1", "content": "Do", "status": "pending"}],
        "merge": False,
    },
    ("cursor", "method", "cursor/task"): {
        "toolCallId": "tc-k",
        "description": "Explore",
        "prompt": "Explore it",
        "subagentType": "explore",
        "agentId": "agent-9",
        "durationMs": 10,
    },
    ("cursor", "method", "cursor/generate_image"): {
        "toolCallId": "tc-i",
        "description": "A picture",
        "filePath": "img.png",
    },
    ("cursor", "meta", "cursor"): ("tool_call", {"toolCallId": "tc-1"}),
    # claude --------------------------------------------------------------
    ("claude", "method", "_claude/sdkMessage"): {
        "sessionId": "s",
        "message": {"type": "system", "subtype": "init"},
    },
    ("claude", "method", "_claude/task"): {"sessionId": "s", "taskId": "t1"},
    ("claude", "method", "_claude/rateLimit"): {"status": "allowed_warning", "utilization": 0.9},
    ("claude", "method", "_claude/model"): {"model": "claude-sonnet-4-6"},
    ("claude", "method", "_claude/origin"): {"kind": "human"},
    ("claude", "meta", "claudeCode"): ("tool_call", {"toolName": "Task"}),
    ("qwen", "meta", "usage"): ("agent_message_chunk", {"inputTokens": 10, "outputTokens": 5}),
    ("qwen", "meta", "durationMs"): ("agent_message_chunk", 6870),
    ("qwen", "meta", "toolName"): ("tool_call", "write_file"),
    ("qwen", "meta", "provenance"): ("tool_call", "builtin"),
    ("qwen", "meta", "phase"): ("tool_call", "preparing"),
    ("qwen", "meta", "availableSkills"): ("available_commands_update", []),
    ("qwen", "meta", "availableSkillDetails"): ("available_commands_update", []),
    ("claude", "meta", "_claude/model"): ("usage_update", "claude-sonnet-4-6"),
    ("claude", "meta", "_claude/rateLimit"): ("usage_update", {"status": "allowed"}),
    ("claude", "meta", "_claude/origin"): ("usage_update", {"kind": "human"}),
    # codex ---------------------------------------------------------------
    ("codex", "method", "_account/rate_limits_update"): {
        "rateLimits": {"limitId": "codex", "primary": {"usedPercent": 40}}
    },
    ("codex", "meta", "codex"): ("agent_message_chunk", {"clientUserMessageId": "m1"}),
    # cursor-sdk ----------------------------------------------------------
    ("cursor-sdk", "update", "cursor_sdk_subagent"): {
        "toolCallId": "call-1",
        "status": "completed",
        "args": {"description": "Map the parser", "subagentType": {"kind": "explore"}},
    },
    ("cursor-sdk", "update", "cursor_sdk_thinking_completed"): {
        "message": {"type": "thinking", "text": "", "thinking_duration_ms": 12}
    },
    ("cursor-sdk", "update", "cursor_sdk_system"): {
        "message": {"type": "system", "model": {"id": "composer-2"}, "tools": ["read"]}
    },
    ("cursor-sdk", "update", "cursor_sdk_summary"): {
        "message": {"type": "task", "text": "Did it."}
    },
    ("cursor-sdk", "update", "cursor_sdk_request"): {
        "message": {"type": "request", "request_id": "req-1"}
    },
    ("cursor-sdk", "update", "cursor_sdk_block"): {"block": {"type": "tool_use", "id": "t"}},
    ("cursor-sdk", "meta", "cursor-sdk/tool"): ("tool_call", "shell"),
    ("cursor-sdk", "meta", "cursor-sdk/truncated"): ("tool_call", {"result": True}),
}

SETUP: dict[tuple[str, str, str], list[tuple[str, Any]]] = {
    ("cursor", "update", "subagent_state_update"): [("subagent_spawned", SPAWN)],
}
"""Updates fed first (``(variant, update)``), for natives that need earlier state."""
