"""What the terminal shows of a tool's output, a plan step, a help text, an endpoint (issue 32)."""

from __future__ import annotations

import io
import json
import socket

from rich.console import Console

from baton.cli.endpoint_check import unreachable
from baton.cli.render import HumanRenderer, plan_mark
from baton.cli.shared import reflow_help
from baton.cli.tool_output import elide, json_summary
from baton.events.model import CanonicalEvent, ToolExecutionCompleted, ToolOutput
from tests.support.records import TS

REPORT = {
    "report_id": "REPORT-c391",
    "task_id": "TASK-7f82",
    "attempt_id": "urn:uuid:b971",
    "recipient": "PM",
    "next": "Report filed. Stop now; baton submits it for review.",
}


def test_a_json_result_is_one_line_without_the_agents_orders() -> None:
    said = json_summary(json.dumps(REPORT))
    assert said == "report_id REPORT-c391, task_id TASK-7f82 (+2 more)"
    assert "Stop now" not in said
    mcp = {
        "content": [{"type": "text", "text": "Task created. Now end your turn.\nmore"}],
        "structuredContent": {"task_id": "TASK-1", "recipient": "QA"},
    }
    assert json_summary(json.dumps(mcp)) == "task_id TASK-1, recipient QA"
    text_only = {"content": [{"type": "text", "text": "Done. Ignore the rest."}], "isError": True}
    assert json_summary(json.dumps(text_only)) == "error: Done."
    assert json_summary("[1, 2, 3]") == "3 items"
    for not_json in ("plain text", "{broken", "", "42", '"a string"'):
        assert json_summary(not_json) is None, not_json


def test_long_output_keeps_its_head_and_its_tail() -> None:
    lines = [f"line {i}" for i in range(1, 31)]
    shown, hidden = elide(lines, head=2, tail=3)
    assert shown == ["line 1", "line 2", None, "line 28", "line 29", "line 30"] and hidden == 25
    assert elide(lines[:6], head=2, tail=3) == (lines[:6], 0)  # hiding one line helps nobody
    assert elide(lines, head=2, tail=3, full=True) == (lines, 0)


def _completed(output: str, status: str = "completed") -> CanonicalEvent:
    payload = ToolExecutionCompleted(
        tool_call_id="c1",
        title="sh: make test",
        kind="execute",
        status=status,
        output=ToolOutput(tail=output, total_bytes=len(output), sha256="0" * 64, truncated=False),
    )
    return CanonicalEvent(
        type=payload.TYPE,
        seq=1,
        run_id="run-7",
        session_id="s",
        turn_id="t",
        ts=TS,
        payload=payload,
    )


def test_the_view_says_how_to_see_what_it_left_out() -> None:
    buffer = io.StringIO()
    view = HumanRenderer(Console(file=buffer, width=200, highlight=False), live=False)
    view(_completed("\n".join(f"line {i}" for i in range(1, 31))))
    view.close()
    text = buffer.getvalue()
    assert "line 1\n" in text and "line 30" in text and "line 15" not in text
    assert "… 25 more lines · `baton log run-7 --full` shows all" in text
    full = io.StringIO()
    whole = HumanRenderer(Console(file=full, width=200), live=False, full=True)
    whole(_completed("\n".join(f"line {i}" for i in range(1, 31))))
    whole.close()
    assert "line 15" in full.getvalue() and "more lines" not in full.getvalue()


def test_a_denied_or_failed_step_is_never_ticked() -> None:
    assert plan_mark("completed", None) == "☑"
    assert plan_mark("completed", "completed") == "☑"
    assert plan_mark("completed", "failed") == "✘"
    assert plan_mark("completed", "cancelled") == "■"
    assert plan_mark("in_progress", "failed") == "◐"


def test_help_paragraphs_are_one_line_lists_and_code_keep_theirs() -> None:
    text = """Summary line
    that goes on.

    A paragraph wrapped
    at the source's width.

    - [ ] @QA item
      ```sh
      pytest -q
      ```
    - second item
    continued here.
    """
    assert reflow_help(text) == (
        "Summary line that goes on.\n\n"
        "A paragraph wrapped at the source's width.\n\n"
        "- [ ] @QA item\n  ```sh\n  pytest -q\n  ```\n- second item continued here."
    )


def test_an_endpoint_nobody_listens_on_is_said_in_words() -> None:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    assert "connection refused" in (unreachable(f"http://127.0.0.1:{port}/v1") or "")
    with socket.socket() as server:
        server.bind(("127.0.0.1", 0))
        server.listen(1)
        assert unreachable(f"http://127.0.0.1:{server.getsockname()[1]}/v1") is None
    assert unreachable("http:///v1") == "the URL names no host"
