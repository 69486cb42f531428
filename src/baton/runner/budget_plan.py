"""What sessions are metered against: a project's budgets, prices and notices, and whose
quota a session spends (its credential's fingerprint, the key of a window budget)."""

from __future__ import annotations

import hashlib
import time
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from baton.agent_profile import AgentProfile
from baton.budgets.limits import BudgetConfig, Limits
from baton.budgets.pricing import PriceTable, PricingConfig
from baton.budgets.rules import Breach, notice
from baton.events.model import Payload
from baton.requests.notify import Notice, NotifyConfig, send
from baton.security.launch_env import plan_launch

__all__ = ["BudgetPlan", "Notify", "credential_for", "credential_key", "project_plan"]

Notify = Callable[[Breach, str], Awaitable[Sequence[Payload]]]
"""Tell the human about a threshold or a limit reached (``[notify]``), with what baton did;
returns what to record about it (a failing channel's ``harness.diagnostic``)."""


def credential_key(profile: str, secret_values: Sequence[str]) -> str:
    """Whose quota a session spends: a fingerprint of its bound credentials (never the
    secret; the same key on any host gives the same fingerprint), or the profile for an
    agent with none (its own login: a subscription)."""
    if not secret_values:
        return f"profile:{profile}"
    digest = hashlib.sha256("\0".join(sorted(secret_values)).encode()).hexdigest()
    return f"key:{digest[:16]}"


def credential_for(
    profile: AgentProfile, environ: Mapping[str, str], secrets_file: Path | None
) -> str:
    """:func:`credential_key` of what a launch of ``profile`` would be bound (the team's
    facts name a role's window before any of its sessions started)."""
    plan = plan_launch(
        profile, root=Path("/nonexistent"), environ=environ, secrets_file=secrets_file
    )
    return credential_key(profile.name, plan.secret_values)


@dataclass(frozen=True, slots=True)
class BudgetPlan:
    """What sessions are metered against (the composition root builds it)."""

    config: BudgetConfig = field(default_factory=BudgetConfig)
    prices: PriceTable = field(default_factory=PriceTable)
    notify: Notify | None = None
    clock: Callable[[], float] = time.time
    """Wall-clock seconds: ledger rows are compared across processes and hosts."""


def project_plan(
    budget: BudgetConfig,
    pricing: PricingConfig | PriceTable,
    notify: NotifyConfig,
    *,
    project: str = "",
    run: Limits | None = None,
) -> BudgetPlan:
    """A project's plan: ``[budget]`` (``run``: ``--budget`` over ``per_run``), its prices,
    and ``[notify]`` told of each threshold and limit reached (once each)."""
    prices = pricing if isinstance(pricing, PriceTable) else PriceTable(pricing)

    async def tell(breach: Breach, what: str) -> Sequence[Payload]:
        if not notify.enabled:
            return ()
        ident, kind, title, data = notice(breach, what)
        told = Notice(
            id=ident,
            kind=kind,
            title=title,
            project=project,
            answer_with=str(data.get("answer_with", "")),
            request=data,
        )
        return await send(told, notify)

    return BudgetPlan(config=budget.with_run(run) if run else budget, prices=prices, notify=tell)
