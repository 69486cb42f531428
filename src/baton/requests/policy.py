"""Who decides a request: the policy, the headless fallback, or a human.

A :class:`Policy` maps ACP tool kinds to one of three actions: ``allow``
(answer the agent at once), ``deny`` (refuse at once) or ``escalate`` (a human
decides, through the ledger). Defaults follow the read/write split: ``read``,
``search`` and ``think`` are auto-allowed; ``execute``, ``edit``, ``delete``,
``move``, ``fetch``, ``other`` and ``switch_mode`` escalate; unknown kinds count
as ``other``. Policies layer: the built-in default, then a profile's
``[policy]``, then a role's, each replacing only the kinds it names; a CLI
``--approve`` preset replaces them all.

Three rules sit above the table, because baton promises never to decide
silently for the human:

- **outside-workspace**: a tool call whose locations, diff paths or path-like
  raw input fall outside the workspace (after resolving symlinks) is never
  auto-allowed, whatever the table or preset says; it escalates, or is denied
  when no human can be asked.
- **no human surface**: ``escalate`` with nobody to ask becomes a ``headless``
  decision: deny for permissions, ``skipped`` for questions, decline for forms,
  the configured choice for plans (reject unless configured otherwise).
- **the firewall** (:mod:`baton.requests.firewall`): a permission request that is not
  a real tool call (a mode change, leaving plan mode, a form or a question sent as a
  permission) is never decided by the table or a preset; a human decides (or the
  headless rule denies it).

baton never answers the agent's ``allow_always``: a lasting approval is a human's scoped
grant (:mod:`baton.requests.grants`), which the broker consults for requests this policy
escalates.

A policy also says what the permission-integrity audit (:mod:`baton.requests.audit`) does
with a mutation no decision allowed: ``audit = "record"`` (the default) records a
``security.unapproved_mutation`` and lets the turn go on; ``"strict"`` also cancels the turn.

Every decision carries the ``rule`` that made it (e.g. ``default:allow:read``,
``preset-none:deny:*``, ``profile-cursor:outside-workspace``); the runner puts it
in the ``request.answered`` event with ``decided_by``.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from types import MappingProxyType
from typing import Literal

from pydantic import BaseModel, ConfigDict

from baton.events.tools import ACP_TOOL_KINDS
from baton.request_model.documents import (
    Answer,
    DecidedBy,
    PermissionRequest,
    PlanRequest,
    RequestDocument,
)
from baton.requests.firewall import RequestClass, classify, grantable
from baton.requests.kinds import rules_for
from baton.requests.kinds.permission import tool_call_paths

__all__ = [
    "ACP_TOOL_KINDS",
    "DEFAULT_AUTO_ALLOW",
    "DEFAULT_ESCALATE",
    "PRESETS",
    "Action",
    "AuditMode",
    "Decision",
    "Policy",
    "PolicyConfig",
    "tool_call_paths",
]

Action = Literal["allow", "deny", "escalate"]
AuditMode = Literal["record", "strict"]

DEFAULT_AUTO_ALLOW: tuple[str, ...] = ("read", "search", "think")
DEFAULT_ESCALATE: tuple[str, ...] = (
    "execute",
    "edit",
    "delete",
    "move",
    "fetch",
    "other",
    "switch_mode",
)
PRESETS: tuple[str, ...] = ("reads", "all", "none")
"""CLI ``--approve`` values: see :meth:`Policy.preset`."""


class PolicyConfig(BaseModel):
    """A ``[policy]`` table in ``baton.toml`` (global, per profile or per role).

    Each list names tool kinds; a kind listed in a layer overrides lower layers.
    """

    model_config = ConfigDict(frozen=True, extra="forbid")

    auto_allow: tuple[str, ...] = ()
    escalate: tuple[str, ...] = ()
    deny: tuple[str, ...] = ()
    default: Action | None = None
    """Action for kinds no layer names (built-in: escalate)."""
    headless_plan: Literal["accept", "reject"] | None = None
    """What a plan approval gets when no human can be asked (built-in: reject)."""
    audit: AuditMode | None = None
    """What an unapproved mutation does (built-in: record)."""


@dataclass(frozen=True, slots=True)
class Decision:
    """The outcome of :meth:`Policy.decision_for`, with the rule that made it."""

    outcome: Action
    rule: str
    reason: str
    decided_by: DecidedBy = "policy"
    plan_choice: Literal["accept", "reject"] = "reject"
    request_class: RequestClass = "tool_call"
    """What the firewall found the request to be."""
    grant: str | None = None
    """The grant that answers it (``rule`` is then ``grant:<id>``)."""

    @property
    def needs_human(self) -> bool:
        return self.outcome == "escalate"

    def answer(self, document: RequestDocument) -> Answer:
        """The automatic answer for an ``allow``/``deny`` decision (not for ``escalate``)."""
        if self.outcome == "escalate":
            raise ValueError(f"decision {self.rule!r} escalates: a human answers it")
        automatic = rules_for(document).automatic_answer
        if automatic is None:
            raise ValueError(f"a {document.kind} request is never decided automatically")
        answer: Answer = automatic(document, self)
        return answer


def _inside(path: str, roots: Sequence[str], resolve: Callable[[str], str]) -> bool:
    base = roots[0]
    full = resolve(path if os.path.isabs(path) else os.path.join(base, path))
    for root in roots:
        try:
            if os.path.commonpath([root, full]) == root:
                return True
        except ValueError:
            continue
    return False


@dataclass(frozen=True, slots=True)
class Policy:
    """A decision table by tool kind, plus the rules above it (see module doc)."""

    name: str = "default"
    actions: Mapping[str, Action] = field(
        default_factory=lambda: MappingProxyType(
            {
                **dict.fromkeys(DEFAULT_AUTO_ALLOW, "allow"),
                **dict.fromkeys(DEFAULT_ESCALATE, "escalate"),
            }
        )
    )
    default: Action = "escalate"
    headless_plan: Literal["accept", "reject"] = "reject"
    audit: AuditMode = "record"

    @classmethod
    def preset(cls, name: str) -> Policy:
        """The ``--approve`` presets, precisely.

        - ``reads``: allow ``read``/``search``/``think``; escalate everything else
          (denied when no human surface exists). Same table as the default.
        - ``all``: allow every tool kind once; never ``allow_always``; plans are
          accepted when no human can be asked.
        - ``none``: deny every tool kind, reads included.

        The outside-workspace rule still applies to ``all``.
        """
        if name == "reads":
            return cls(name="preset-reads")
        if name == "all":
            return cls(
                name="preset-all",
                actions=MappingProxyType(dict.fromkeys(ACP_TOOL_KINDS, "allow")),
                default="allow",
                headless_plan="accept",
            )
        if name == "none":
            return cls(
                name="preset-none",
                actions=MappingProxyType(dict.fromkeys(ACP_TOOL_KINDS, "deny")),
                default="deny",
            )
        raise ValueError(f"unknown approval preset {name!r}; use one of {', '.join(PRESETS)}")

    def layered(self, config: PolicyConfig, name: str) -> Policy:
        """This policy with a config layer applied (kinds it names replace ours)."""
        actions: dict[str, Action] = dict(self.actions)
        for kinds, action in (
            (config.auto_allow, "allow"),
            (config.escalate, "escalate"),
            (config.deny, "deny"),
        ):
            for kind in kinds:
                actions[kind] = action  # type: ignore[assignment]
        return Policy(
            name=name,
            actions=MappingProxyType(actions),
            default=config.default or self.default,
            headless_plan=config.headless_plan or self.headless_plan,
            audit=config.audit or self.audit,
        )

    @classmethod
    def from_layers(cls, layers: Iterable[tuple[str, PolicyConfig]]) -> Policy:
        """Default policy, then each ``(name, config)`` layer in order; the last names it."""
        policy = cls()
        for name, config in layers:
            policy = policy.layered(config, name)
        return policy

    def _kind_rule(self, kind: str) -> tuple[Action, str]:
        if kind in self.actions:
            return self.actions[kind], f"{self.name}:{self.actions[kind]}:{kind}"
        fallback = (
            self.actions.get("other", self.default) if kind not in ACP_TOOL_KINDS else self.default
        )
        return fallback, f"{self.name}:{fallback}:{kind}(as other)"

    def decision_for(
        self,
        document: RequestDocument,
        *,
        workspace: str | os.PathLike[str],
        human_available: bool,
        additional_roots: Sequence[str | os.PathLike[str]] = (),
        resolve: Callable[[str], str] = os.path.realpath,
        family: str | None = None,
    ) -> Decision:
        """Decide ``document``; ``human_available`` says whether escalation can reach anyone.

        A human surface exists when baton runs with a TTY, or when the runner is
        allowed to wait in the ledger (``--wait-timeout``) for an answer from
        another process (``baton answer``, the dashboard). ``family`` is the agent
        family's name, for the firewall's knowledge of its habits.
        """
        if isinstance(document, PermissionRequest):
            request_class = classify(document, family)
            if not grantable(request_class):
                return self._not_a_tool_call(document, request_class, human_available)
            return self._permission(document, workspace, human_available, additional_roots, resolve)
        if human_available or document.kind == "review":
            return Decision("escalate", f"{self.name}:escalate:{document.kind}", "a human decides")
        if isinstance(document, PlanRequest):
            return Decision(
                "allow" if self.headless_plan == "accept" else "deny",
                f"{self.name}:headless:plan-{self.headless_plan}",
                "no human surface to approve the plan",
                decided_by="headless",
                plan_choice=self.headless_plan,
            )
        return Decision(
            "deny",
            f"{self.name}:headless:{document.kind}",
            f"no human surface to answer the {document.kind}",
            decided_by="headless",
        )

    def _not_a_tool_call(
        self, document: PermissionRequest, request_class: RequestClass, human_available: bool
    ) -> Decision:
        """The firewall: no table, preset or grant answers what is not a tool call."""
        rule = f"{self.name}:firewall:{request_class}"
        if not human_available:
            return Decision(
                "deny",
                f"{rule}:no-human",
                f"a {request_class.replace('_', ' ')} is decided by a human; nobody can be "
                "asked, so denied",
                decided_by="headless",
                request_class=request_class,
            )
        return Decision(
            "escalate",
            rule,
            f"a {request_class.replace('_', ' ')} is decided by a human, never by policy",
            request_class=request_class,
        )

    def _permission(
        self,
        document: PermissionRequest,
        workspace: str | os.PathLike[str],
        human_available: bool,
        additional_roots: Sequence[str | os.PathLike[str]],
        resolve: Callable[[str], str],
    ) -> Decision:
        kind = document.tool_call.kind or "other"
        action, rule = self._kind_rule(kind)
        reason = f"tool kind {kind!r} is set to {action}"
        outside: list[str] = []
        if action == "allow":
            roots = [resolve(os.fspath(Path(r))) for r in (workspace, *additional_roots)]
            outside = [p for p in tool_call_paths(document) if not _inside(p, roots, resolve)]
            if outside:
                action = "escalate"
                rule = f"{self.name}:outside-workspace"
                reason = f"touches paths outside the workspace: {', '.join(outside[:3])}"
        if action == "escalate" and not human_available:
            return Decision(
                "deny",
                f"{rule}:no-human",
                f"{reason}; no human surface to ask, so denied",
                decided_by="headless",
            )
        return Decision(action, rule, reason)
