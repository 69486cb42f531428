"""Rendering canonical events for people (rich) and for programs (NDJSON).

Agent-controlled text is neutralized before it reaches the terminal (escape
sequences, bidi overrides, C0/C1 controls) and lines that could pass for baton's
own prompts are visibly marked as agent output.
"""

from __future__ import annotations

import contextlib
import sys
from collections.abc import Iterator
from typing import Any, TextIO

from rich.console import Console, Group
from rich.live import Live
from rich.markup import escape
from rich.spinner import Spinner
from rich.table import Table
from rich.text import Text

from baton.events.model import (
    CanonicalEvent,
    FileWritten,
    HarnessDiagnostic,
    PlanStep,
    PlanUpdated,
    ProviderNotice,
    RequestAnswered,
    RequestCreated,
    SecurityApprovalBypass,
    SecurityUnapprovedMutation,
    SessionFailed,
    SessionStarted,
    ToolExecutionCompleted,
    ToolExecutionStarted,
    TranscriptAssistant,
    TranscriptThinking,
    TurnCancelled,
    TurnCompleted,
    TurnFailed,
    UsageReported,
    _ToolExecution,
)
from baton.security.display import mark_agent_lines, neutralize_terminal

_STATUS_STYLE = {"completed": "green", "failed": "red", "cancelled": "yellow"}
_PLAN_MARK = {"pending": "☐", "in_progress": "◐", "completed": "☑", "blocked": "☒"}


def safe(text: str) -> str:
    """Agent text made inert for a terminal, with forged framing marked."""
    return mark_agent_lines(neutralize_terminal(text))


class NdjsonRenderer:
    """One canonical event per line on stdout: no markup, nothing else."""

    def __init__(self, stream: TextIO | None = None) -> None:
        self.stream = stream or sys.stdout

    def __call__(self, event: CanonicalEvent) -> None:
        self.stream.write(event.to_json() + "\n")
        self.stream.flush()

    def close(self) -> None:
        self.stream.flush()


class HumanRenderer:
    """A readable live view: streaming text, tool calls with spinners, the plan."""

    def __init__(self, console: Console | None = None, *, live: bool = True) -> None:
        self.console = console or Console(highlight=False)
        self._running: dict[str, str] = {}
        self._in_text: str | None = None
        self._plan_contents: list[str] = []
        self._plan_statuses: dict[str, str] = {}
        self._live: Live | None = None
        if live and self.console.is_terminal:
            self._live = Live(
                self._status(), console=self.console, transient=True, refresh_per_second=8
            )
            self._live.start()

    def _status(self) -> Group:
        rows = [Spinner("dots", text=Text(title, style="cyan")) for title in self._running.values()]
        return Group(*rows)

    def _refresh(self) -> None:
        if self._live is not None:
            self._live.update(self._status())

    def _end_text(self) -> None:
        if self._in_text is not None:
            self.console.print()
            self._in_text = None

    def _print(self, *items: Any, **kwargs: Any) -> None:
        self._end_text()
        self.console.print(*items, **kwargs)

    def __call__(self, event: CanonicalEvent) -> None:
        payload = event.payload
        if isinstance(payload, TranscriptAssistant | TranscriptThinking):
            style = "dim italic" if isinstance(payload, TranscriptThinking) else ""
            if self._in_text != payload.TYPE:
                self._end_text()
                self._in_text = payload.TYPE
            self.console.print(Text(safe(payload.text), style=style), end="")
            return
        if isinstance(payload, _ToolExecution):
            self._tool(payload)
        elif isinstance(payload, PlanUpdated):
            self._plan(payload)
        elif isinstance(payload, SessionStarted):
            self._print(
                f"[bold]baton[/] · {escape(payload.agent)} session "
                f"{escape(payload.agent_session_id)} ({payload.how})",
                style="dim",
            )
        elif isinstance(payload, RequestCreated):
            self._print(
                f"[magenta]? {escape(payload.kind)} request {escape(payload.request_id)}:[/] "
                f"{escape(safe(payload.title))}"
            )
        elif isinstance(payload, RequestAnswered):
            answer = payload.answer if isinstance(payload.answer, dict) else {}
            verdict = answer.get("decision") or answer.get("outcome") or answer.get("action")
            self._print(
                f"[magenta]  → {escape(str(verdict))}[/] by {payload.decided_by}"
                + (f" ({escape(payload.rule)})" if payload.rule else ""),
                style="dim",
            )
        elif isinstance(payload, UsageReported):
            self._usage(payload)
        elif isinstance(payload, TurnCompleted):
            self._print(
                f"[green]✔ turn completed[/] ({escape(payload.stop_reason)}, "
                f"{payload.duration_ms / 1000:.1f}s)"
            )
        elif isinstance(payload, TurnCancelled):
            forced = " (process killed)" if payload.forced else ""
            self._print(f"[yellow]■ turn cancelled{forced}:[/] {escape(safe(payload.reason))}")
        elif isinstance(payload, TurnFailed):
            self._print(
                f"[red]✘ turn failed ({payload.error_type}):[/] {escape(safe(payload.message))}"
            )
            if payload.stderr_preview:
                self._print(Text(safe(payload.stderr_preview[-1500:]), style="dim red"))
        elif isinstance(payload, SessionFailed):
            self._print(
                f"[red]✘ session failed ({payload.error_type}):[/] {escape(safe(payload.message))}"
            )
        elif isinstance(payload, ProviderNotice | HarnessDiagnostic):
            if getattr(payload, "severity", "warning") != "info":
                self._print(
                    f"[yellow]! {payload.category}:[/] {escape(safe(payload.summary))}", style="dim"
                )
        elif isinstance(payload, FileWritten):
            self._print(
                f"[cyan]✎ wrote {escape(safe(payload.path))}[/] ({payload.bytes:,} bytes, "
                f"sha256 {payload.sha256[:12]}…)",
                style="dim",
            )
        elif isinstance(payload, SecurityApprovalBypass) or (
            isinstance(payload, SecurityUnapprovedMutation) and payload.expected
        ):
            self._print(
                f"[yellow]⚠ {event.type}:[/] {escape(safe(payload.subject))}: "
                f"{escape(safe(payload.reason))}"
            )
        elif event.type.startswith("security."):
            summary = payload.model_dump()
            self._print(
                f"[red]⛔ {event.type}:[/] {escape(safe(str(summary.get('subject'))))}: "
                f"{escape(safe(str(summary.get('reason'))))}"
            )

    def _tool(self, payload: _ToolExecution) -> None:
        title = safe(payload.title or payload.kind)
        if isinstance(payload, ToolExecutionCompleted) or payload.status in _STATUS_STYLE:
            self._running.pop(payload.tool_call_id, None)
            self._refresh()
            style = _STATUS_STYLE.get(payload.status, "white")
            mark = {"completed": "✔", "failed": "✘"}.get(payload.status, "■")
            where = " (the agent's own terminal)" if payload.agent_terminal_ids else ""
            line = Text.assemble(
                (f"{mark} ", style), (title, "bold"), (f" [{payload.kind}]{where}", "dim")
            )
            self._print(line)
            if payload.output and payload.output.tail.strip():
                lines = payload.output.tail.rstrip("\n").splitlines()
                shown = lines[-8:] if payload.status == "failed" else lines[-4:]
                more = (
                    f"  … {len(lines) - len(shown)} more lines\n" if len(lines) > len(shown) else ""
                )
                body = "\n".join("  " + line for line in shown)
                self._print(Text(more + safe(body), style="dim"))
            return
        if isinstance(payload, ToolExecutionStarted) or payload.tool_call_id not in self._running:
            self._running[payload.tool_call_id] = f"{title} [{payload.kind}]"
            self._refresh()
            if self._live is None:
                self._print(
                    Text.assemble(("⋯ ", "cyan"), (title, ""), (f" [{payload.kind}]", "dim"))
                )

    def _plan(self, payload: PlanUpdated) -> None:
        """The whole checklist when its steps change; one line per status change otherwise."""
        contents = [s.content for s in payload.steps]
        statuses: dict[str, str] = {s.step_id: s.status for s in payload.steps}
        if contents != self._plan_contents:
            self._plan_contents = contents
            table = Table.grid(padding=(0, 1))
            for step in payload.steps:
                table.add_row(_PLAN_MARK.get(step.status, "?"), Text(self._step_label(step)))
            self._print(Text(f"plan ({len(payload.steps)} steps)", style="bold dim"))
            self._print(table)
        else:
            for step in payload.steps:
                if self._plan_statuses.get(step.step_id) != step.status:
                    mark = _PLAN_MARK.get(step.status, "?")
                    self._print(Text(f"plan {mark} {self._step_label(step)}", style="dim"))
        self._plan_statuses = statuses

    @staticmethod
    def _step_label(step: PlanStep) -> str:
        label = safe(step.content)
        if step.native_status == "cancelled":
            label += " (Cancelled)"
        return label

    def _usage(self, payload: UsageReported) -> None:
        if not payload.available:
            self._print(f"usage: unavailable ({escape(payload.reason or '')})", style="dim")
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
            parts.append(f"cost {payload.cost_amount:g} {payload.cost_currency or ''}".rstrip())
        self._print("usage: " + ", ".join(parts), style="dim")

    @contextlib.contextmanager
    def paused(self) -> Iterator[None]:
        """Stop the live spinners while someone types an answer at the terminal."""
        live = self._live
        if live is None:
            yield
            return
        self._end_text()
        live.stop()
        try:
            yield
        finally:
            live.start()

    def close(self) -> None:
        self._end_text()
        if self._live is not None:
            self._live.stop()
            self._live = None
