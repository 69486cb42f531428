"""Who approves a session's mutations: the mode check and the permission-integrity audit.

One :class:`ApprovalGuard` per session, fed by the session's parts:

* the handshake calls :meth:`~ApprovalGuard.start` once baton's settings are applied: the
  effective mode (what the agent advertises, :mod:`baton.providers.approval`) must ask the
  client, else the session is refused (``security.approval_refused``) unless the profile says
  ``agent_approves``, which runs it flagged (``security.approval_bypass``); a session in a
  task tree's worktree (``isolated``) is verified by the worktree table
  (:mod:`baton.providers.worktree_modes`: the family's edit mode is ``contained_edits``
  there) and audited with the worktree rule (:mod:`.worktree_rule`);
* every batch of drafts the session emits passes :meth:`~ApprovalGuard.drafts` (through
  :attr:`SessionEvents.watch <baton.runner.session_events.SessionEvents.watch>`): tool
  events are audited (:mod:`baton.requests.audit`) and a mode or config change is verified
  again (a switch to a self-approving mode cancels the turn);
* the client methods report decisions, client fs writes and terminals.

Unmatched mutations are ``security.unapproved_mutation`` events; under a ``strict`` policy
an unexpected one cancels the turn. Cancelling is the session's: the guard is handed a
``cancel`` callable once the turn driver exists.
"""

from __future__ import annotations

import asyncio
import dataclasses
from collections.abc import Callable, Coroutine, Sequence
from dataclasses import dataclass, field
from functools import partial
from pathlib import Path
from typing import Any

from baton.agent_profile import AgentProfile
from baton.errors import SecurityError
from baton.events.acp_normalizer import Draft
from baton.events.bounds import bounded_output, clip_text
from baton.events.model import (
    ConfigChanged,
    ModeChanged,
    SecurityApprovalBypass,
    SecurityApprovalRefused,
    _ToolExecution,
)
from baton.jsontypes import JsonObject
from baton.providers import approval, worktree_modes
from baton.requests.audit import AuditPayload, PermissionAudit
from baton.requests.ledger import RequestRecord
from baton.requests.states import State
from baton.runner.session_events import SessionEvents
from baton.runner.terminals import TerminalManager
from baton.runner.worktree_rule import worktree_check
from baton.security.paths import display_path

__all__ = ["ApprovalGuard"]

Cancel = Callable[[str], Coroutine[Any, Any, None]]


_REVERIFIED = (ModeChanged, ConfigChanged)
"""Drafts after which the session's approval mode is verified again."""


@dataclass(kw_only=True, eq=False)
class ApprovalGuard:
    """The approval verdict and the audit of one session."""

    profile: AgentProfile
    workspace: Path
    events: SessionEvents
    terminals: TerminalManager
    strict: Callable[[], bool]
    isolated: bool = False
    """The session works in a task tree's own worktree (its edits are the tree's diff)."""
    audit: PermissionAudit = field(init=False)
    verdict: approval.ApprovalVerdict | None = field(default=None, init=False)
    session_result: dict[str, Any] = field(default_factory=dict, init=False)
    cancel: Cancel | None = field(default=None, init=False)
    _background: set[asyncio.Task[Any]] = field(default_factory=set, init=False)

    def __post_init__(self) -> None:
        workspace = self.workspace
        self.audit = PermissionAudit(
            str(workspace),
            expected=self.profile.agent_approves,
            display=partial(display_path, workspace),
            worktree=worktree_check(workspace) if self.isolated else None,
        )

    @property
    def klass(self) -> str | None:
        """``asks``, ``read_only``, ``self_approves`` or ``unknown`` (None before start)."""
        return self.verdict.klass if self.verdict else None

    # ------------------------------------------------------------------ the mode

    async def start(self, session_result: JsonObject) -> None:
        """Verify the effective mode after baton's settings; raises ``SecurityError``."""
        self.session_result = session_result
        verdict = self._verify()
        self.verdict = verdict
        await self._check(verdict, at_start=True)

    def _verify(self) -> approval.ApprovalVerdict:
        """Who approves now; in a task tree's worktree, by the worktree table."""
        if self.isolated:
            return worktree_modes.verify_in_worktree(self.profile, self.session_result)
        return approval.verify(self.profile, self.session_result)

    async def started(self) -> None:
        """After ``session.started``: the bypass flag, or why nothing could be verified."""
        if self.verdict is not None:
            await self._notes(self.verdict)

    def current_mode(self) -> str | None:
        """The effective mode as the agent advertises it (config option first)."""
        effective = approval.advertised_mode(self.session_result)
        if effective:
            return effective[0][1]
        modes = self.session_result.get("modes") or {}
        mode = modes.get("currentModeId") if isinstance(modes, dict) else None
        return mode if isinstance(mode, str) else None

    async def _check(self, verdict: approval.ApprovalVerdict, *, at_start: bool) -> None:
        """A mode in which the agent approves itself is refused unless the profile allows it."""
        if not verdict.self_approves or self.profile.agent_approves:
            return
        text = (
            f"{self.profile.name}: the agent would approve its own mutations ({verdict.message()}); "
            "choose a mode that asks (see docs/agents.md) or set agent_approves = true in the "
            "profile to run it anyway, flagged"
        )
        await self.events.emit(
            SecurityApprovalRefused(
                control="approval-mode",
                subject=self.profile.name,
                reason=clip_text(self.events.redactor.text(text)),
                mode=verdict.mode,
            ),
            turn_id=None if at_start else "auto",
        )
        if at_start:
            raise SecurityError(text)
        self._spawn_cancel(f"the agent switched to a self-approving mode {verdict.mode!r}")

    async def _notes(self, verdict: approval.ApprovalVerdict) -> None:
        if verdict.self_approves:
            if self.profile.agent_approves:
                await self.events.emit(
                    SecurityApprovalBypass(
                        control="approval-mode",
                        subject=self.profile.name,
                        reason=clip_text(
                            f"agent_approves = true: {verdict.message()}; mutations are not "
                            "decided by baton in this session"
                        ),
                        mode=verdict.mode,
                    )
                )
        elif verdict.klass == "unknown":
            known = self.profile.family in approval.APPROVAL_TABLES
            await self.events.notice(
                "approval_unverified",
                f"baton cannot verify who approves mutations: {verdict.message()}",
                severity="warning" if known else "info",
            )

    async def _reverify(self, payload: ModeChanged | ConfigChanged) -> None:
        """The agent reported a new mode or new options: who approves now?"""
        if isinstance(payload, ModeChanged):
            modes = dict(self.session_result.get("modes") or {})
            modes["currentModeId"] = payload.mode_id
            self.session_result["modes"] = modes
        else:
            self.session_result["configOptions"] = list(payload.config_options)
        if self.verdict is None:
            return  # still being set up: the start check reads this state
        verdict = self._verify()
        previous, self.verdict = self.verdict, verdict
        if (previous.mode, previous.klass) == (verdict.mode, verdict.klass):
            return
        await self._check(verdict, at_start=False)
        await self._notes(verdict)

    # ----------------------------------------------------------------- the audit

    def prepare(self, drafts: Sequence[Draft]) -> list[Draft]:
        """Tool events naming terminals: baton's keep their output, the agent's own are
        labelled ``agent_terminal_ids`` and keep the output the agent reported."""
        out = list(drafts)
        for i, draft in enumerate(out):
            payload = draft.payload
            if isinstance(payload, _ToolExecution) and payload.terminal_ids:
                out[i] = self._with_terminals(draft, payload)
        return out

    def acts_on(self, draft: Draft) -> bool:
        """A completed tool call (audited) and a mode or config change (re-verified)."""
        payload = draft.payload
        if isinstance(payload, _ToolExecution):
            return self.audit.may_find(payload)
        return isinstance(payload, _REVERIFIED)

    async def drafts(self, drafts: Sequence[Draft], turn_id: str | None) -> None:
        """What was just emitted: audit tool calls, re-verify mode changes."""
        for draft in drafts:
            payload = draft.payload
            if isinstance(payload, _ToolExecution):
                # The turn the agent's own ids place the call in (its decision's turn).
                owner = draft.turn_id or turn_id
                findings = self.audit.tool(payload, owner)
                if findings:  # nearly never: no coroutine per tool event for nothing
                    await self._audited(findings, owner)
            elif isinstance(payload, _REVERIFIED):
                await self._reverify(payload)

    def decided(self, record: RequestRecord) -> None:
        if record.state is State.ANSWERED:
            self.audit.decided(record)

    async def client_write(self, path: str, turn_id: str | None) -> None:
        await self._audited(self.audit.client_write(path, turn_id), turn_id)

    async def client_terminal(self, command: str, turn_id: str | None) -> None:
        await self._audited(self.audit.client_terminal(command, turn_id), turn_id)

    def unapproved(self, turn_id: str) -> int:
        """The turn's unapproved mutations (0 when the profile expects them)."""
        return 0 if self.profile.agent_approves else self.audit.count(turn_id)

    async def _audited(self, findings: Sequence[AuditPayload], turn_id: str | None) -> None:
        """Emit audit findings; a strict policy cancels the turn on an unexpected one."""
        for finding in findings:
            await self.events.emit(finding, turn_id=turn_id)
        turn = self.events.turn
        live = turn is not None and turn.turn_id == turn_id and not turn.done
        if findings and live and self.strict() and self.audit.unexpected(findings):
            self._spawn_cancel("strict audit: a mutation no decision allowed")

    def _spawn_cancel(self, reason: str) -> None:
        if self.cancel is None:
            return
        task = asyncio.create_task(self.cancel(reason))
        self._background.add(task)
        task.add_done_callback(self._background.discard)

    def _with_terminals(self, draft: Draft, payload: _ToolExecution) -> Draft:
        ours = [t for t in payload.terminal_ids if self.terminals.knows(t)]
        theirs = [t for t in payload.terminal_ids if not self.terminals.knows(t)]
        update: dict[str, Any] = {}
        if theirs:
            update["agent_terminal_ids"] = theirs
        if payload.output is None:
            texts = [self.terminals.output_of(t) or "" for t in ours]
            text = "".join(texts) if ours else _reported_output(payload.raw_output)
            if text:
                update["output"] = bounded_output(self.events.redactor.text(text))
        if not update:
            return draft
        return dataclasses.replace(draft, payload=payload.model_copy(update=update))


def _reported_output(raw_output: Any) -> str | None:
    """The output text an agent reported for a tool call itself (agent-side terminals)."""
    if isinstance(raw_output, str):
        return raw_output
    if isinstance(raw_output, dict):
        for key in ("output", "stdout", "aggregated_output", "formatted_output"):
            value = raw_output.get(key)
            if isinstance(value, str) and value:
                return value
    return None
