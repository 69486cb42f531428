"""The role-scoped MCP server: FCoP as tools, one binding per agent session.

``baton up`` serves these tools for every slot from the team loop itself
(:mod:`baton.role_tools.hub`: HTTP, or stdio through a stdlib-only shim); the
per-slot process of before, ``python -m baton.role_tools.slot_server --store DB --slot
NAME`` over stdio, still works (the benchmark measures it beside the hub). The slot's binding
in the store (:mod:`baton.role_tools.binding`) fixes the role, the team and
the tool allowlist; the slot's pointer says which TASK and attempt the session
is on. So:

* **Identity is not an argument.** ``write_report(result, body)`` takes no
  task, attempt or sender; they come from the binding and the pointer, and are
  re-checked against FCoP on every call (the TASK must be active, addressed to
  this role, and on the pointed attempt). Any extra argument (``sender``,
  ``attempt_id``, …) is refused with a message saying why, not silently dropped.
* **Allowlist.** Tools outside the role's allowlist are not listed and cannot
  be called. ``create_task`` and ``review_report`` exist only for the leader.
* **No authority.** This process never registers the trusted evaluator:
  ``review_report`` records the leader's decision as an acceptance/rejection
  REVIEW (evidence) plus an outbox row; the team loop, which holds the key,
  performs T4/T5. ``ask_human`` likewise writes an ISSUE (visible in FCoP)
  and an outbox row the team loop turns into a human request.
* **Not after its team loop.** Every writing tool first checks that the
  ``baton up`` owning the slot still runs (same pid, same kernel start time) and
  refuses with ``DAEMON_GONE`` otherwise; the server also watches that process
  (a pidfd) and exits the moment it dies.

The implementation is split so tests and in-process fakes can use it without
a transport: :class:`RoleTools` (plain synchronous methods over
:class:`~baton.fcop_port.port.FcopPort`) and :func:`build_server`
(the ``mcp`` low-level server over it). :func:`mcp_config` builds the ACP
``session/new`` ``mcpServers`` entry; :func:`fcop_mcp_config` builds the
opt-in stock ``fcop-mcp`` entry instead.

Length: each role-scoped tool is a schema plus a short handler over the port; the server is their one table.
"""

from __future__ import annotations

import argparse
import asyncio
import hashlib
import json
import os
import re
import sys
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

from baton.fcop_errors import CoordinationError, FcopProtocolError, TaskNotFound
from baton.fcop_port.creation import operation_id_for
from baton.fcop_port.port import (
    TASK_ID_RE,
    FcopPort,
    ReportInfo,
    TaskInfo,
)
from baton.intake.screen import subject_problem, unsafe_line
from baton.jsontypes import JsonMapping
from baton.role_tools.binding import Binding, CurrentTask, OutboxRecord, SlotAccess
from baton.team_config import FcopMcpCompat
from baton.workflow.results import (
    ChildOutcome,
    consolidation_verdict,
    normalize_result,
    nothing_done,
    override_section,
)

__all__ = [
    "SERVER_NAME",
    "WRITING_TOOLS",
    "McpServerEntry",
    "RoleTools",
    "ToolRefused",
    "ToolResult",
    "ToolSpec",
    "ToolSurface",
    "allowed_tools",
    "build_server",
    "checked_call",
    "fcop_mcp_config",
    "main",
    "mcp_config",
]

SERVER_NAME = "baton"

ToolResult = dict[str, Any]
"""A tool's answer: the JSON object MCP sends back to the agent (an I/O edge, built from
the port's typed records by each tool)."""

McpServerEntry = dict[str, Any]
"""One ACP ``session/new`` ``mcpServers`` entry: JSON the agent reads to start or reach
a server (``{name, command, args, env}`` for stdio, ``{type, name, url, headers}`` for HTTP)."""
MAX_BODY = 512 * 1024
MAX_SUBJECT = 200
MAX_QUESTION = 8 * 1024
REPORT_PREVIEW = 16 * 1024
RESULT_WORDS = ("done", "blocked", "failed")
_REPORT_ID = re.compile(r"REPORT-[A-Za-z0-9][A-Za-z0-9._-]*")


class ToolRefused(CoordinationError):
    """A tool call baton refuses; ``code`` is machine-readable, the message says why."""

    def __init__(self, code: str, message: str) -> None:
        super().__init__(message)
        self.code = code


@dataclass(frozen=True, slots=True)
class ToolSpec:
    name: str
    description: str
    properties: Mapping[str, Mapping[str, Any]]
    required: tuple[str, ...]

    @property
    def input_schema(self) -> dict[str, Any]:  # JSON Schema, as MCP lists it
        return {
            "type": "object",
            "properties": {k: dict(v) for k, v in self.properties.items()},
            "required": list(self.required),
            "additionalProperties": False,
        }


def _s(
    description: str, *, max_length: int | None = None, enum: Sequence[str] = ()
) -> dict[str, Any]:
    schema: dict[str, Any] = {"type": "string", "description": description}
    if max_length is not None:
        schema["maxLength"] = max_length
    if enum:
        schema["enum"] = list(enum)
    return schema


TOOL_SPECS: Mapping[str, ToolSpec] = {
    spec.name: spec
    for spec in (
        ToolSpec(
            "read_task",
            "Read the task you are working on now (subject, sender, body, attempt).",
            {},
            (),
        ),
        ToolSpec(
            "write_report",
            "File your report on the current task. Call once when the work is done, blocked or "
            "failed, then stop. Task, attempt and recipient are filled in by baton.",
            {
                "result": _s('"done", "blocked" or "failed" (a short word).', max_length=64),
                "body": _s("What you did, what you found, what is left.", max_length=MAX_BODY),
                "override": _s(
                    'Leaders only: to report "done" although a delegated task is not done, '
                    "why (it is recorded in the report). Leave it out otherwise.",
                    max_length=MAX_QUESTION,
                ),
            },
            ("result", "body"),
        ),
        ToolSpec(
            "write_issue",
            "Flag a problem with the current task (or the workspace) for your leader.",
            {
                "severity": _s("low, medium, high or critical.", max_length=32),
                "body": _s("The problem, with evidence.", max_length=MAX_BODY),
            },
            ("severity", "body"),
        ),
        ToolSpec(
            "list_reports",
            "List reports on the current task and on the tasks it delegated.",
            {},
            (),
        ),
        ToolSpec(
            "ask_human",
            "Ask the human a question. It is recorded; the answer arrives in a later prompt.",
            {"question": _s("One clear question.", max_length=MAX_QUESTION)},
            ("question",),
        ),
        ToolSpec(
            "create_task",
            "Delegate part of the current task to a team role. The new task's parent is the "
            "current task; you will get its report.",
            {
                "recipient": _s("The role to do it (e.g. DEV, QA, OPS)."),
                "subject": _s("One line naming the work.", max_length=MAX_SUBJECT),
                "body": _s("Exactly what to do and what to report.", max_length=MAX_BODY),
                "after": _s(
                    "Task ids (from earlier create_task results, comma-separated) whose output "
                    "this task needs: it starts once they are done. Leave it out to start now.",
                    max_length=4096,
                ),
            },
            ("recipient", "subject", "body"),
        ),
        ToolSpec(
            "review_report",
            "Approve or reject a report on a task you delegated. baton applies the decision.",
            {
                "report_id": _s("The REPORT-… id.", max_length=200),
                "decision": _s("approve or reject", enum=("approve", "reject")),
                "reason": _s("Why (sent to the reporter on reject).", max_length=MAX_QUESTION),
            },
            ("report_id", "decision", "reason"),
        ),
    )
}

WRITING_TOOLS = frozenset(
    {"write_report", "write_issue", "ask_human", "create_task", "review_report"}
)
"""Tools whose call changes something (FCoP, the outbox): the rest only read."""
_IDENTITY_WORDS = frozenset(
    {"sender", "role", "task_id", "attempt_id", "subject_ref", "actor", "workspace_id", "parent"}
)


def _same_report(head: ReportInfo | None, sender: str, result: str, body: str) -> bool:
    return (
        head is not None
        and head.sender == sender
        and head.result == result
        and head.body.rstrip("\n") == body.rstrip("\n")
    )


def _report_json(report: ReportInfo, *, preview: int = REPORT_PREVIEW) -> ToolResult:
    body = report.body if len(report.body) <= preview else report.body[:preview] + "\n[...]"
    return {
        "report_id": report.report_id,
        "task_id": report.subject_ref,
        "attempt_id": report.attempt_id,
        "sender": report.sender,
        "recipient": report.recipient,
        "result": report.result,
        "report_kind": report.report_kind,
        "body": body,
    }


def allowed_tools(binding: Binding) -> tuple[str, ...]:
    """The tools ``binding``'s role may list and call (the leader's own only for it)."""
    leader_only = {"create_task", "review_report"}
    return tuple(
        name
        for name in binding.allowed_tools
        if name in TOOL_SPECS and (binding.is_leader or name not in leader_only)
    )


def checked_call(
    binding: Binding,
    name: str,
    arguments: Mapping[str, Any] | None,  # JSON in: the agent's
) -> dict[str, str]:
    """``arguments`` of a call ``binding``'s role may make, checked against the tool's
    schema (allowed, no identity or unknown argument, required ones, strings within their
    bounds); raises :class:`ToolRefused` saying why not. Every surface of the role tools
    (the hub's, a worker's relay) checks a call with this before it goes anywhere."""
    allowed = allowed_tools(binding)
    if name not in allowed:
        raise ToolRefused(
            "TOOL_NOT_ALLOWED",
            f"{name!r} is not available to {binding.role} (allowed: {', '.join(allowed)})",
        )
    spec = TOOL_SPECS[name]
    args = dict(arguments or {})
    extra = sorted(set(args) - set(spec.properties))
    if extra:
        why = (
            "identity (role, task, attempt, sender) comes from baton's binding, not arguments"
            if _IDENTITY_WORDS & set(extra)
            else f"{name} takes only {', '.join(spec.properties) or 'no arguments'}"
        )
        raise ToolRefused("UNEXPECTED_ARGUMENT", f"unexpected argument(s) {extra}: {why}")
    for key in spec.required:
        if key not in args:
            raise ToolRefused("MISSING_ARGUMENT", f"{name} needs {key!r}")
    for key, value in args.items():
        if not isinstance(value, str):
            raise ToolRefused("INVALID_ARGUMENT", f"{key!r} must be a string")
        limit = spec.properties[key].get("maxLength")
        if isinstance(limit, int) and len(value) > limit:
            raise ToolRefused("INVALID_ARGUMENT", f"{key!r} is longer than {limit} characters")
    return args


class ToolSurface(Protocol):
    """What the ``mcp`` server serves (:func:`build_server`): the role's tools, run here
    (:class:`RoleTools`) or relayed from a worker host (``baton.cluster.tool_relay``)."""

    @property
    def binding(self) -> Binding: ...

    def specs(self) -> list[ToolSpec]: ...

    def call(self, name: str, arguments: JsonMapping | None) -> ToolResult:
        """Blocking; raises :class:`ToolRefused` (or a coordination error) with the reason."""
        ...


class RoleTools:
    """The tools of one binding, transport-free and synchronous."""

    def __init__(
        self,
        access: SlotAccess,
        *,
        port: FcopPort | None = None,
        pointer: CurrentTask | None = None,
    ) -> None:
        self.access = access
        self.pinned = pointer
        """The TASK and attempt a relayed call was made on (its delivery may come after the
        slot's pointer moved on); None: the slot's pointer now."""
        self.binding = access.binding()
        binding = self.binding
        self.port = port or FcopPort(binding.fcop_root, human=binding.human)
        self._handlers: dict[str, Callable[..., ToolResult]] = {
            "read_task": self.read_task,
            "write_report": self.write_report,
            "write_issue": self.write_issue,
            "list_reports": self.list_reports,
            "ask_human": self.ask_human,
            "create_task": self.create_task,
            "review_report": self.review_report,
        }

    # ------------------------------------------------------------- surface

    @property
    def allowed(self) -> tuple[str, ...]:
        return allowed_tools(self.binding)

    def specs(self) -> list[ToolSpec]:
        return [TOOL_SPECS[name] for name in self.allowed]

    def call(
        self,
        name: str,
        arguments: Mapping[str, Any] | None,  # JSON in: the agent's, checked per tool
    ) -> ToolResult:
        """Validate and run one call; raises :class:`ToolRefused` with a clear reason."""
        args = checked_call(self.binding, name, arguments)
        if name in WRITING_TOOLS and not self.access.team_loop_alive():
            raise ToolRefused(
                "DAEMON_GONE",
                "the baton up that started this session is gone; nothing was written. Stop now.",
            )
        try:
            return self._handlers[name](**args)
        except FcopProtocolError as exc:
            raise ToolRefused(exc.code, exc.fcop_message) from exc
        except TaskNotFound as exc:
            raise ToolRefused("TASK_NOT_FOUND", str(exc)) from exc

    # ------------------------------------------------------------ identity

    def _current(self, *, require_active: bool = True) -> tuple[TaskInfo, str]:
        pointer: CurrentTask = self.pinned or self.access.pointer()
        if pointer.task_id is None or pointer.attempt_id is None:
            raise ToolRefused("NO_CURRENT_TASK", f"{self.binding.role} has no task right now")
        task = self.port.read_task(pointer.task_id)
        if task.recipient != self.binding.role and task.recipient not in self.binding.aliases:
            raise ToolRefused(
                "NOT_YOUR_TASK",
                f"{task.task_id} is addressed to {task.recipient}, not {self.binding.role}",
            )
        if require_active and task.stage != "active":
            raise ToolRefused(
                "TASK_NOT_ACTIVE",
                f"{task.task_id} is in {task.stage}; it was already submitted or finished",
            )
        if require_active and task.attempt_id != pointer.attempt_id:
            raise ToolRefused(
                "ATTEMPT_MISMATCH",
                f"{task.task_id} is on attempt {task.attempt_id}, not {pointer.attempt_id}",
            )
        return task, pointer.attempt_id

    # --------------------------------------------------------------- tools

    def read_task(self) -> ToolResult:
        task, attempt = self._current(require_active=False)
        return {
            "task_id": task.task_id,
            "attempt_id": attempt,
            "stage": task.stage,
            "subject": task.subject,
            "sender": task.sender,
            "recipient": task.recipient,
            "parent": task.parent,
            "priority": task.priority,
            "body": task.body,
        }

    def write_report(self, result: str, body: str, override: str | None = None) -> ToolResult:
        task, attempt = self._current()
        if not result.strip():
            raise ToolRefused("INVALID_ARGUMENT", 'result must be a word like "done"')
        if unsafe_line(result.strip()):
            raise ToolRefused("INVALID_ARGUMENT", "result must be printable text on one line")
        if normalize_result(result) == "done" and nothing_done(body):
            raise ToolRefused(
                "NOTHING_DONE",
                'a "done" report must say what was done, and this one says nothing was: '
                'do the work first, or report "blocked" with why nothing was done',
            )
        if self.binding.is_leader:
            children = self.port.children(task.task_id)
            open_children = [c for c in children if c.stage in ("inbox", "active")]
            if open_children:
                ids = ", ".join(f"{c.task_id} ({c.recipient})" for c in open_children)
                raise ToolRefused(
                    "CHILDREN_OPEN",
                    f"delegated tasks are still being worked on: {ids}. End your turn; baton "
                    "prompts you to consolidate once they have all reported.",
                )
            verdict = consolidation_verdict(result, [self._outcome(c) for c in children], override)
            if not verdict.allowed:
                raise ToolRefused("CHILDREN_NOT_DONE", verdict.message)
            if verdict.overridden and override is not None:
                body = body.rstrip("\n") + override_section(verdict, override)
        report = self.port.find_report_head(task.task_id, attempt)
        if not _same_report(report, self.binding.role, result.strip(), body):
            # the same report again (a delivery repeated after a crash, an agent's retry)
            # is the one already filed, never a second
            report = self.port.write_report(
                task_id=task.task_id,
                attempt_id=attempt,
                sender=self.binding.role,
                recipient=task.sender,
                result=result.strip(),
                body=body,
            )
        assert report is not None
        return {
            "report_id": report.report_id,
            "task_id": task.task_id,
            "attempt_id": attempt,
            "recipient": task.sender,
            "report_kind": report.report_kind,
            "next": "Report filed. Stop now; baton submits it for review.",
        }

    def _outcome(self, child: TaskInfo) -> ChildOutcome:
        head = None
        if child.attempt_id is not None:
            head = self.port.find_report_head(child.task_id, child.attempt_id)
        return ChildOutcome(child.task_id, child.recipient, head.result if head else None)

    def _issue_recipient(self) -> str:
        return self.binding.human if self.binding.is_leader else self.binding.leader

    def write_issue(self, severity: str, body: str) -> ToolResult:
        subject: str | None
        try:
            task, _ = self._current(require_active=False)
            subject = task.task_id
        except ToolRefused as exc:
            if exc.code != "NO_CURRENT_TASK":
                raise
            subject = None
        issue_id = self.port.write_issue(
            sender=self.binding.role,
            recipient=self._issue_recipient(),
            severity=severity.strip() or "medium",
            body=body,
            subject_ref=subject,
        )
        return {"issue_id": issue_id, "subject_ref": subject, "recipient": self._issue_recipient()}

    def list_reports(self) -> ToolResult:
        task, _ = self._current(require_active=False)
        subjects = [task.task_id]
        if self.binding.is_leader:
            subjects += [c.task_id for c in self.port.children(task.task_id)]
        reports = [_report_json(r) for s in subjects for r in self.port.reports_for(s)]
        return {"reports": reports, "count": len(reports)}

    def ask_human(self, question: str) -> ToolResult:
        task, attempt = self._current(require_active=False)
        if not question.strip():
            raise ToolRefused("INVALID_ARGUMENT", "question must not be empty")
        request_id = (
            "ask-"
            + hashlib.sha256(
                f"{task.task_id}\x1f{attempt}\x1f{self.binding.role}\x1f{question}".encode()
            ).hexdigest()[:24]
        )
        issue_id = self.port.write_issue(
            sender=self.binding.role,
            recipient=self.binding.human,
            severity="question",
            body=f"{self.binding.role} asks {self.binding.human} (request {request_id}):\n\n"
            f"{question}",
            subject_ref=task.task_id,
        )
        self.access.post(
            OutboxRecord(
                kind="ask_human",
                role=self.binding.role,
                task_id=task.task_id,
                attempt_id=attempt,
                data={"request_id": request_id, "question": question, "issue_id": issue_id},
            )
        )
        return {
            "request_id": request_id,
            "issue_id": issue_id,
            "status": "pending",
            "next": f"Recorded for {self.binding.human}. Continue if you can; the answer "
            "arrives in a later prompt.",
        }

    def create_task(
        self, recipient: str, subject: str, body: str, after: str | None = None
    ) -> ToolResult:
        task, attempt = self._current()
        recipient = recipient.strip()
        if recipient == self.binding.human:
            raise ToolRefused(
                "INVALID_RECIPIENT",
                f"report to {self.binding.human} with write_report; create_task delegates to roles",
            )
        if recipient not in self.binding.team_roles or recipient == self.binding.role:
            others = [r for r in self.binding.team_roles if r != self.binding.role]
            raise ToolRefused(
                "INVALID_RECIPIENT",
                f"{recipient!r} is not a role you can delegate to (roles: {', '.join(others)})",
            )
        problem = subject_problem(subject)
        if problem is not None:
            raise ToolRefused("INVALID_ARGUMENT", problem)
        prerequisites = self._prerequisites(task, after)
        created = self.port.create_task(
            sender=self.binding.role,
            recipient=recipient,
            subject=subject.strip(),
            body=body,
            parent=task.task_id,
            references=prerequisites,
            operation_id=operation_id_for(
                "delegate", task.task_id, attempt, recipient, subject.strip(), body, *prerequisites
            ),
        )
        return {
            "task_id": created.task_id,
            "recipient": recipient,
            "parent": task.task_id,
            "after": list(prerequisites),
            "existing": created.existing,
        }

    def _prerequisites(self, task: TaskInfo, after: str | None) -> tuple[str, ...]:
        """``after``'s ids, each a task this leader delegated under the current task."""
        ids = tuple(dict.fromkeys(w for w in re.split(r"[\s,]+", after or "") if w))
        for task_id in ids:
            if not TASK_ID_RE.fullmatch(task_id):
                raise ToolRefused("INVALID_ARGUMENT", f"after: {task_id!r} is not a TASK id")
            try:
                sibling = self.port.read_task(task_id)
            except TaskNotFound as exc:
                raise ToolRefused("INVALID_ARGUMENT", f"after: no task {task_id}") from exc
            if sibling.parent != task.task_id:
                raise ToolRefused(
                    "INVALID_ARGUMENT",
                    f"after: {task_id} was not delegated under {task.task_id}; only tasks "
                    "you created for it can be waited for",
                )
        return ids

    def review_report(self, report_id: str, decision: str, reason: str) -> ToolResult:
        if not _REPORT_ID.fullmatch(report_id):
            raise ToolRefused("INVALID_ARGUMENT", f"{report_id!r} is not a REPORT id")
        if decision not in ("approve", "reject"):
            raise ToolRefused("INVALID_ARGUMENT", 'decision must be "approve" or "reject"')
        path = self.port.fcop_dir / "reports" / f"{report_id}.md"
        if not path.is_file() or path.is_symlink():
            raise ToolRefused("REPORT_NOT_FOUND", f"no report {report_id}")
        subject = self._report_subject(path)
        task = self.port.read_task(subject)
        if task.sender != self.binding.role:
            raise ToolRefused(
                "NOT_YOUR_REVIEW",
                f"{task.task_id} was delegated by {task.sender}; only they (or "
                f"{self.binding.human}) review it",
            )
        if task.stage != "review" or task.attempt_id is None:
            raise ToolRefused(
                "NOT_IN_REVIEW", f"{task.task_id} is in {task.stage}; nothing to review yet"
            )
        head = self.port.find_report_head(task.task_id, task.attempt_id)
        if head is None or head.report_id != report_id:
            current = head.report_id if head else "none"
            raise ToolRefused(
                "NOT_CURRENT_REPORT", f"{report_id} is not the current report (that is {current})"
            )
        review_id = self.port.write_decision_review(
            task_id=task.task_id,
            attempt_id=task.attempt_id,
            report_ref=report_id,
            reviewer=self.binding.role,
            recipient=task.recipient,
            decision="approve" if decision == "approve" else "reject",
            reason=reason,
        )
        self.access.post(
            OutboxRecord(
                kind="review",
                role=self.binding.role,
                task_id=task.task_id,
                attempt_id=task.attempt_id,
                data={
                    "review_id": review_id,
                    "decision": decision,
                    "report_id": report_id,
                    "reason": reason,
                },
            )
        )
        return {
            "review_id": review_id,
            "task_id": task.task_id,
            "decision": decision,
            "next": "Decision recorded; baton applies it when your turn ends.",
        }

    def _report_subject(self, path: Path) -> str:
        fields = self.port.inspect_envelope(path)
        subject = fields.get("subject_ref")
        if not isinstance(subject, str) or not TASK_ID_RE.fullmatch(subject):
            raise ToolRefused("REPORT_NOT_FOUND", f"{path.stem} is not a REPORT on a TASK")
        return subject


# ------------------------------------------------------------------ MCP server


def build_server(tools: ToolSurface) -> Any:  # mcp's Server, generic, imported lazily
    """The ``mcp`` low-level server exposing exactly ``tools.allowed``."""
    import mcp.types as types
    from mcp.server.lowlevel import Server

    async def list_tools(ctx: Any, params: Any) -> types.ListToolsResult:
        return types.ListToolsResult(
            tools=[
                types.Tool(name=s.name, description=s.description, input_schema=s.input_schema)
                for s in tools.specs()
            ]
        )

    async def call_tool(ctx: Any, params: types.CallToolRequestParams) -> types.CallToolResult:
        try:
            result = await asyncio.to_thread(tools.call, params.name, params.arguments)
        except ToolRefused as exc:
            error = {"code": exc.code, "message": str(exc)}
            return types.CallToolResult(
                content=[types.TextContent(type="text", text=json.dumps({"error": error}))],
                structured_content={"error": error},
                is_error=True,
            )
        except CoordinationError as exc:
            error = {"code": getattr(exc, "code", type(exc).__name__), "message": str(exc)}
            return types.CallToolResult(
                content=[types.TextContent(type="text", text=json.dumps({"error": error}))],
                structured_content={"error": error},
                is_error=True,
            )
        return types.CallToolResult(
            content=[types.TextContent(type="text", text=json.dumps(result, ensure_ascii=False))],
            structured_content=result,
        )

    return Server(
        SERVER_NAME,
        version="1",
        instructions=(
            f"FCoP tools for {tools.binding.role}. Identity and task ids come from baton; "
            "call write_report once when the task is done, then stop."
        ),
        on_list_tools=list_tools,
        on_call_tool=call_tool,
    )


def _watch_team_loop(access: SlotAccess) -> None:
    """Exit the moment the owning team loop dies (a pidfd), so no tool outlives it."""
    pid = access.team_loop_pid()
    if pid is None or not access.team_loop_alive():
        raise CoordinationError("the baton up that owns this slot is not running")
    try:
        fd = os.pidfd_open(pid)
    except (AttributeError, OSError):
        return  # no pidfd here: the per-call check still refuses every write
    asyncio.get_running_loop().add_reader(fd, os._exit, 3)


async def serve_stdio(store_path: Path, slot: str) -> None:
    """Serve one slot over stdin/stdout until the client closes the pipe or the team loop dies."""
    from mcp.server.stdio import stdio_server

    from baton import crashpoints
    from baton.store.sqlite import SqliteStore

    crashpoints.install_from_env()
    store = SqliteStore.open(store_path)
    try:
        access = SlotAccess(store, slot)
        tools = RoleTools(access)
        _watch_team_loop(access)
        server = build_server(tools)
        async with stdio_server() as (read_stream, write_stream):
            await server.run(read_stream, write_stream, server.create_initialization_options())
    finally:
        await store.aclose()


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m baton.role_tools.server",
        description="baton's role-scoped FCoP MCP server (stdio).",
    )
    parser.add_argument("--store", type=Path, required=True, help="the project's baton store")
    parser.add_argument("--slot", required=True, help="the role slot this session works for")
    args = parser.parse_args(argv)
    try:
        asyncio.run(serve_stdio(args.store, args.slot))
    except CoordinationError as exc:
        print(f"{type(exc).__name__}: {exc}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        return 130
    return 0


# ---------------------------------------------------------- ACP mcpServers entry


def mcp_config(
    binding: Binding,
    *,
    python: str | None = None,
    name: str = SERVER_NAME,
    env: Mapping[str, str] | None = None,
) -> McpServerEntry:
    """The ACP ``session/new`` ``mcpServers`` entry (stdio) for ``binding``'s slot.

    ``{name, command, args, env: [{name, value}]}``. The command is an absolute
    interpreter path and the store an absolute file, so the server never depends
    on the agent's cwd or PATH.
    """
    if binding.store_path is None:
        raise CoordinationError("the binding has no store (read it through SlotAccess)")
    command = python or sys.executable
    if not Path(command).is_absolute():
        raise CoordinationError(f"MCP server command must be absolute, got {command!r}")
    return {
        "name": name,
        "command": command,
        "args": [
            "-u",
            "-m",
            "baton.role_tools.slot_server",
            "--store",
            str(binding.store_path),
            "--slot",
            binding.session_name,
        ],
        "env": [
            {"name": "PYTHONUNBUFFERED", "value": "1"},
            *({"name": k, "value": v} for k, v in sorted((env or {}).items())),
        ],
    }


def fcop_mcp_config(compat: FcopMcpCompat, root: Path, *, name: str = "fcop") -> McpServerEntry:
    """Opt-in: the stock ``fcop-mcp`` entry, from its own venv, always with ``--root``.

    Never the cwd fallback: ``--root`` and ``FCOP_PROJECT_DIR`` are both the
    absolute FCoP project root. The stock server has no per-role allowlist and
    no trusted evaluator (it cannot approve); baton still closes the loop.
    """
    if not compat.enabled or compat.python is None:
        raise CoordinationError("[team.fcop_mcp] is not enabled (set enabled and python)")
    if not compat.python.is_absolute():
        raise CoordinationError("[team.fcop_mcp] python must be an absolute path")
    if not compat.python.exists():
        raise CoordinationError(
            f"{compat.python}: fcop-mcp's venv interpreter is missing; create it with "
            f"`python -m venv VENV && VENV/bin/pip install fcop-mcp==4.0.5`"
        )
    root = root.resolve()
    return {
        "name": name,
        "command": str(compat.python),
        "args": ["-u", "-m", "fcop_mcp", "--root", str(root)],
        "env": [
            {"name": "FCOP_PROJECT_DIR", "value": str(root)},
            {"name": "PYTHONUNBUFFERED", "value": "1"},
        ],
    }


if __name__ == "__main__":
    sys.exit(main())
