"""The role context header: what every prompt to a role agent starts with.

CodeFlow's lesson (the seed essay): injecting tools is not enough, an agent
must also be told who it is, which tools it has and how the FCoP workflow goes,
or it describes the work in prose and exits with ``tool_calls_count: 0``. The
header says exactly that, briefly: identity (role, team, leader, human), the
task and attempt ids, the subject, the tools from the role's allowlist (and no
others), the workflow (do the work, ``write_report``, stop; the leader
delegates with ``create_task`` and consolidates), then the task body inline so
the agent never needs to claim or fetch it.

Rules kept by every function here:

* deterministic: the same inputs give the same bytes (no clock, no ids
  generated here), so prompts can be compared in tests and traces;
* short: the fixed part stays under 3 KB; only the body and quoted reports add;
* inert for the built-in runbook agent: the header itself contains no code
  fences and no ``- [ ] @ROLE`` lines, and text from *other* agents (child
  reports, review reasons) is quoted with ``> `` so it can neither run as a
  step nor re-delegate work. Only the task's own body is inline verbatim.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from baton.workflow.results import ChildOutcome, consolidation_verdict
from baton.workflow.review_summary import ChildSummary, consolidation_draft

__all__ = [
    "ChildReport",
    "PromptContext",
    "ToolRecord",
    "answer_prompt",
    "consolidation_prompt",
    "quote",
    "reminder_prompt",
    "resume_prompt",
    "review_prompt",
    "revision_prompt",
    "task_prompt",
]

_TOOL_HELP = {
    "read_task": "read_task() - this task again (you already have it below).",
    "write_report": (
        'write_report(result, body) - your report on this task. result: "done", "blocked" '
        'or "failed"; body: what you did and found. Once, at the end.'
    ),
    "write_report_leader": (
        'write_report(result, body, override) - your report on this task. result: "done", '
        '"blocked" or "failed"; body: what you did and found. Once, at the end. "done" while a '
        "delegated task is not done needs override: your reason (otherwise it is refused)."
    ),
    "write_issue": "write_issue(severity, body) - flag a problem (low, medium, high, critical).",
    "list_reports": "list_reports() - reports on this task and on the tasks it delegated.",
    "ask_human": "ask_human(question) - ask {human}; the answer comes in a later prompt.",
    "create_task": (
        "create_task(recipient, subject, body, after) - delegate part of the work to {roles}; "
        "the new task's parent is this task. after: the task ids (from earlier create_task "
        "results) whose output it needs; it starts once they are done. Empty: it starts now."
    ),
    "review_report": (
        'review_report(report_id, decision, reason) - decision "approve" or "reject" for a '
        "report on a task you delegated."
    ),
}
_QUOTE_LIMIT = 8 * 1024


@dataclass(frozen=True, slots=True)
class PromptContext:
    """Everything the header says about the agent and its task (all plain data)."""

    role: str
    team: str
    leader: str
    human: str
    team_roles: tuple[str, ...]
    tools: tuple[str, ...]
    task_id: str
    attempt_id: str
    subject: str
    sender: str
    body: str
    parent: str | None = None

    @property
    def is_leader(self) -> bool:
        return self.role == self.leader


@dataclass(frozen=True, slots=True)
class ChildReport:
    """A delegated task and its report, as quoted to the leader."""

    task_id: str
    role: str
    subject: str
    stage: str
    report_id: str | None
    result: str | None
    body: str


@dataclass(frozen=True, slots=True)
class ToolRecord:
    """One tool call of an earlier turn, as baton recorded it (its title, how it ended,
    the tail of its output)."""

    title: str
    status: str
    output: str = ""

    @property
    def is_report(self) -> bool:
        """The role's own report call (its failure is not the work's)."""
        return "write_report" in self.title


def quote(text: str, *, limit: int = _QUOTE_LIMIT) -> str:
    """``> ``-prefix every line (bounded), so quoted text is read, never executed."""
    if len(text) > limit:
        text = text[:limit] + f"\n[... {len(text) - limit} more characters not shown]"
    lines = text.rstrip("\n").split("\n") if text.strip() else ["(empty)"]
    return "\n".join(f"> {line}" if line else ">" for line in lines)


def _identity(ctx: PromptContext) -> list[str]:
    lead = "you lead it" if ctx.is_leader else f"leader: {ctx.leader}"
    lines = [
        "[baton] FCoP role context",
        f'You are {ctx.role} in team "{ctx.team}" ({lead}; the human is {ctx.human}).',
        "baton coordinates the team through FCoP task files; you act only through your tools.",
        "",
        f"Task:    {ctx.task_id}",
        f"Attempt: {ctx.attempt_id}",
        f"Subject: {ctx.subject}",
        f"From:    {ctx.sender}",
    ]
    if ctx.parent:
        lines.append(f"Parent:  {ctx.parent}")
    return lines


def _tools(ctx: PromptContext) -> list[str]:
    others = ", ".join(r for r in ctx.team_roles if r != ctx.role) or "(no other roles)"
    lines = ['Your tools (MCP server "baton"; identity and task ids are filled in for you):']
    for name in ctx.tools:
        key = "write_report_leader" if name == "write_report" and ctx.is_leader else name
        text = _TOOL_HELP.get(key, f"{name}()")
        lines.append("* " + text.format(human=ctx.human, roles=others))
    return lines


def _workflow(ctx: PromptContext) -> list[str]:
    if ctx.is_leader and "create_task" in ctx.tools:
        return [
            "Workflow (FCoP, you are the leader):",
            "1. Small work: do it yourself. Larger work: split it with create_task, one task",
            "   per role, each body saying exactly what to do and what to report.",
            "2. After delegating, end your turn. baton prompts you again when every delegated",
            "   task has reported, with their reports quoted.",
            f"3. Consolidate: call write_report once with the combined result for {ctx.sender}.",
            "   Then stop.",
        ]
    return [
        "Workflow (FCoP):",
        "1. Do the work this task asks for. The body is below; do not claim or fetch it.",
        "2. Call write_report once: what you did, what you found, and the result. Every task",
        "   gets a report, also when you are blocked or the work failed.",
        "3. Stop. baton brings your next task.",
    ]


def _join(*blocks: Sequence[str]) -> str:
    return "\n\n".join("\n".join(block) for block in blocks if block) + "\n"


def task_prompt(ctx: PromptContext) -> str:
    """The first prompt for a task: header, then the body verbatim."""
    body = ctx.body.rstrip("\n") or "(the task has no body; the subject is the task)"
    return _join(
        _identity(ctx),
        _tools(ctx),
        _workflow(ctx),
        ["--- task body ---", body, "--- end of task body ---"],
    )


def reminder_prompt(
    ctx: PromptContext, *, turns_left: int, recorded: Sequence[ToolRecord] = ()
) -> str:
    """The reminder after a turn that ended without a report.

    ``recorded``: that turn's tool calls as baton recorded them. They are given back so
    that the report is the report *of that work*, also from an agent that keeps no memory
    between turns: listed (their output quoted, inert), and, for the built-in agent, a
    drafted report in a ``report`` fence with the ``baton-result:`` they earn (``done``
    only when every recorded call of the work completed). Without a record the agent is
    asked for its report as before (the built-in one then reports that nothing ran)."""
    lines = [
        "[baton] Reminder",
        f"Your last turn on {ctx.task_id} ({ctx.subject}) ended without a report.",
        "Call write_report now: result and body, even if the work is blocked or failed.",
        "Then stop.",
    ]
    if turns_left <= 0:
        lines.append(
            f"This is the last reminder: without a report the task stalls and {ctx.human} is told."
        )
    work = [r for r in recorded if not r.is_report]
    if not work:
        return _join(lines)
    result = "done" if all(r.status == "completed" for r in work) else "blocked"
    lines += [
        f"baton recorded what that turn did ({len(work)} tool call(s), below): report the "
        "result of that work; do not run it again.",
        f"baton-result: {result}",
    ]
    listed = []
    for number, record in enumerate(recorded, start=1):
        listed.append(f"{number}. {record.title} ({record.status})")
        if record.output:
            listed.append(quote(record.output, limit=2000))
    draft = _recorded_draft(recorded, result)
    fence = "`" * max(4, _longest_backticks(draft) + 1)
    return _join(
        lines,
        ["The recorded tool calls:", *listed],
        ["A draft of that report:", "", f"{fence}report", draft.rstrip("\n"), fence],
    )


def _recorded_draft(recorded: Sequence[ToolRecord], result: str) -> str:
    lines = [
        f"Result of the interrupted turn, from baton's record of its tool calls: {result}.",
        "",
        "| # | Tool call | Status |",
        "|---|-----------|--------|",
    ]
    for number, record in enumerate(recorded, start=1):
        title = record.title.replace("|", "\\|").replace("\n", " ")
        lines.append(f"| {number} | {title} | {record.status} |")
    for number, record in enumerate(recorded, start=1):
        if record.output:
            lines += ["", f"Output of {number} (its end):", quote(record.output, limit=2000)]
    return "\n".join(lines) + "\n"


def _longest_backticks(text: str) -> int:
    longest = run = 0
    for char in text:
        run = run + 1 if char == "`" else 0
        longest = max(longest, run)
    return longest


def consolidation_prompt(ctx: PromptContext, children: Sequence[ChildReport]) -> str:
    """The leader's prompt once every delegated task has reported.

    It states the honest result (:func:`~baton.workflow.results.consolidation_verdict`:
    not ``done`` while a delegated task is not done, unless the leader overrides with a
    reason), as prose for an agent and as the ``baton-result:`` directive for the built-in
    agent, and offers a drafted report (:func:`~baton.workflow.review_summary.consolidation_draft`)
    in a ``report`` fence, which the built-in agent files as it is.
    """
    outcomes = [ChildOutcome(c.task_id, c.role, c.result) for c in children]
    verdict = consolidation_verdict("done", outcomes)
    intro = [
        "[baton] Delegated work is in: consolidate",
        f"You are {ctx.role}, leading {ctx.task_id} (attempt {ctx.attempt_id}).",
        f"Subject: {ctx.subject}",
        f"Every task you delegated has reported. Consolidate them into one report for "
        f"{ctx.sender} with write_report (result and body), then stop.",
    ]
    if verdict.not_done:
        listed = "; ".join(c.describe() for c in verdict.not_done)
        intro.append(
            f"Not every delegated task is done ({listed}): report result "
            f'"{verdict.suggested}", or keep "done" only with write_report\'s override argument '
            "saying why."
        )
    if "review_report" in ctx.tools:
        intro.append(
            "To send a report back for rework instead, call review_report(report_id, "
            '"reject", reason) and end your turn.'
        )
    intro.append(f"baton-result: {verdict.suggested}")
    draft = consolidation_draft(
        [
            ChildSummary(c.task_id, c.role, c.subject, c.result, c.report_id, c.body)
            for c in children
        ]
    )
    blocks: list[list[str]] = [
        intro,
        ["A draft of that report:", "", "````report", draft.rstrip("\n"), "````"],
        ["The delegated reports in full:"],
    ]
    for child in children:
        head = (
            f"{child.task_id} -> {child.role}: {child.subject} [{child.stage}]"
            f"{', report ' + child.report_id if child.report_id else ', no report'}"
            f"{', result ' + child.result if child.result else ''}"
        )
        blocks.append([head, quote(child.body)])
    blocks.append(["Original task, for reference:", quote(ctx.body)])
    return _join(*blocks)


def review_prompt(ctx: PromptContext, child: ChildReport) -> str:
    """``explicit`` child acceptance: one report for the leader to approve or reject."""
    return _join(
        [
            "[baton] Review a report",
            f"You are {ctx.role}. {child.role} reported on {child.task_id} ({child.subject}),",
            f"which you delegated under {ctx.task_id}.",
            f"Call review_report({child.report_id}, decision, reason) with decision "
            '"approve" or "reject", then stop.',
        ],
        [f"Report {child.report_id}, result {child.result}:", quote(child.body)],
    )


def revision_prompt(ctx: PromptContext, *, reviewer: str, reason: str) -> str:
    """After a rejection (T5): the same task again, new attempt, with the reason quoted."""
    return _join(
        _identity(ctx),
        [f"{reviewer} sent your last report back. Their reason:", quote(reason)],
        _tools(ctx),
        _workflow(ctx),
        ["--- task body ---", ctx.body.rstrip("\n") or "(no body)", "--- end of task body ---"],
    )


def answer_prompt(ctx: PromptContext, *, question: str, answer: str) -> str:
    """A human's answer to an ``ask_human`` question, delivered in a later turn."""
    return _join(
        [
            "[baton] Answer from " + ctx.human,
            f"On {ctx.task_id} ({ctx.subject}) you asked:",
            quote(question),
            "The answer:",
            quote(answer),
            "Continue the task; call write_report when it is done, then stop.",
        ]
    )


def resume_prompt(ctx: PromptContext, *, why: str, delegated: Sequence[ChildReport] = ()) -> str:
    """Re-prompt a turn that never finished (baton stopped, or the turn failed), with context.

    The task again, verbatim, plus what is already done: the tasks this one already
    delegated. Delegating the same work again returns the existing task (baton's
    operation ids are deterministic), so a leader creates only what is missing.
    """
    lines = [
        "[baton] Continue an interrupted task",
        f"Your previous turn on {ctx.task_id} did not finish: {why}.",
        "Pick the task up again. Work already recorded in FCoP stays: a report you filed",
        "would have been submitted, and create_task for work already delegated returns the",
        "existing task instead of a new one.",
    ]
    blocks: list[list[str]] = [lines]
    if delegated:
        done = [
            f"* {c.task_id} -> {c.role}: {c.subject} [{c.stage}]"
            + (f", result {c.result}" if c.result else "")
            for c in delegated
        ]
        blocks.append(["Already delegated:", *done])
    return _join(
        *blocks,
        _identity(ctx),
        _tools(ctx),
        _workflow(ctx),
        ["--- task body ---", ctx.body.rstrip("\n") or "(no body)", "--- end of task body ---"],
    )
