"""The closing message and the FCoP report body (pure)."""

from baton.agents.builtin.summary import Status, StepOutcome, report_body, report_result, summarize

OK = StepOutcome(1, "sh: make", Status.SUCCEEDED, exit_code=0, output="built\n")
FAILED = StepOutcome(
    2, "sh: make test", Status.FAILED, exit_code=2, output="".join(f"line {i}\n" for i in range(30))
)
DENIED = StepOutcome(2, "file: a", Status.FAILED, reason="permission denied", denied=True)


def test_summaries() -> None:
    assert summarize([OK]) == "1 of 1 step succeeded."
    not_run = [StepOutcome(n, "x", Status.NOT_RUN) for n in (3, 4, 5)]
    assert summarize([OK, FAILED, *not_run]) == (
        "1 of 5 steps succeeded; step 2 (sh: make test) failed with exit code 2; steps 3-5 were not run."
    )
    assert (
        summarize([OK, DENIED])
        == "1 of 2 steps succeeded; step 2 (file: a) failed: permission denied."
    )
    cancelled = StepOutcome(2, "sh: sleep 9", Status.CANCELLED, reason="cancelled")
    assert summarize([OK, cancelled], cancelled=True) == (
        "Cancelled. 1 of 2 steps succeeded; step 2 (sh: sleep 9) was cancelled."
    )
    assert summarize([], cancelled=True) == "Cancelled before any step ran."
    report = StepOutcome(3, "report: write_report", Status.FAILED, reason="tool error: no task")
    assert summarize([OK], report=report, notes=["Note."]) == (
        "1 of 1 step succeeded. The report could not be filed: tool error: no task. Note."
    )


def test_report_result_is_done_only_when_every_step_succeeded() -> None:
    assert report_result([OK]) == "done"
    assert report_result([OK, FAILED]) == "blocked"
    assert report_result([]) == "done"  # nothing to run: done unless a directive says otherwise
    assert report_result([], "blocked") == "blocked" and report_result([OK], "failed") == "failed"


def test_report_body_has_a_table_and_bounded_output_tails() -> None:
    odd = StepOutcome(3, "sh: a | b", Status.SUCCEEDED, exit_code=0, output="has ``` inside\n")
    body = report_body([OK, FAILED, odd])
    assert body.startswith(
        "Runbook: 2 of 3 steps succeeded; step 2 (sh: make test) failed with exit code 2.\n"
    )
    assert "| 2 | sh: make test | failed with exit code 2 | 2 |" in body
    assert "| 3 | sh: a \\| b | succeeded | 0 |" in body
    tail = body.split("### Step 2: sh: make test\n\n```\n")[1].split("\n```")[0]
    assert tail.splitlines() == [f"line {i}" for i in range(10, 30)]
    assert "\n````\nhas ``` inside\n````" in body
