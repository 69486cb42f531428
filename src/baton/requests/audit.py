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

from baton.events.model import SecurityUnapprovedMutation, _ToolExecution
from baton.requests.model import PermissionAnswer, PermissionRequest
from baton.requests.policy import tool_call_paths
from baton.requests.records import RequestRecord

__all__ = ["MUTATING_KINDS", "PermissionAudit"]

MUTATING_KINDS = frozenset({"edit", "delete", "move", "execute"})
CONTROL = "permission-audit"


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
    _allowed: list[_Decision] = field(default_factory=list)
    _denied: set[tuple[str | None, str]] = field(default_factory=set)
    _tools: dict[str, _Tool] = field(default_factory=dict)
    _reported_writes: dict[str | None, set[str]] = field(default_factory=dict)
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

    def tool(
        self, payload: _ToolExecution, turn_id: str | None
    ) -> list[SecurityUnapprovedMutation]:
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

    def client_write(self, path: str, turn_id: str | None) -> list[SecurityUnapprovedMutation]:
        """The agent wrote ``path`` through ``fs/write_text_file``."""
        norm = self._norm(path)
        if any(self._covers_write(d, norm, turn_id) for d in self._allowed):
            return []
        self._reported_writes.setdefault(turn_id, set()).add(norm)
        return self._find(
            "fs_write",
            turn_id,
            subject=f"fs/write_text_file {self.display(norm)}",
            reason="no allowed permission request in this turn names this file",
            kind="edit",
            path=norm,
        )

    def client_terminal(
        self, command: str, turn_id: str | None
    ) -> list[SecurityUnapprovedMutation]:
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
    ) -> list[SecurityUnapprovedMutation]:
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

    def unexpected(self, findings: Iterable[SecurityUnapprovedMutation]) -> bool:
        return any(not f.expected for f in findings)
