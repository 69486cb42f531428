"""The permission-integrity audit: every mutation must match a recorded decision.

An agent that stops sending ``session/request_permission`` (a mode that approves itself, an
allow rule in its own config, a bug) still *reports* what it did. This audit matches what
it reports against what baton decided, per session:

* a **tool call** of a mutating kind (``edit``, ``delete``, ``move``, ``execute``) that
  reaches ``completed`` needs an allowing decision for the same tool call id in the same
  turn, or an ``allow_always`` decision of the same kind earlier in the session;
* a **client fs write** (``fs/write_text_file``) needs an allowing decision in the same turn
  that names the path (locations, diffs, raw input), or one naming no path for an ``edit``;
* a **client terminal** (``terminal/create``) needs an allowing ``execute`` decision in the
  same turn (or ``allow_always`` for ``execute``).

In a session that works in a task tree's own worktree, the **worktree rule** covers what no
decision did: an edit, delete or move whose every reported path is inside the worktree
and touches no ``.git`` (``worktree``, a check the session passes in) is reviewed as the
tree's diff, so it is a ``security.mutation_allowed`` (rule ``worktree``), not a finding.
Commands, a mutation that names no path, paths outside, ``.git``, and anything baton
denied stay findings.

A decision is a ledger record answered ``allow`` by a human or a policy rule; ``deny`` and
unanswered (cancelled, expired) requests allow nothing, so a tool call that completes after
a denial is unapproved too. Each unmatched mutation is one
``security.unapproved_mutation``; a tool call whose paths were already reported as an
unapproved fs write in the turn is not counted twice. With ``expected=True`` (the profile
declared ``agent_approves``) findings are still recorded, marked ``expected``.

Pure: the session feeds it decisions and what the agent reported; it returns payloads.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Literal

from baton.events.model import SecurityMutationAllowed, SecurityUnapprovedMutation, _ToolExecution
from baton.request_model.documents import PermissionAnswer, PermissionRequest
from baton.requests.policy import tool_call_paths
from baton.requests.records import RequestRecord

__all__ = ["FILE_KINDS", "MUTATING_KINDS", "WORKTREE_RULE", "AuditPayload", "PermissionAudit"]

MUTATING_KINDS = frozenset({"edit", "delete", "move", "execute"})
FILE_KINDS = frozenset({"edit", "delete", "move"})
"""The mutations of files, which the worktree rule may cover (never ``execute``)."""
CONTROL = "permission-audit"
WORKTREE_RULE = "worktree"

AuditPayload = SecurityUnapprovedMutation | SecurityMutationAllowed
"""What the audit reports: a finding, or a mutation an audit rule allows."""


@dataclass(frozen=True, slots=True)
class _Decision:
    turn_id: str | None
    tool_call_id: str
    kind: str
    paths: frozenset[str]
    always: bool
    label: str


@dataclass(slots=True)
class _Tool:
    kind: str = "other"
    paths: frozenset[str] = frozenset()
    audited: bool = False


@dataclass
class PermissionAudit:
    """One session's audit (see the module docstring)."""

    workspace: str
    expected: bool = False
    display: Callable[[str], str] = field(default=lambda p: p)
    """Maps an absolute path to what events may show (workspace-relative, masked outside)."""
    worktree: Callable[[str], bool] | None = None
    """The worktree rule's check of one path (inside the task tree's worktree, no ``.git``);
    ``None``: the session does not work in a tree's worktree, no rule applies."""
    _allowed: list[_Decision] = field(default_factory=list)
    _denied: set[tuple[str | None, str]] = field(default_factory=set)
    _tools: dict[str, _Tool] = field(default_factory=dict)
    _reported_writes: dict[str | None, set[str]] = field(default_factory=dict)
    _ruled_writes: dict[str | None, set[str]] = field(default_factory=dict)
    findings: list[SecurityUnapprovedMutation] = field(default_factory=list)
    per_turn: dict[str | None, int] = field(default_factory=dict)

    # ------------------------------------------------------------------ inputs

    def decided(self, record: RequestRecord) -> None:
        """A permission request reached a final answer (allow or deny)."""
        document, answer = record.document, record.answer
        if not isinstance(document, PermissionRequest) or not isinstance(answer, PermissionAnswer):
            return
        call = document.tool_call
        if answer.decision != "allow":
            self._denied.add((record.turn_id, call.tool_call_id))
            return
        who = record.decided_by or "?"
        self._allowed.append(
            _Decision(
                turn_id=record.turn_id,
                tool_call_id=call.tool_call_id,
                kind=call.kind or "other",
                paths=frozenset(self._norm(p) for p in tool_call_paths(document)),
                always=answer.scope == "always",
                label=f"{record.request_id} ({who}{': ' + record.rule if record.rule else ''})",
            )
        )

    @staticmethod
    def may_find(payload: _ToolExecution) -> bool:
        """Whether :meth:`tool` can find anything in this event: only a completed call is
        checked (an update in progress only adds to what is known of the call)."""
        return payload.status == "completed"

    def tool(self, payload: _ToolExecution, turn_id: str | None) -> list[AuditPayload]:
        """A tool call event; a mutating one that just completed is checked."""
        tool = self._tools.get(payload.tool_call_id)
        if tool is None:
            tool = self._tools[payload.tool_call_id] = _Tool()
        if payload.kind and payload.kind != "other":
            tool.kind = payload.kind
        if payload.locations or payload.diffs:  # most progress names no path
            paths = {self._norm(loc.path) for loc in payload.locations}
            paths |= {self._norm(d.path) for d in payload.diffs}
            tool.paths = tool.paths | frozenset(p for p in paths if p)
        if tool.audited or not self.may_find(payload) or tool.kind not in MUTATING_KINDS:
            return []
        tool.audited = True
        if self._covers_tool(payload.tool_call_id, tool.kind, turn_id):
            return []
        if tool.paths & self._reported_writes.get(turn_id, set()):
            return []  # already reported as the unapproved fs write it made
        denied = (turn_id, payload.tool_call_id) in self._denied
        if not denied and tool.kind in FILE_KINDS and self._in_worktree(tool.paths):
            if tool.paths <= self._ruled_writes.get(turn_id, set()):
                return []  # already allowed as the fs write it made
            return self._allowed_by_rule(
                "tool_call",
                subject=f"{tool.kind} tool call {payload.tool_call_id}",
                tool_call_id=payload.tool_call_id,
                kind=tool.kind,
                path=min(tool.paths),
            )
        reason = (
            "completed although baton denied it"
            if denied
            else "completed without any permission request baton decided"
        )
        path = min(tool.paths) if tool.paths else None
        return self._find(
            "tool_call",
            turn_id,
            subject=f"{tool.kind} tool call {payload.tool_call_id}",
            reason=reason,
            tool_call_id=payload.tool_call_id,
            kind=tool.kind,
            path=path,
        )

    def client_write(self, path: str, turn_id: str | None) -> list[AuditPayload]:
        """The agent wrote ``path`` through ``fs/write_text_file``."""
        norm = self._norm(path)
        if any(self._covers_write(d, norm, turn_id) for d in self._allowed):
            return []
        if self._in_worktree(frozenset({norm})):
            self._ruled_writes.setdefault(turn_id, set()).add(norm)
            return self._allowed_by_rule(
                "fs_write",
                subject=f"fs/write_text_file {self.display(norm)}",
                kind="edit",
                path=norm,
            )
        self._reported_writes.setdefault(turn_id, set()).add(norm)
        return self._find(
            "fs_write",
            turn_id,
            subject=f"fs/write_text_file {self.display(norm)}",
            reason="no allowed permission request in this turn names this file",
            kind="edit",
            path=norm,
        )

    def client_terminal(self, command: str, turn_id: str | None) -> list[AuditPayload]:
        """The agent ran ``command`` in a client terminal (``terminal/create``)."""
        if any(d.kind == "execute" and (d.turn_id == turn_id or d.always) for d in self._allowed):
            return []
        return self._find(
            "terminal",
            turn_id,
            subject=f"terminal/create {command[:200]}",
            reason="no allowed execute permission request in this turn",
            kind="execute",
        )

    # ----------------------------------------------------------------- queries

    def count(self, turn_id: str | None) -> int:
        return self.per_turn.get(turn_id, 0)

    # --------------------------------------------------------------- internals

    def _in_worktree(self, paths: frozenset[str]) -> bool:
        """The worktree rule: every path (at least one) passes the session's check."""
        check = self.worktree
        return check is not None and bool(paths) and all(check(p) for p in paths)

    def _allowed_by_rule(
        self,
        mutation: Literal["tool_call", "fs_write"],
        *,
        subject: str,
        kind: str,
        path: str,
        tool_call_id: str | None = None,
    ) -> list[AuditPayload]:
        return [
            SecurityMutationAllowed(
                control=CONTROL,
                subject=subject,
                reason="inside the task's worktree: reviewed as its diff before it is merged",
                rule=WORKTREE_RULE,
                mutation=mutation,
                tool_call_id=tool_call_id,
                kind=kind,
                path=self.display(path),
            )
        ]

    def _norm(self, path: str) -> str:
        if not path:
            return ""
        full = path if os.path.isabs(path) else os.path.join(self.workspace, path)
        return os.path.normpath(full)

    def _covers_tool(self, tool_call_id: str, kind: str, turn_id: str | None) -> bool:
        return any(
            (d.tool_call_id == tool_call_id and d.turn_id == turn_id)
            or (d.always and d.kind == kind)
            for d in self._allowed
        )

    @staticmethod
    def _covers_write(decision: _Decision, path: str, turn_id: str | None) -> bool:
        if decision.always and decision.kind == "edit":
            return True
        if decision.turn_id != turn_id:
            return False
        if decision.paths:
            return path in decision.paths
        return decision.kind == "edit"

    def _find(
        self,
        mutation: Literal["tool_call", "fs_write", "terminal"],
        turn_id: str | None,
        *,
        subject: str,
        reason: str,
        tool_call_id: str | None = None,
        kind: str | None = None,
        path: str | None = None,
    ) -> list[AuditPayload]:
        if self.expected:
            reason += "; expected: the profile lets the agent approve itself (agent_approves)"
        finding = SecurityUnapprovedMutation(
            control=CONTROL,
            subject=subject,
            reason=reason,
            mutation=mutation,
            tool_call_id=tool_call_id,
            kind=kind,
            path=self.display(path) if path else None,
            expected=self.expected,
        )
        self.findings.append(finding)
        self.per_turn[turn_id] = self.per_turn.get(turn_id, 0) + 1
        return [finding]

    @staticmethod
    def unexpected(reported: Iterable[AuditPayload]) -> bool:
        """Whether any finding is not expected (a rule's allowance never is a finding)."""
        return any(isinstance(f, SecurityUnapprovedMutation) and not f.expected for f in reported)
