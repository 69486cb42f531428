"""What the team loop needs from a role session (the runner provides it; tests fake it)."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Literal, Protocol, runtime_checkable

from baton.role_tools.binding import Binding
from baton.team_config import RoleSpec

__all__ = [
    "AdoptingSession",
    "BudgetedSession",
    "RoleSession",
    "RoleSessionFactory",
    "ScopedSession",
    "TurnResult",
    "Usage",
]


@dataclass(frozen=True, slots=True)
class Usage:
    """What the agent reported for one turn (None fields: not reported)."""

    input_tokens: int | None = None
    output_tokens: int | None = None
    thinking_tokens: int | None = None
    cost_usd: float | None = None


@dataclass(frozen=True, slots=True)
class TurnResult:
    """The one terminal outcome of ``session/prompt``, as the loop needs it."""

    status: Literal["completed", "failed", "cancelled"]
    stop_reason: str | None = None
    tool_calls: int = 0
    """Tool calls the agent made during the turn (all kinds, not only baton's MCP)."""
    usage: Usage | None = None
    """None when the agent reported no usage (recorded as ``unavailable``, never zero)."""
    files_changed: tuple[str, ...] = ()
    error: str | None = None
    unapproved_mutations: int = 0
    """Mutations no recorded decision allowed (``security.unapproved_mutation``)."""
    approval: str | None = None
    """Who approves in the session's effective mode (``asks``, ``self_approves`` …)."""
    refusals: tuple[str, ...] = ()
    """Requests of the turn nobody answered by their deadline, refused (why, each)."""


class RoleSession(Protocol):
    """One long-lived agent session working for one role slot."""

    @property
    def session_id(self) -> str | None:
        """The agent's own session id (``baton sessions`` shows it)."""
        ...

    @property
    def process_group(self) -> int | None:
        """The agent's process group, for the death watch (None: no process)."""
        ...

    async def prompt(self, text: str) -> TurnResult:
        """Run one turn; return its outcome (raise only for a dead session)."""
        ...

    async def cancel(self, reason: str) -> None:
        """Ask the agent to stop the running turn; its ``prompt()`` returns as it ends."""
        ...

    async def close(self) -> None: ...


RoleSessionFactory = Callable[[RoleSpec, Binding, Path | None], Awaitable[RoleSession]]
"""Create (or resume) the session for a role slot whose MCP server serves ``Binding``,
working in the given folder (a task tree's worktree; None: the project itself)."""


@runtime_checkable
class ScopedSession(Protocol):
    """A role session whose requests can be scoped to the task tree a turn works on
    (a human's grant "for this task tree")."""

    def working_on(self, task: str | None) -> None: ...


@runtime_checkable
class AdoptingSession(Protocol):
    """A role session that can outlive its team loop (cluster mode: a role holder).

    After a restart the loop asks it for the result of the turn whose prompt had
    ``prompt_sha256`` instead of running that turn again; ``None``: it has no such turn.
    """

    async def adopt(self, prompt_sha256: str) -> TurnResult | None: ...


@runtime_checkable
class BudgetedSession(Protocol):
    """A role session whose usage is metered per TASK: told before each turn which TASK
    and task tree it is charged to (``baton.budgets``: per_task limits, ``task show``)."""

    def charge_to(self, task_id: str, tree: str | None) -> None: ...
