"""An in-memory RoleSession factory whose agents act through the real role tools.

Each fake session gets the same :class:`RoleTools` the stdio MCP server would
serve for its binding (same code path, minus the transport), and a *script*
decides what the agent does with a prompt. :func:`runbook_agent` mimics the
built-in runbook agent: ``- [ ] @ROLE text`` lines in the task body become
``create_task`` calls, and every turn ends with an automatic ``write_report``
(errors, such as the leader's refused early report, are tolerated).
"""

from __future__ import annotations

import asyncio
import re
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from baton.role_tools.binding import Binding, SlotAccess
from baton.role_tools.server import RoleTools, ToolRefused
from baton.store.store import Store
from baton.team.contract import TurnResult, Usage
from baton.team_config import RoleSpec

_DELEGATION = re.compile(r"^[ \t]*[-*] \[ \] @(?P<role>[A-Z0-9_]+)[ \t]+(?P<text>\S.*)$")


@dataclass
class Call:
    name: str
    args: dict[str, Any]
    result: dict[str, Any] | None
    error: str | None


@dataclass
class Agent:
    """What a script sees: the role, its tools, and a log of its calls."""

    spec: RoleSpec
    binding: Binding
    tools: RoleTools
    calls: list[Call] = field(default_factory=list)
    cancelled: asyncio.Event = field(default_factory=asyncio.Event)
    """Set when baton cancels the running turn (an async script may wait for it)."""
    cwd: Path | None = None
    """Where the session works (a tree's worktree; None: the project)."""

    def call(self, name: str, **args: Any) -> dict[str, Any] | None:
        try:
            result = self.tools.call(name, args)
        except ToolRefused as exc:
            self.calls.append(Call(name, args, None, f"{exc.code}: {exc}"))
            return None
        self.calls.append(Call(name, args, result, None))
        return result


Script = Callable[[Agent, str], Awaitable[TurnResult | None] | TurnResult | None]


def task_body(prompt: str) -> str:
    if "--- task body ---" not in prompt:
        return ""
    return prompt.split("--- task body ---\n", 1)[1].split("\n--- end of task body ---", 1)[0]


def runbook_agent(agent: Agent, prompt: str) -> None:
    """Delegate ``- [ ] @ROLE`` lines (when create_task exists), then auto-report."""
    if "create_task" in agent.tools.allowed:
        for line in task_body(prompt).splitlines():
            match = _DELEGATION.match(line)
            if match:
                agent.call(
                    "create_task",
                    recipient=match["role"],
                    subject=match["text"].strip(),
                    body=match["text"].strip(),
                )
    summary = "consolidated" if "consolidate" in prompt else "ran the runbook"
    agent.call("write_report", result="done", body=f"{agent.spec.name}: {summary}")


class FakeSession:
    def __init__(self, factory: FakeFactory, spec: RoleSpec, binding: Binding) -> None:
        self.factory = factory
        assert factory.store is not None, "FakeFactory(store=...) serves the slot's tools"
        self.agent = Agent(
            spec, binding, RoleTools(SlotAccess(factory.store, binding.session_name))
        )
        self._session_id = f"fake-{binding.session_name}-{len(factory.sessions)}"
        self.prompts: list[str] = []
        self.cancels: list[str] = []
        self.closed = False
        self.cwd: Path | None = None
        """Where the session's agent works (None: the project; else a tree's worktree)."""

    @property
    def session_id(self) -> str:
        return self._session_id

    @property
    def process_group(self) -> int | None:
        return None

    async def prompt(self, text: str) -> TurnResult:
        self.agent.cancelled.clear()
        self.prompts.append(text)
        self.factory.log.append((self.agent.binding.session_name, text))
        before = len(self.agent.calls)
        script = self.factory.scripts.get(self.agent.spec.name, self.factory.default)
        outcome = await asyncio.to_thread(lambda: script(self.agent, text))
        if asyncio.iscoroutine(outcome):
            outcome = await outcome
        if isinstance(outcome, TurnResult):
            return outcome
        return TurnResult(
            "completed",
            stop_reason="end_turn",
            tool_calls=len(self.agent.calls) - before,
            usage=self.factory.usage,
            files_changed=self.factory.files_changed,
        )

    async def cancel(self, reason: str) -> None:
        self.cancels.append(reason)
        self.agent.cancelled.set()

    async def close(self) -> None:
        self.closed = True


class FakeFactory:
    """``RoleSessionFactory``: one FakeSession per slot, scripted per role."""

    def __init__(
        self,
        scripts: dict[str, Script] | None = None,
        default: Script = runbook_agent,
        *,
        store: Store | None = None,
    ):
        self.store = store
        self.scripts = dict(scripts or {})
        self.default = default
        self.sessions: dict[str, FakeSession] = {}
        self.log: list[tuple[str, str]] = []
        self.usage: Usage | None = None
        self.files_changed: tuple[str, ...] = ()
        self.cwds: list[tuple[str, Path | None]] = []
        """(slot, working folder) of every session opened, in order."""

    async def __call__(
        self, spec: RoleSpec, binding: Binding, cwd: Path | None = None
    ) -> FakeSession:
        session = FakeSession(self, spec, binding)
        session.cwd = session.agent.cwd = cwd
        self.sessions[binding.session_name] = session
        self.cwds.append((binding.session_name, cwd))
        return session

    def prompts_for(self, session_name: str) -> list[str]:
        return [text for name, text in self.log if name == session_name]
