"""Who answers an agent's permission request, and how the answer maps to ACP.

An :class:`Approver` turns a :class:`PermissionAsk` into a :class:`Decision`
(allow, deny, or cancelled). The ACP reply always uses the agent's *own* option id,
chosen by option kind; ``allow_always`` is only ever chosen when the decision
explicitly grants that scope.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal, Protocol

READ_KINDS = frozenset({"read", "search", "think"})


@dataclass(frozen=True, slots=True)
class PermissionAsk:
    """A ``session/request_permission`` as the approver sees it (redacted)."""

    request_id: str
    session_id: str
    turn_id: str | None
    tool_call_id: str
    title: str
    kind: str
    raw_input: Any
    options: Sequence[Mapping[str, Any]]
    paths: Sequence[str] = ()
    """Paths the tool call touches (from locations/diffs), as the agent sent them."""
    outside_workspace: bool = False


@dataclass(frozen=True, slots=True)
class Decision:
    verdict: Literal["allow", "deny", "cancelled"]
    decided_by: Literal["human", "policy", "headless"]
    rule: str | None = None
    always: bool = False
    """Grant ``allow_always`` (only when a policy explicitly has that scope)."""
    reason: str | None = None
    extra: Mapping[str, Any] = field(default_factory=dict)


class Approver(Protocol):
    async def decide(self, ask: PermissionAsk) -> Decision: ...


def choose_option(options: Sequence[Mapping[str, Any]], decision: Decision) -> str | None:
    """The agent's option id for a decision, or ``None`` to answer ``cancelled``."""
    if decision.verdict == "cancelled":
        return None
    by_kind: dict[str, str] = {}
    for option in options:
        kind, option_id = option.get("kind"), option.get("optionId")
        if isinstance(kind, str) and isinstance(option_id, str):
            by_kind.setdefault(kind, option_id)
    if decision.verdict == "allow":
        wanted = ("allow_always", "allow_once") if decision.always else ("allow_once",)
    else:
        wanted = ("reject_once", "reject_always")
    for kind in wanted:
        if kind in by_kind:
            return by_kind[kind]
    return None


def permission_outcome(option_id: str | None) -> dict[str, Any]:
    if option_id is None:
        return {"outcome": {"outcome": "cancelled"}}
    return {"outcome": {"outcome": "selected", "optionId": option_id}}


class PresetApprover:
    """``--approve reads|all|none`` without a human: every decision names its rule."""

    def __init__(self, preset: Literal["reads", "all", "none"]) -> None:
        self.preset = preset

    async def decide(self, ask: PermissionAsk) -> Decision:
        if ask.outside_workspace:
            return Decision(
                "deny", "policy", rule="outside-workspace: never auto-approve paths outside"
            )
        if self.preset == "all":
            return Decision("allow", "policy", rule="--approve all: allow once")
        if self.preset == "reads" and ask.kind in READ_KINDS:
            return Decision("allow", "policy", rule=f"--approve reads: {ask.kind} is read-only")
        if self.preset == "none":
            return Decision("deny", "policy", rule="--approve none: deny all")
        return Decision(
            "deny",
            "headless",
            rule=f"--approve reads: {ask.kind} needs a human and none is attached",
        )
