"""Role sessions for the team loop, on top of :class:`AgentSession`.

The loop (:mod:`baton.team.loop`) asks a factory for one long-lived session per
role slot. This module is that factory: it opens an ACP session with
the role's profile, injects the role-scoped MCP server for the slot's binding,
keeps the agent's private root across restarts (agents store their sessions under
HOME), and resumes the slot's previous session when its identity still matches.

A session in a task tree's own worktree is opened ``isolated``: the agent runs in its
family's edit-without-asking mode there (its edits are the tree's diff,
:mod:`baton.providers.worktree_modes`); a session in the project never is.

Identity fencing: the key is (profile, command, mode, model, workspace, slot), with the
mode the session runs in its place. A stored session whose key differs is not resumed;
a ``provider.notice`` says what changed.
"""

from __future__ import annotations

import hashlib
import json
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from types import MappingProxyType
from typing import Any

from baton.acp.messages import InitializeAnswer
from baton.agent_profile import AgentProfile
from baton.config import BatonConfig, agent_roots_dir
from baton.errors import BudgetRefused
from baton.events.model import ProviderNotice
from baton.events.sequencer import format_ts
from baton.providers.worktree_modes import in_worktree
from baton.requests.ledger import Ledger
from baton.requests.notify import Notifier
from baton.requests.policy import ACP_TOOL_KINDS, Policy
from baton.role_tools.binding import Binding
from baton.role_tools.credentials import SlotCredential
from baton.role_tools.hub import RoleHub
from baton.role_tools.server import fcop_mcp_config, mcp_config
from baton.runner.budget_plan import BudgetPlan
from baton.runner.emitter import EventEmitter
from baton.runner.requests_broker import HumanChannel, RequestBroker
from baton.runner.session import AgentSession
from baton.security.launch_env import remove_tree
from baton.security.paths import sanitize_id
from baton.store.records import SessionRecord
from baton.store.store import Store
from baton.team.contract import RoleSession, RoleSessionFactory, TurnResult, Usage
from baton.team_config import FcopMcpCompat, RoleSpec

__all__ = ["AcpRoleSession", "identity_key", "role_policy", "role_session_factory"]


def role_policy(permissions: str) -> Policy:
    """A role's ``permissions`` preset as a policy; ``ask`` sends everything to a human."""
    if permissions == "ask":
        return Policy(
            name="role-ask",
            actions=MappingProxyType(dict.fromkeys(ACP_TOOL_KINDS, "escalate")),
            default="escalate",
        )
    return Policy.preset(permissions)


def identity_key(profile: AgentProfile, workspace: Path, slot: str) -> str:
    fields = {
        "profile": profile.name,
        "command": list(profile.command),
        "mode": profile.mode,
        "model": profile.model,
        "config": dict(sorted(profile.config_options.items())),
        "cwd": str(workspace),
        "slot": slot,
    }
    return json.dumps(fields, sort_keys=True, separators=(",", ":"))


@dataclass
class AcpRoleSession:
    """:class:`RoleSession` over one :class:`AgentSession`."""

    session: AgentSession
    release: Callable[[], None] | None = None
    """Called once the session is closed (the hub retires the slot's credential)."""
    broker: RequestBroker | None = None
    """The session's requests: told which task tree each turn works on (grant scopes),
    and asked which requests were refused at their deadline."""

    def working_on(self, task: str | None) -> None:
        """The task tree the next turn works on (a grant for "this task tree")."""
        if self.broker is not None:
            self.broker.task = task

    role: str | None = None
    """The role it works for (its spend is charged to it)."""

    def charge_to(self, task_id: str, tree: str | None) -> None:
        """The TASK and task tree the next turn is charged to (``BudgetedSession``)."""
        if self.session.budget is not None:
            self.session.budget.charge_to(task_id=task_id, tree=tree, role=self.role)

    @property
    def session_id(self) -> str | None:
        return self.session.agent_session_id or None

    @property
    def process_group(self) -> int | None:
        process = self.session.process
        return process.pgid if process is not None else None

    async def prompt(self, text: str) -> TurnResult:
        try:
            outcome = await self.session.prompt(text)
        except BudgetRefused as exc:  # refused before it started: the session lives on
            return TurnResult(status="cancelled", error=str(exc))
        usage = None
        if outcome.usage is not None:
            u = outcome.usage
            usage = Usage(
                input_tokens=u.input_tokens,
                output_tokens=u.output_tokens,
                thinking_tokens=u.thought_tokens,
                cost_usd=u.cost_amount if u.cost_currency in (None, "USD") else None,
            )
        refusals = self.broker.refusals_of(outcome.turn_id) if self.broker is not None else []
        return TurnResult(
            status=outcome.status,
            stop_reason=outcome.stop_reason,
            tool_calls=outcome.tool_calls,
            usage=usage,
            files_changed=outcome.files_written,
            error=outcome.error or (f"budget: {outcome.budget}" if outcome.budget else None),
            unapproved_mutations=outcome.unapproved_mutations,
            approval=self.session.approval.klass if self.session.approval else None,
            refusals=tuple(refusals),
        )

    async def cancel(self, reason: str) -> None:
        await self.session.cancel(reason)

    async def close(self) -> None:
        try:
            await self.session.close("the team loop released the role session")
        finally:
            if self.release is not None:
                self.release()


def role_session_factory(
    config: BatonConfig,
    *,
    workspace: Path,
    store: Store,
    ledger: Ledger,
    emitter: EventEmitter,
    terminal: HumanChannel | None = None,
    wait_timeout: float | None = None,
    fcop_mcp: FcopMcpCompat | None = None,
    mcp_env: Mapping[str, str] | None = None,
    hub: RoleHub | None = None,
    notifier: Notifier | None = None,
    budget: BudgetPlan | None = None,
) -> RoleSessionFactory:
    """The real factory ``baton up`` hands to the team loop.

    Each session gets baton's role tools for its binding: with ``hub`` (the team loop's
    MCP endpoint), an ``http`` entry when the agent advertises HTTP MCP, else the stdio
    shim, each with a credential minted for this session (the slot's previous one stops
    working); without it, the per-slot role MCP server (``mcp_env`` in its environment).
    With the opt-in compatibility mode (``[team.fcop_mcp]``), the stock ``fcop-mcp``
    from its own venv, launched with ``--root`` (no allowlist, no approvals: baton
    still closes the loop).
    """

    async def role_tools(
        binding: Binding, http: bool
    ) -> tuple[dict[str, Any], SlotCredential | None]:
        """The ``mcpServers`` entry for one new session, and the credential it carries."""
        if fcop_mcp is not None and fcop_mcp.enabled:
            return fcop_mcp_config(fcop_mcp, binding.fcop_root), None
        if hub is None:
            return mcp_config(binding, env=mcp_env), None
        credential = hub.issue(binding.session_name)
        if http:
            await hub.start_http()
            return hub.http_entry(credential), credential
        return hub.stdio_entry(credential), credential

    async def open_session(
        profile: AgentProfile,
        spec: RoleSpec,
        binding: Binding,
        *,
        cwd: Path,
        resume: str | None,
        root: Path,
        isolated: bool,
    ) -> tuple[AgentSession, bool, SlotCredential | None, RequestBroker]:
        issued: list[SlotCredential] = []
        offered: list[bool] = []
        broker = RequestBroker(
            ledger,
            role_policy(spec.permissions),
            terminal=terminal,
            wait_timeout=wait_timeout,
            notifier=notifier,
            family=profile.family,
            role=spec.name,
            on_deadline="refuse",
        )

        async def servers(answer: InitializeAnswer) -> list[dict[str, Any]]:
            """Chosen from the agent's own initialize answer, before session/new."""
            http = hub is not None and not (fcop_mcp is not None and fcop_mcp.enabled)
            http = http and offer_http(answer)
            entry, credential = await role_tools(binding, http)
            offered.append(http)
            if credential is not None:
                issued.append(credential)
            return [entry]

        try:
            session = await AgentSession.open(
                profile,
                workspace=cwd,
                emitter=emitter,
                requests=broker,
                state_dir=config.state_dir,
                secrets_file=config.secrets_file,
                mcp_servers=servers,
                resume_session_id=resume,
                persistent_root=root,
                isolated=isolated,
                budget=budget,
            )
        except BaseException:
            if hub is not None:
                for unused in issued:  # never left valid for a session that did not open
                    hub.revoke(unused)
            raise
        credential = issued[-1] if issued else None
        if credential is not None:
            session.redactor.bind([credential.token])  # the agent's logs, should it echo it
        return session, bool(offered and offered[-1]), credential, broker

    async def factory(spec: RoleSpec, binding: Binding, cwd: Path | None) -> RoleSession:
        profile = config.profile(spec.agent)
        slot = binding.session_name
        where = cwd or workspace
        # A tree's worktree (cwd given) holds only that tree's diff: the agent edits unasked
        # there; the project (the user's own checkout) keeps the asking mode.
        isolated = cwd is not None
        key = identity_key(in_worktree(profile) if isolated else profile, where, slot)
        # One stored session per slot and place: back in a tree's worktree, the slot
        # resumes the session it had there (the agent keeps that tree's context).
        slot_id = f"role-{sanitize_id(slot)}" + (f"@{sanitize_id(where.name)}" if cwd else "")
        previous = store.get_session(slot_id)
        resume = None
        if previous is not None:
            if previous.identity_key == key:
                resume = previous.agent_session_id
            else:
                changed = _changed_fields(previous.identity_key, key)
                await emitter.emit(
                    ProviderNotice(
                        category="session_identity",
                        severity="info",
                        summary=f"{slot}: starting a fresh session because {changed} changed",
                    )
                )
        root = role_root(config.state_dir, workspace, slot_id, key)
        session, http, credential, broker = await open_session(
            profile, spec, binding, cwd=where, resume=resume, root=root, isolated=isolated
        )
        now = format_ts(time.time())
        store.upsert_session(
            SessionRecord(
                session_id=slot_id,
                agent=profile.name,
                agent_session_id=session.agent_session_id or "",
                cwd=str(where),
                identity_key=key,
                created_at=previous.created_at if previous else now,
                updated_at=now,
                role=spec.name,
                run_id=emitter.run_id,
                state={"how": session.how, "mcp_http": http},
            )
        )
        held = credential
        return AcpRoleSession(
            session,
            release=(lambda: hub.revoke(held)) if hub is not None and held else None,
            broker=broker,
            role=spec.name,
        )

    return factory


def role_root(state_dir: Path, workspace: Path, slot_id: str, identity: str) -> Path:
    """A role session's persistent private root: one per slot, place and identity."""
    return agent_roots_dir(state_dir, workspace) / "roles" / _digest(slot_id + identity)


def forget_tree_roots(store: Store, state_dir: Path, workspace: Path, worktree: Path) -> int:
    """Remove the private roots of the role sessions that worked in ``worktree``, a task
    tree's worktree now removed (merged or salvaged): nothing can resume there again, and
    each root may hold an agent's whole cache. Returns how many were removed."""
    removed = 0
    for session in store.list_sessions(limit=MAX_FORGOTTEN):
        if session.cwd != str(worktree) or not session.session_id.startswith("role-"):
            continue
        root = role_root(state_dir, workspace, session.session_id, session.identity_key)
        if root.exists():
            remove_tree(root)
            removed += 1
    return removed


MAX_FORGOTTEN = 100_000
"""Sessions read to find a removed tree's (far more than a project ever keeps)."""


def offer_http(answer: InitializeAnswer) -> bool:
    """Offer the hub's HTTP entry exactly when ``initialize`` advertised
    ``mcpCapabilities.http`` (ACP: stdio is mandatory, HTTP optional, absent = no)."""
    return bool(answer.capabilities is not None and answer.capabilities.mcp_http)


def _digest(text: str) -> str:
    return hashlib.sha256(text.encode()).hexdigest()[:16]


def _changed_fields(old: str, new: str) -> str:
    try:
        a, b = json.loads(old), json.loads(new)
    except ValueError:
        return "its identity"
    names = sorted(k for k in set(a) | set(b) if a.get(k) != b.get(k))
    return ", ".join(names) or "its identity"
