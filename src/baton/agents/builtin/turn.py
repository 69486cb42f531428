"""One prompt turn: plan the runbook's steps, run them in order, close with a summary.

The update sequence of a turn is: ``plan`` (all pending); per step ``plan`` (in progress), the
step's tool call (see `steps`), ``plan`` (completed; a failed step is "completed" too, ACP plans
have no failed state, the tool call says it failed); then the automatic report if any; then one
``agent_message_chunk`` summary. Steps not run stay pending in the plan.
"""

from dataclasses import dataclass
from typing import Literal

from .channel import TurnInterrupted, until_cancelled
from .jsonrpc import JsonObject
from .mcp_client import ToolIndex
from .plan_states import PLAN_ENTRY, EntryEvent
from .runbook import McpStep, Runbook, label, parse_runbook, truncate
from .steps import Action, StepContext, StepRun, ToolStep, run_step
from .summary import (
    Status,
    StepOutcome,
    acknowledgement_body,
    nothing_done_result,
    report_body,
    report_result,
    summarize,
)
from .updates import PlanStatus, agent_message, plan, user_message

__all__ = ["HELP", "TurnEnding", "run_turn"]

HELP = (
    "This prompt has no runbook steps, so there is nothing for me to do. I am baton's runbook "
    "agent: I run the fenced code blocks of a prompt in order. ```sh (or bash) runs a shell "
    "command in the session directory, ```file relative/path writes the block to that file, "
    "```mcp SERVER.TOOL calls an MCP tool with the block's JSON object as arguments. "
    "Execute and edit steps ask for permission first; a failing step stops the runbook unless "
    "the prompt has a line `continue-on-error: true`."
)
REPORT_LABEL = "report: write_report"


@dataclass(frozen=True, slots=True)
class TurnEnding:
    """How the turn ended and what `session/load` should replay of it."""

    stop_reason: Literal["end_turn", "cancelled"]
    replay: tuple[JsonObject, ...]
    title: str | None


@dataclass(frozen=True, slots=True)
class _Planned:
    label: str
    action: Action
    delegation: int | None = None
    """The checklist item index, for a delegation."""
    after: tuple[int, ...] = ()
    error: str | None = None


def _resolved(step: _Planned, created: dict[int, str]) -> Action:
    """A delegation's ``create_task`` call with the ids of the tasks it waits for."""
    if step.delegation is None:
        return step.action
    assert isinstance(step.action, ToolStep)
    if step.error is not None:
        return McpStep(target=step.action.tool, arguments={}, error=step.error)
    missing = [n + 1 for n in step.after if n not in created]
    if missing:
        return McpStep(
            target=step.action.tool,
            arguments={},
            error=f"not delegated: it waits for item(s) {missing}, which were not delegated",
        )
    if not step.after:
        return step.action
    after = ", ".join(created[n] for n in step.after)
    return ToolStep(step.action.server, step.action.tool, {**step.action.arguments, "after": after})


async def run_turn(ctx: StepContext, number: int, text: str) -> TurnEnding:
    """Run the runbook in ``text`` as turn ``number`` of the session."""
    runbook = parse_runbook(text)
    replay: list[JsonObject] = [user_message(text, f"msg-{number}-user")]
    cancel = ctx.channel.cancel
    index = ToolIndex({}, {})
    if ctx.hub is not None and (runbook.steps or runbook.delegations or runbook.auto_report):
        try:
            index = await until_cancelled(ctx.hub.index(), cancel)
        except TurnInterrupted:
            return await _finish(
                ctx, number, replay, summarize([], cancelled=True), cancelled=True, title=None
            )
    notes = [f"{error}." for error in index.errors.values()]
    planned = _delegations(runbook, index, notes) + [
        _Planned(label(step), step) for step in runbook.steps
    ]
    title = _title(runbook, planned)
    report_server = None
    if runbook.auto_report and not runbook.has_report_step and not runbook.delegations:
        # A leader that delegates reports later, when baton prompts it to consolidate.
        report_server = index.provider("write_report")
    if not planned and report_server is None:
        return await _finish(
            ctx, number, replay, " ".join([HELP, *notes]), cancelled=False, title=title
        )
    entries = [p.label for p in planned] + ([REPORT_LABEL] if report_server else [])
    board = _Board(ctx, entries)
    await board.send()

    outcomes: list[StepOutcome] = []
    created: dict[int, str] = {}
    """Delegation item index -> the task id ``create_task`` returned."""
    stopped = cancelled = False
    for number_in_plan, step in enumerate(planned, start=1):
        cancelled = cancelled or cancel.is_set()
        if stopped or cancelled:
            outcomes.append(StepOutcome(number_in_plan, step.label, Status.NOT_RUN))
            continue
        run = await board.run(number_in_plan, step.label, _resolved(step, created))
        replay.extend(run.replay)
        outcomes.append(run.outcome)
        task_id = (run.structured or {}).get("task_id")
        if step.delegation is not None and isinstance(task_id, str):
            created[step.delegation] = task_id
        cancelled = run.outcome.status is Status.CANCELLED
        if run.outcome.status is Status.FAILED:
            stopped = run.outcome.denied or not runbook.continue_on_error

    report: StepOutcome | None = None
    filed: str | None = None
    cancelled = cancelled or cancel.is_set()
    if report_server is not None and not cancelled:
        result = report_result(outcomes, runbook.result)
        if planned:
            arguments = {"result": result, "body": report_body(outcomes)}
        elif runbook.report is not None:
            # A consolidation: baton drafted the report from the delegated ones.
            arguments = {"result": result, "body": runbook.report}
        else:
            # Nothing to execute and no report drafted by baton: this turn did no work. The
            # report says so, and is never "done" (nothing done is not done).
            arguments = {
                "result": nothing_done_result(runbook.result),
                "body": acknowledgement_body(runbook.narrative),
            }
        filed = str(arguments["result"])
        action = ToolStep(report_server, "write_report", arguments)
        run = await board.run(len(entries), REPORT_LABEL, action)
        replay.extend(run.replay)
        report = run.outcome
        cancelled = report.status is Status.CANCELLED
    message = summarize(
        outcomes,
        report=report,
        cancelled=cancelled,
        notes=notes,
        directive=runbook.result,
        filed=filed,
    )
    return await _finish(ctx, number, replay, message, cancelled=cancelled, title=title)


def _delegations(runbook: Runbook, index: ToolIndex, notes: list[str]) -> list[_Planned]:
    """``create_task`` steps for the delegation items, when a server offers the tool."""
    if not runbook.delegations:
        return []
    server = index.provider("create_task")
    if server is None:
        count = len(runbook.delegations)
        notes.append(
            f"{count} delegation item(s) were not sent: no MCP server of this session offers create_task."
        )
        return []
    return [
        _Planned(
            truncate(f"delegate @{d.role}: {d.subject}"),
            ToolStep(
                server, "create_task", {"recipient": d.role, "subject": d.subject, "body": d.body}
            ),
            delegation=n,
            after=d.after,
            error=d.error,
        )
        for n, d in enumerate(runbook.delegations)
    ]


def _title(runbook: Runbook, planned: list[_Planned]) -> str | None:
    """A session title: the prompt's first line of prose, else its first step."""
    for line in runbook.narrative:
        if text := line.strip().lstrip("#").strip():
            return truncate(text, 80)
    return planned[0].label if planned else None


async def _finish(
    ctx: StepContext,
    number: int,
    replay: list[JsonObject],
    message: str,
    *,
    cancelled: bool,
    title: str | None,
) -> TurnEnding:
    update = agent_message(message, f"msg-{number}-1")
    await ctx.channel.update(update)
    replay.append(update)
    return TurnEnding("cancelled" if cancelled else "end_turn", tuple(replay), title)


class _Board:
    """The plan as the client sees it, kept current around each step."""

    def __init__(self, ctx: StepContext, entries: list[str]) -> None:
        self._ctx = ctx
        self._entries = entries
        self._states = [PLAN_ENTRY.next(None, EntryEvent.PLAN) for _ in entries]

    async def send(self) -> None:
        statuses: list[PlanStatus] = [state.value for state in self._states]
        await self._ctx.channel.update(plan(list(zip(self._entries, statuses, strict=True))))

    def _move(self, number: int, event: EntryEvent) -> None:
        self._states[number - 1] = PLAN_ENTRY.next(self._states[number - 1], event)

    async def run(self, number: int, step_label: str, action: Action) -> StepRun:
        self._move(number, EntryEvent.START)
        await self.send()
        run = await run_step(self._ctx, number, step_label, action)
        self._move(number, EntryEvent.FINISH)
        await self.send()
        return run
