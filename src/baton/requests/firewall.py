"""The permission firewall: what a request really is, before anything may answer it.

Agents send more than tool calls through ``session/request_permission``: Claude asks
to leave plan mode there (a ``switch_mode`` "tool call" whose options are modes),
others ask to switch modes or put a question or a form in the same channel. An
automatic "allow" of those fakes the human's consent to a plan or an answer. So every
request is classified from its own fields and the agent family's known habits:

=================  ==========================================================
``tool_call``      a command, an edit, a fetch, a read…: grants and presets may answer
``mode_change``    the agent asks to switch modes: a human decides
``plan_exit``      the agent asks to leave plan mode (approve its plan): a human decides
``elicitation``    a form (ACP ``elicitation/create``, or a form in a permission)
``question``       questions for the human (``cursor/ask_question``, AskUserQuestion)
``plan``           a plan to approve (``cursor/create_plan``)
``review``         a team review (FCoP)
=================  ==========================================================

Only ``tool_call`` may be answered by a grant or a preset (``--approve all``, a role's
``permissions = "all"``); the rest always go to a human, or, when nobody can be asked,
to the documented headless rule (deny, skip, decline, the configured plan choice).

:data:`AGENT_FACTS` also says, per agent family, what its own "always" means, which
kinds of request it sends and how it reports usage: ``docs/agents.md`` publishes the
table :func:`agents_table` generates from it and the built-in profiles (a test keeps
them equal). Pure code.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from types import MappingProxyType
from typing import Any, Final, Literal

from baton.agent_profile import AgentProfile
from baton.request_model.documents import PermissionRequest, RequestDocument

__all__ = [
    "AGENT_FACTS",
    "AgentFacts",
    "RequestClass",
    "agents_table",
    "classify",
    "grantable",
]

RequestClass = Literal[
    "tool_call", "mode_change", "plan_exit", "elicitation", "question", "plan", "review"
]

_PLAN_EXIT_TITLES: Final = ("exitplanmode", "exit_plan_mode", "exit plan mode", "ready to code")
_QUESTION_TITLES: Final = ("askuserquestion", "ask_user_question", "askuser")
_MODE_OPTION_IDS: Final = frozenset(
    {"default", "acceptedits", "plan", "bypasspermissions", "auto", "dontask", "yolo"}
)


@dataclass(frozen=True, slots=True)
class AgentFacts:
    """What one agent family does with approvals, as pinned and observed."""

    always_means: str
    """What its ``allow_always`` option does (baton never chooses it)."""
    sends: tuple[RequestClass, ...]
    """The kinds of request it sends baton."""
    usage: str
    """How it reports token usage: per turn, cumulative, or not at all."""
    plan_exit_titles: tuple[str, ...] = ()
    """Tool-call titles (lower case) that mean "leave plan mode" for this family."""


AGENT_FACTS: Final[Mapping[str, AgentFacts]] = MappingProxyType(
    {
        "claude": AgentFacts(
            always_means="writes a rule into the project's `.claude/settings.local.json`; "
            "the agent stops asking for that tool",
            sends=("tool_call", "mode_change", "plan_exit"),
            usage="per turn (`PromptResponse.usage`) plus `usage_update` with the cumulative cost",
            plan_exit_titles=("exitplanmode", "ready to code"),
        ),
        "codex": AgentFacts(
            always_means="`acceptForSession`: this session, plus an execpolicy prefix rule "
            "for commands",
            sends=("tool_call", "elicitation"),
            usage="cumulative (`thread/tokenUsage/updated` → `usage_update`)",
        ),
        "cursor": AgentFacts(
            always_means="Cursor offers no `allow_always` over ACP",
            sends=("tool_call", "question", "plan"),
            usage="none (every turn is recorded as usage unavailable)",
        ),
        "gemini": AgentFacts(
            always_means="saved to `auto-saved.toml` (`commandPrefix`/`argsPattern`) for "
            "later sessions",
            sends=("tool_call", "mode_change"),
            usage="none seen in the inspected sources (unverified)",
        ),
        "opencode": AgentFacts(
            always_means="appended to the session's ordered `permission` rules",
            sends=("tool_call",),
            usage="per model call (`usage_update`: context used/size and cost)",
        ),
        "qwen": AgentFacts(
            always_means="saved like Gemini's (a fork): later calls of that tool stop asking",
            sends=("tool_call", "mode_change"),
            usage="per model call in `_meta.usage`, summed per turn",
        ),
        "cursor-sdk": AgentFacts(
            always_means="no approvals of its own: baton's custom tools ask through baton "
            "(allow once or reject only)",
            sends=("tool_call",),
            usage="per run (SDK usage messages summed into the prompt response)",
        ),
        "builtin": AgentFacts(
            always_means="the runbook agent offers no `allow_always`",
            sends=("tool_call",),
            usage="none (no model)",
        ),
    }
)


def _lower(value: Any) -> str:
    return value.strip().lower() if isinstance(value, str) else ""


def _permission_class(document: PermissionRequest, family: str | None) -> RequestClass:
    call = document.tool_call
    title = _lower(call.title)
    raw = call.raw_input if isinstance(call.raw_input, Mapping) else {}
    facts = AGENT_FACTS.get(family or "")
    exit_titles = (*_PLAN_EXIT_TITLES, *(facts.plan_exit_titles if facts else ()))
    if any(t in title for t in exit_titles) or (call.kind == "switch_mode" and "plan" in raw):
        return "plan_exit"
    if any(t in title for t in _QUESTION_TITLES) or isinstance(raw.get("questions"), list):
        return "question"
    if isinstance(raw.get("requestedSchema"), Mapping) or isinstance(raw.get("schema"), Mapping):
        return "elicitation"
    option_ids = {o.option_id.lower() for o in document.options}
    if call.kind == "switch_mode" or (option_ids and option_ids <= _MODE_OPTION_IDS):
        return "mode_change"
    return "tool_call"


def classify(document: RequestDocument, family: str | None = None) -> RequestClass:
    """What ``document`` really is, from its own fields and the agent family's habits."""
    if isinstance(document, PermissionRequest):
        return _permission_class(document, family)
    kind = document.kind
    if kind == "question":
        return "question"
    if kind == "plan":
        return "plan"
    if kind == "elicitation":
        return "elicitation"
    return "review"


def grantable(request_class: RequestClass) -> bool:
    """Only a real tool call may be answered by a grant or a preset."""
    return request_class == "tool_call"


_CLASS_LABEL: Final[Mapping[RequestClass, str]] = {
    "tool_call": "tool calls",
    "mode_change": "mode changes",
    "plan_exit": "leaving plan mode",
    "elicitation": "forms",
    "question": "questions",
    "plan": "plans",
    "review": "reviews",
}


def agents_table(profiles: Iterable[AgentProfile]) -> str:
    """The Markdown table of ``docs/agents.md``: one row per built-in profile."""
    rows = [
        '| agent | pinned version | its own "always" (baton never uses it) | sends | usage |',
        "|---|---|---|---|---|",
    ]
    for profile in sorted(profiles, key=lambda p: p.name):
        facts = AGENT_FACTS.get(profile.family)
        if facts is None:
            continue
        version = (
            f"`{profile.package}@{profile.version}`"
            if profile.package and profile.version
            else "ships with baton"
            if profile.family == "builtin"
            else "not pinned"
        )
        sends = ", ".join(_CLASS_LABEL[c] for c in facts.sends)
        rows.append(
            f"| {profile.name} | {version} | {facts.always_means} | {sends} | {facts.usage} |"
        )
    return "\n".join(rows) + "\n"
