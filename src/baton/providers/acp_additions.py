"""ACP beyond the Python SDK baton could pin, and what baton does with each part of it.

The Python SDK on the registry, ``agent-client-protocol`` 0.12.1, is generated from ACP
``schema-v1.19.0``; the schema the tests validate the wire against is newer:
``@agentclientprotocol/sdk`` 2.4.0's ``schema/v1`` (ACP protocol version 1, the newest on npm
when pinned; ``tests/support/acp_schema.py``). baton speaks ACP with its own plumbing, so the
SDK's age limits nothing; this table says, feature by feature, whether the pinned schema has it
stable or unstable, whether the SDK models it, and whether baton handles it.
``tests/integration/test_acp_schema.py`` holds the "pinned" column to the pinned schema.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

__all__ = ["ADDITIONS", "PINNED_SCHEMA", "PYTHON_SDK", "AcpAddition", "render_markdown"]

PYTHON_SDK = "agent-client-protocol 0.12.1 (schema-v1.19.0)"
PINNED_SCHEMA = "@agentclientprotocol/sdk 2.4.0, schema/v1 (ACP protocol version 1)"

Handled = Literal["handled", "partial", "not handled"]


@dataclass(frozen=True, slots=True)
class AcpAddition:
    feature: str
    names: tuple[str, ...]
    """The methods (``a/b``), ``sessionUpdate`` variants or fields (``Type.field``) it is."""
    pinned: Literal["stable", "unstable"]
    in_sdk: bool
    """Whether the Python SDK 0.12.1 models it."""
    baton: Handled
    how: str


ADDITIONS: tuple[AcpAddition, ...] = (
    AcpAddition(
        "Session list",
        ("session/list",),
        "stable",
        True,
        "partial",
        "the built-in agent serves it; as a client baton does not list an agent's sessions "
        "(it reopens the session it recorded itself)",
    ),
    AcpAddition(
        "Session resume",
        ("session/resume",),
        "stable",
        True,
        "handled",
        "a recorded session is reopened with session/resume when advertised, then "
        "session/load, then a new session (baton.runner.handshake)",
    ),
    AcpAddition(
        "Session fork",
        ("session/fork",),
        "unstable",
        True,
        "not handled",
        "never sent; the built-in agent answers method-not-found",
    ),
    AcpAddition(
        "Session close and delete",
        ("session/close", "session/delete"),
        "stable",
        True,
        "not handled",
        "never sent: baton ends a session by stopping the agent's process group",
    ),
    AcpAddition(
        "Message ids",
        ("ContentChunk.messageId",),
        "stable",
        True,
        "handled",
        "chunks coalesce by id and a late chunk lands in its own turn "
        "(baton.events.acp_normalizer); the built-in agent sends them",
    ),
    AcpAddition(
        "Context usage",
        ("usage_update",),
        "stable",
        True,
        "handled",
        "usage.reported (scope context: used, size, cost)",
    ),
    AcpAddition(
        "Turn usage",
        ("PromptResponse.usage",),
        "unstable",
        True,
        "handled",
        "usage.reported (scope turn); _meta.usage too; never zero when absent, unavailable",
    ),
    AcpAddition(
        "Elicitation",
        ("elicitation/create", "elicitation/complete"),
        "stable",
        True,
        "partial",
        "form-mode elicitation/create becomes a durable question (url mode is declined); "
        "clientCapabilities.elicitation is not advertised, so agents that check it do not ask; "
        "elicitation/complete is kept as an unknown-method notice",
    ),
    AcpAddition(
        "Request cancellation",
        ("$/cancel_request",),
        "stable",
        False,
        "partial",
        "an agent's withdrawal is recorded (provider.notice); baton never sends one",
    ),
    AcpAddition(
        "Tool name",
        ("ToolCall.name",),
        "stable",
        False,
        "not handled",
        "kept in the raw update only; the canonical event has title and kind",
    ),
    AcpAddition(
        "Notices and compaction",
        ("notice", "compaction_update", "compaction_summary_chunk"),
        "stable",
        False,
        "partial",
        "baton does not advertise session.notices or session.compaction (their gate); "
        "if sent anyway they are recognised and kept as provider.notice",
    ),
    AcpAddition(
        "Additional directories",
        ("NewSessionRequest.additionalDirectories",),
        "stable",
        True,
        "not handled",
        "never sent: a session has one workspace",
    ),
    AcpAddition(
        "Logout",
        ("logout",),
        "stable",
        True,
        "not handled",
        "never sent; credentials live in the session's private root",
    ),
    AcpAddition(
        "Plan documents",
        ("plan_update", "plan_removed"),
        "unstable",
        True,
        "not handled",
        "recognised as unstable variants and kept as provider.notice (plan stays the checklist)",
    ),
    AcpAddition(
        "Subagents and session messages",
        ("subagent_update", "session_message", "session_message_chunk"),
        "unstable",
        False,
        "not handled",
        "recognised as unstable variants and kept as provider.notice",
    ),
)
"""The additions, in the order the doc shows them."""


def render_markdown() -> str:
    """The section of ``docs/capabilities.md``."""
    out = [
        "## ACP beyond the Python SDK",
        "",
        f"The Python SDK on the registry is {PYTHON_SDK}; the wire is validated against "
        f"{PINNED_SCHEMA}. baton speaks ACP with its own plumbing; what it does with what ACP "
        "has beyond that SDK, or made stable since:",
        "",
        "| Feature | Wire names | Pinned schema | In the Python SDK | baton | How |",
        "|---|---|---|---|---|---|",
    ]
    for row in ADDITIONS:
        names = ", ".join(f"`{n}`" for n in row.names)
        sdk = "yes" if row.in_sdk else "no"
        out.append(f"| {row.feature} | {names} | {row.pinned} | {sdk} | {row.baton} | {row.how} |")
    return "\n".join(out) + "\n"
