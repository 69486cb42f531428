"""Rendering canonical events for people (rich) and for programs (NDJSON).

Everything an agent controls (text, tool titles and output, plan steps, request
titles, error messages) reaches the terminal only through
:func:`baton.security.display.terminal_safe`; baton's own lines start with one of
:data:`~baton.security.display.BATON_MARKS` (or ``baton``), which that function marks
when an agent line tries the same. With several sessions on one stream (``baton up``),
every line carries the role it comes from.

Each renderer also keeps the :class:`~baton.cli.tally.Tally` a caller needs for its exit
code (denied requests, failed steps) and the requests still waiting for an answer.

Output is written per read batch, not per event: streaming detail
(:data:`DEFERRED_TYPES`, what a flooding agent sends thousands of) is buffered until
the end of the read it came from (``batch_end``, the connection's hook) or, at the
latest, the end of this turn of the event loop; any other event (a request, a
refusal, a turn's end) writes everything buffered before it at once, and ``close``
writes the rest. One write and one terminal render per batch instead of one per
event; the bytes are the same as rendering event by event.

Length: one branch per canonical event type the terminal shows, plus the per-batch
writing both views share; the one place that decides what a person sees of an event.
"""

from __future__ import annotations

import asyncio
import contextlib
import sys
from collections.abc import Callable, Iterator
from typing import TextIO

from rich.console import Console, Group
from rich.live import Live
from rich.spinner import Spinner
from rich.text import Text

from baton.app.facade.budgets import SCOPE_TABLES, format_amount
from baton.app.facade.runs import (
    BudgetExceeded,
    BudgetThreshold,
    CanonicalEvent,
    FileWritten,
    HarnessDiagnostic,
    PlanStep,
    PlanUpdated,
    ProviderNotice,
    RequestAnswered,
    RequestCancelled,
    RequestCreated,
    RequestExpired,
    SecurityApprovalBypass,
    SecurityUnapprovedMutation,
    SessionFailed,
    SessionStarted,
    ToolExecutionCompleted,
    ToolExecutionProgressed,
    ToolExecutionStarted,
    TranscriptAssistant,
    TranscriptThinking,
    TurnCancelled,
    TurnCompleted,
    TurnFailed,
    TurnResumed,
    TurnStalled,
    UsageReported,
    _ToolExecution,
    resumed_text,
    stall_text,
)
from baton.cli.tally import DEFERRED_CODES, Tally, refusal_code
from baton.cli.tool_output import elide, json_summary
from baton.security.display import terminal_safe

__all__ = [
    "DEFERRED_TYPES",
    "HumanRenderer",
    "Labeler",
    "NdjsonRenderer",
    "RequestHint",
    "plan_mark",
    "safe",
]

DEFERRED_TYPES = frozenset(
    {
        TranscriptAssistant.TYPE,
        TranscriptThinking.TYPE,
        ToolExecutionProgressed.TYPE,
    }
)
"""Streaming detail: written at the end of its read batch, not event by event."""

_STATUS_STYLE = {"completed": "green", "failed": "red", "cancelled": "yellow"}
_PLAN_MARK = {"pending": "☐", "in_progress": "◐", "completed": "☑", "blocked": "☒"}
_FAILED_STEP_MARK = "✘"
_DEFERRED_MARK = "⏳"
RequestHint = Callable[[RequestCreated], str | None]
"""What to print under a new request (how and where to answer it), or nothing."""

Labeler = Callable[[CanonicalEvent], str | None]
"""The role an event comes from (``baton up``), or ``None`` for baton's own."""


def safe(text: str) -> str:
    """Untrusted text for a rich markup string (:func:`terminal_safe`)."""
    return terminal_safe(text)


def plan_mark(status: str, tool_status: str | None) -> str:
    """A plan step's mark. A step whose tool call failed (or was denied) is not ticked,
    whatever the agent's plan says (ACP has no failed status: the built-in agent marks
    every finished step completed); the dashboard's run view applies the same rule."""
    if status == "completed" and tool_status == "failed":
        return _FAILED_STEP_MARK
    if status == "completed" and tool_status == "deferred":
        return _DEFERRED_MARK
    if status == "completed" and tool_status == "cancelled":
        return "■"
    return _PLAN_MARK.get(status, "?")


def _plain(text: str, *, inline: bool = False) -> str:
    """Untrusted text for a :class:`Text` (no markup parsing)."""
    return terminal_safe(text, inline=inline, markup=False)


class _Later:
    """Calls ``fn`` once at the end of this turn of the event loop (now, without a loop):
    the fallback that writes a batch nobody ended (an event from outside a read)."""

    __slots__ = ("_fn", "_handle")

    def __init__(self, fn: Callable[[], None]) -> None:
        self._fn = fn
        self._handle: asyncio.Handle | None = None

    def __call__(self) -> None:
        if self._handle is not None:
            return
        try:
            loop = asyncio.get_running_loop()
        except RuntimeError:  # a replay (``baton log``): event by event
            self._fn()
            return
        self._handle = loop.call_soon(self._run)

    def _run(self) -> None:
        self._handle = None
        self._fn()


class NdjsonRenderer:
    """One canonical event per line on stdout: no markup, nothing else.

    Each line is the event's one serialization (:meth:`CanonicalEvent.to_json`, the
    same string the store row holds), written and flushed once per read batch.
    """

    def __init__(self, stream: TextIO | None = None) -> None:
        self.stream = stream or sys.stdout
        self.tally = Tally()
        self._lines: list[str] = []
        self._later = _Later(self.flush)

    def __call__(self, event: CanonicalEvent) -> None:
        self.tally(event)
        self._lines.append(event.to_json())
        if event.type in DEFERRED_TYPES:
            self._later()
        else:
            self.flush()

    def batch_end(self) -> None:
        """The end of one read from the agent: write what it produced."""
        self.flush()

    def flush(self) -> None:
        lines = self._lines
        if lines:
            lines.append("")
            self._lines = []
            self.stream.write("\n".join(lines))
            self.stream.flush()

    def close(self) -> None:
        self.flush()
        self.stream.flush()


class HumanRenderer:
    """A readable live view: streaming text, tool calls with spinners, the plan."""

    def __init__(
        self,
        console: Console | None = None,
        *,
        live: bool = True,
        labeler: Labeler | None = None,
        request_hint: RequestHint | None = None,
        label_width: int = 3,
        full: bool = False,
    ) -> None:
        self.console = console or Console(highlight=False, soft_wrap=True)
        self._wraps = self.console.is_terminal
        """At a terminal rich lays every line out at its width and only whole lines are
        written (see :meth:`flush`); to a pipe, lines go out as they are, unwrapped."""
        if self._wraps:
            self.console.soft_wrap = False
        self.full = full
        """Show every line of tool output and stderr (``baton log --full``), never elided."""
        self.tally = Tally()
        self.labeler = labeler
        self.request_hint = request_hint
        self._label_width = label_width
        self._running: dict[str, str] = {}
        self._text_from: tuple[str | None, str | None, str] | None = None
        self._col0 = True
        self._plan_contents: list[str] = []
        self._plan_statuses: dict[str, str] = {}
        self._tool_status: dict[str, str] = {}
        """A tool call's title -> how it last ended (``failed``, ``cancelled``, ``deferred`` …)."""
        self._run_id = ""
        self._label: str | None = None
        self._live: Live | None = None
        self._pieces: list[Text | str] = []
        """What is rendered but not yet written (one console print per batch)."""
        self._later = _Later(self.flush)
        if live and self.console.is_terminal:
            self._live = Live(
                self._status(), console=self.console, transient=True, refresh_per_second=8
            )
            self._live.start()

    # ------------------------------------------------------------------ layout

    def _status(self) -> Group:
        rows = [Spinner("dots", text=Text(title, style="cyan")) for title in self._running.values()]
        return Group(*rows)

    def _refresh(self) -> None:
        if self._live is not None:
            self._live.update(self._status())

    def _prefix(self) -> Text:
        if self._label is None:
            return Text("")
        if len(self._label) > self._label_width:
            self._label_width = min(len(self._label), 12)
        return Text(f"{self._label[:12]:>{self._label_width}} ▏", style="bold cyan")

    def _end_text(self) -> None:
        if self._text_from is not None:
            if not self._col0:
                self._pieces.append("\n")
            self._text_from = None
            self._col0 = True

    def flush(self, *, partial: bool = False) -> None:
        """Write everything rendered so far in one print (one live-display refresh).

        At a terminal only whole lines are written (``partial`` writes the rest too): a
        line left open under the live spinners was overwritten by their next redraw, and
        rich can only wrap at word boundaries what it sees whole.
        """
        pieces = self._pieces
        if not pieces:
            return
        text = Text.assemble(*pieces)
        if self._wraps and not partial:
            end = text.plain.rfind("\n") + 1
            if end == 0:
                return  # the line is still being written
            if end < len(text.plain):
                done, rest = text.divide([end])
                self._pieces = [rest]
                self.console.print(done, end="")
                return
        self._pieces = []
        self.console.print(text, end="")

    def batch_end(self) -> None:
        """The end of one read from the agent: write what it produced."""
        self.flush()

    def _print(self, item: Text | str, *, style: str = "") -> None:
        """One of baton's own lines (``str`` is rich markup built with :func:`safe`)."""
        self._end_text()
        line = item if isinstance(item, Text) else Text.from_markup(item)
        if style:
            line.stylize(style)
        prefix = self._prefix()
        if not self._wraps:
            self._pieces.append(Text.assemble(prefix, line))
            self._pieces.append("\n")
            return
        # At a terminal: wrapped at word boundaries under its label, never cut mid-word.
        width = max(20, self.console.width - prefix.cell_len)
        pad = Text(" " * prefix.cell_len)
        for index, part in enumerate(line.wrap(self.console, width, overflow="fold") or [line]):
            self._pieces.append(Text.assemble(prefix if index == 0 else pad, part))
            self._pieces.append("\n")

    def say(self, markup: str, *, style: str = "") -> None:
        """A line from the command itself (a reminder, a heartbeat), between events."""
        self._print(markup, style=style)
        self.flush()

    def _stream(self, text: str, style: str) -> None:
        """Agent text as it streams: each new line labelled and checked for forged marks."""
        pieces = self._pieces
        for index, part in enumerate(text.split("\n")):
            if index > 0:
                pieces.append("\n")
                self._col0 = True
            if not part:
                continue
            if self._col0:
                pieces.append(self._prefix())
            pieces.append(Text(terminal_safe(part, markup=False, mark=self._col0), style=style))
            self._col0 = False

    # ------------------------------------------------------------------ events

    def __call__(self, event: CanonicalEvent) -> None:
        self._render(event)
        if event.type in DEFERRED_TYPES:
            self._later()
        else:
            self.flush()

    def _render(self, event: CanonicalEvent) -> None:
        self.tally(event)
        self._run_id = event.run_id
        self._label = self.labeler(event) if self.labeler is not None else None
        payload = event.payload
        if isinstance(payload, TranscriptAssistant | TranscriptThinking):
            style = "dim italic" if isinstance(payload, TranscriptThinking) else ""
            # A late message of an earlier turn is its own paragraph, never glued to the
            # current turn's text.
            source = (event.session_id, event.turn_id, payload.TYPE)
            if self._text_from != source:
                self._end_text()
                if "late" in event.flags:
                    self._print(Text(f"late, of turn {event.turn_id}:", style="dim"))
                self._text_from = source
            self._stream(payload.text, style)
            return
        if isinstance(payload, _ToolExecution):
            self._tool(payload)
        elif isinstance(payload, PlanUpdated):
            self._plan(payload)
        elif isinstance(payload, SessionStarted):
            self._print(
                f"baton · {safe(payload.agent)} session {safe(payload.agent_session_id)} "
                f"({payload.how})",
                style="dim",
            )
        elif isinstance(payload, RequestCreated):
            self._print(
                f"[magenta]? {safe(payload.kind)} request {safe(payload.request_id)}:[/] "
                f"{terminal_safe(payload.title, inline=True)}"
            )
            hint = self.request_hint(payload) if self.request_hint is not None else None
            if hint:
                self._print(Text(f"  → {hint}", style="magenta"))
        elif isinstance(payload, RequestAnswered):
            answer = payload.answer if isinstance(payload.answer, dict) else {}
            verdict = answer.get("decision") or answer.get("outcome") or answer.get("action")
            rule = f" ({terminal_safe(payload.rule, inline=True)})" if payload.rule else ""
            self._print(f"  → {safe(str(verdict))} by {payload.decided_by}{rule}", style="dim")
        elif isinstance(payload, RequestExpired | RequestCancelled):
            self._print(
                f"  → request {safe(payload.request_id)} {payload.TYPE.split('.')[1]}: "
                f"{terminal_safe(payload.reason, inline=True)}",
                style="dim",
            )
        elif isinstance(payload, UsageReported):
            self._usage(payload)
        elif isinstance(payload, BudgetThreshold | BudgetExceeded):
            self._budget(payload)
        elif isinstance(payload, TurnCompleted):
            self._print(
                f"[green]✔ turn completed[/] ({safe(payload.stop_reason)}, "
                f"{payload.duration_ms / 1000:.1f}s)"
            )
        elif isinstance(payload, TurnCancelled):
            forced = " (process killed)" if payload.forced else ""
            self._print(f"[yellow]■ turn cancelled{forced}:[/] {safe(payload.reason)}")
        elif isinstance(payload, TurnStalled):
            self._print(
                Text(f"⏳ {stall_text(payload.silent_ms, payload.timeout_in_ms)}"), style="yellow"
            )
        elif isinstance(payload, TurnResumed):
            self._print(Text(f"▸ {resumed_text(payload.silent_ms)}"), style="dim")
        elif isinstance(payload, TurnFailed):
            self._print(f"[red]✘ turn failed:[/] {safe(payload.message)}")
            if payload.stderr_preview:
                # The agent's own dump (a JS error object is 17 lines): its last lines.
                lines = payload.stderr_preview.rstrip("\n").split("\n")
                shown, hidden = elide(lines, head=0, tail=3, full=self.full)
                if hidden:
                    self._print(
                        Text(
                            f"  … {hidden} earlier lines of the agent's stderr{self._see_all()}",
                            style="dim",
                        )
                    )
                for line in shown:
                    if line is not None:
                        self._print(Text("  " + _plain(line), style="dim red"))
        elif isinstance(payload, SessionFailed):
            self._print(f"[red]✘ session failed:[/] {safe(payload.message)}")
        elif isinstance(payload, ProviderNotice | HarnessDiagnostic):
            if getattr(payload, "severity", "warning") != "info":
                self._print(
                    f"[yellow]! {safe(payload.category)}:[/] {safe(payload.summary)}", style="dim"
                )
        elif isinstance(payload, FileWritten):
            self._print(
                f"[cyan]✎ wrote {safe(payload.path)}[/] ({payload.bytes:,} bytes, "
                f"sha256 {payload.sha256[:12]}…)",
                style="dim",
            )
        elif isinstance(payload, SecurityApprovalBypass) or (
            isinstance(payload, SecurityUnapprovedMutation) and payload.expected
        ):
            self._print(
                f"[yellow]⚠ {safe(event.type)}:[/] {safe(payload.subject)}: {safe(payload.reason)}"
            )
        elif event.type.startswith("security."):
            summary = payload.model_dump()
            self._print(
                f"[red]⛔ {safe(event.type)}:[/] {safe(str(summary.get('subject')))}: "
                f"{safe(str(summary.get('reason')))}"
            )

    def _tool(self, payload: _ToolExecution) -> None:
        title = _plain(payload.title or payload.kind, inline=True)
        kind = _plain(payload.kind, inline=True)
        if isinstance(payload, ToolExecutionCompleted) or payload.status in _STATUS_STYLE:
            self._running.pop(payload.tool_call_id, None)
            self._refresh()
            style = _STATUS_STYLE.get(payload.status, "white")
            mark = {"completed": "✔", "failed": "✘"}.get(payload.status, "■")
            if payload.status == "failed" and refusal_code(payload) in DEFERRED_CODES:
                self._tool_status[payload.title] = "deferred"
                self._print(
                    Text.assemble(
                        (f"{_DEFERRED_MARK} ", "yellow"),
                        (title, ""),
                        (" — later: the delegated tasks are still open", "dim"),
                    )
                )
                return
            self._tool_status[payload.title] = payload.status
            where = " (the agent's own terminal)" if payload.agent_terminal_ids else ""
            self._print(
                Text.assemble((f"{mark} ", style), (title, "bold"), (f" [{kind}]{where}", "dim"))
            )
            if payload.output and payload.output.tail.strip():
                self._output(payload)
            return
        if isinstance(payload, ToolExecutionStarted) or payload.tool_call_id not in self._running:
            self._running[payload.tool_call_id] = f"{title} [{kind}]"
            self._refresh()
            if self._live is None:
                self._print(Text.assemble(("⋯ ", "cyan"), (title, ""), (f" [{kind}]", "dim")))

    def _see_all(self) -> str:
        return f" · `baton log {self._run_id} --full` shows all" if self._run_id else ""

    def _output(self, payload: _ToolExecution) -> None:
        """A tool's output: a JSON result as one line; text as its head and its tail."""
        assert payload.output is not None
        summary = None if self.full else json_summary(payload.output.tail)
        if summary is not None:
            self._print(Text("  → " + _plain(summary, inline=True), style="dim"))
            return
        lines = payload.output.tail.rstrip("\n").split("\n")
        failed = payload.status == "failed"
        shown, hidden = elide(
            lines, head=3 if failed else 2, tail=6 if failed else 3, full=self.full
        )
        if self.full and payload.output.truncated:
            kept = len(payload.output.tail.encode("utf-8"))
            self._print(
                Text(
                    f"  (only the last {kept:,} of {payload.output.total_bytes:,} bytes were kept)",
                    style="dim",
                )
            )
        for line in shown:
            if line is None:
                self._print(Text(f"  … {hidden} more lines{self._see_all()}", style="dim"))
            else:
                self._print(Text("  " + _plain(line), style="dim"))

    def _plan(self, payload: PlanUpdated) -> None:
        """The whole checklist when its steps change; one line per status change otherwise."""
        contents = [s.content for s in payload.steps]
        statuses: dict[str, str] = {s.step_id: s.status for s in payload.steps}
        if contents != self._plan_contents:
            self._plan_contents = contents
            count = len(payload.steps)
            self._print(Text(f"plan ({count} step{'' if count == 1 else 's'})", style="bold dim"))
            for step in payload.steps:
                self._print(Text.assemble(f"{self._mark(step)} ", self._step_label(step)))
        else:
            for step in payload.steps:
                if self._plan_statuses.get(step.step_id) != step.status:
                    line = Text.assemble(f"plan {self._mark(step)} ", self._step_label(step))
                    self._print(line, style="dim")
        self._plan_statuses = statuses

    def _mark(self, step: PlanStep) -> str:
        return plan_mark(step.status, self._tool_status.get(step.content))

    @staticmethod
    def _step_label(step: PlanStep) -> str:
        label = _plain(step.content, inline=True)
        if step.native_status == "cancelled":
            label += " (cancelled)"
        return label

    def _usage(self, payload: UsageReported) -> None:
        if not payload.available:
            self._print(Text(f"usage: unavailable ({_plain(payload.reason or '')})", style="dim"))
            return
        parts = []
        for label, value in (
            ("in", payload.input_tokens),
            ("out", payload.output_tokens),
            ("total", payload.total_tokens),
            ("context", payload.context_used),
        ):
            if value is not None:
                parts.append(f"{label} {value:,}")
        if payload.cost_amount is not None:
            currency = _plain(payload.cost_currency or "", inline=True)
            parts.append(f"cost {payload.cost_amount:g} {currency}".rstrip())
        self._print(Text("usage: " + ", ".join(parts), style="dim"))

    def _budget(self, payload: BudgetThreshold | BudgetExceeded) -> None:
        spent = format_amount(payload.dimension, payload.spend)
        limit = format_amount(payload.dimension, payload.limit)
        where = f"{SCOPE_TABLES[payload.scope]} {_plain(payload.key, inline=True)}"
        if isinstance(payload, BudgetThreshold):
            text = (
                f"budget: {where} {payload.dimension} {spent} of {limit} (past {payload.soft:.0%})"
            )
            self._print(Text(text, style="yellow"))
            return
        text = f"budget exceeded: {where} {payload.dimension} {spent} of {limit}: {payload.action}"
        self._print(Text(text, style="red"))

    @contextlib.contextmanager
    def paused(self) -> Iterator[None]:
        """Stop the live spinners while someone types an answer at the terminal."""
        live = self._live
        self._end_text()
        self.flush()
        if live is None:
            yield
            return
        live.stop()
        try:
            yield
        finally:
            live.start()

    def close(self) -> None:
        self._end_text()
        self.flush(partial=True)
        if self._live is not None:
            self._live.stop()
            self._live = None
