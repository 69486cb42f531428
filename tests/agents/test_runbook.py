"""The runbook format (pure parsing)."""

from hypothesis import given
from hypothesis import strategies as st

from baton.agents.builtin.runbook import (
    Delegation,
    FileStep,
    McpStep,
    ShellStep,
    label,
    parse_runbook,
)


def test_steps_are_the_fenced_blocks_with_known_info_strings_in_order() -> None:
    runbook = parse_runbook(
        "Intro text.\n"
        "```sh\nmake\nmake test\n```\n"
        "```python\nprint('not a step')\n```\n"
        "~~~bash\necho tilde\n~~~\n"
        "```file docs/a b.md\n# Title\n```\n"
        '```mcp fcop.write_report\n{"result": "done"}\n```\n'
        "```shell\ntrue\n```"
    )
    assert runbook.steps == (
        ShellStep("sh", "make\nmake test\n"),
        ShellStep("bash", "echo tilde\n"),
        FileStep("docs/a b.md", "# Title\n"),
        McpStep("fcop.write_report", {"result": "done"}),
        ShellStep("sh", "true\n"),
    )
    assert runbook.narrative == ("Intro text.",)
    assert runbook.has_report_step


def test_fences_follow_commonmark() -> None:
    text = "````sh\necho '```sh'\n```\necho still inside\n````\n  ```sh\n  indented\n    more\n  ```\n```sh\nunclosed\n"
    assert parse_runbook(text).steps == (
        ShellStep("sh", "echo '```sh'\n```\necho still inside\n"),
        ShellStep("sh", "indented\n  more\n"),
        ShellStep("sh", "unclosed\n"),
    )


def test_mcp_arguments() -> None:
    steps = parse_runbook(
        "```mcp echo\n```\n```mcp a.b\n[1]\n```\n```mcp c\n{oops\n```\n```mcp\n{}\n```\n"
    ).steps
    assert steps[0] == McpStep("echo", {})
    assert steps[1] == McpStep("a.b", {}, "arguments must be a JSON object")
    assert isinstance(steps[2], McpStep) and (steps[2].error or "").startswith(
        "arguments are not valid JSON"
    )
    assert steps[3] == McpStep("", {})
    assert isinstance(steps[1], McpStep) and steps[1].tool == "b"


def test_delegations_take_the_lines_indented_under_them() -> None:
    runbook = parse_runbook(
        "- [ ] @DEV build it\n"
        "    details one\n"
        "\n"
        "      deeper\n"
        "    ```sh\n"
        "    make\n"
        "    ```\n"
        "- [ ] @QA_2 test it\n"
        "- [x] @OPS done already\n"
        "- [ ] @dev lower case\n"
        "- [ ] @PM\n"
        "\n"
        "after\n"
    )
    assert runbook.delegations == (
        Delegation("DEV", "build it", "build it\ndetails one\n\n  deeper\n```sh\nmake\n```"),
        Delegation("QA_2", "test it", "test it", after=(0,)),
    )
    assert runbook.steps == ()
    assert "after" in runbook.narrative


def test_checklist_items_wait_for_the_previous_one_unless_they_say_after() -> None:
    runbook = parse_runbook(
        "- [ ] @DEV build\n"
        "- [ ] @QA test\n"
        "  after: none\n"
        "- [ ] @DEV fix\n"
        "  after: @QA, 1\n"
        "- [ ] @OPS ship\n"
        "  after: @DEV\n"
        "  ```file notes.yaml\n"
        "  after: not a directive inside a fence\n"
        "  ```\n"
        "- [ ] @PM close\n"
        "  after: @NOBODY\n"
    )
    after = [(d.role, d.after, d.error) for d in runbook.delegations]
    assert after == [
        ("DEV", (), None),
        ("QA", (), None),
        ("DEV", (1, 0), None),
        ("OPS", (2,), None),  # the latest earlier DEV item
        ("PM", (), "after: '@NOBODY' names no earlier checklist item"),
    ]
    ops = runbook.delegations[3]
    assert "after: not a directive inside a fence" in ops.body and "after: @DEV" not in ops.body


def test_result_directive_and_report_fence() -> None:
    runbook = parse_runbook("baton-result: Blocked\n\n````report\n| a | b |\n> quoted\n````\n")
    assert runbook.result == "blocked" and runbook.report == "| a | b |\n> quoted\n"
    assert runbook.steps == () and "baton-result" not in "".join(runbook.narrative)
    assert parse_runbook("baton-result: maybe\n").result is None


def test_directives_outside_fences_only() -> None:
    assert parse_runbook("Continue-On-Error: TRUE\nbaton-report: none\n").continue_on_error
    assert not parse_runbook("baton-report: none\n").auto_report
    fenced = parse_runbook("```sh\ncontinue-on-error: true\nbaton-report: none\n```\n")
    assert not fenced.continue_on_error and fenced.auto_report


def test_labels_are_one_short_line() -> None:
    assert label(ShellStep("sh", "\n\n  make test  \nmore\n")) == "sh: make test; more"


def test_a_multi_line_step_is_titled_by_what_it_does() -> None:
    # Short: the whole script, so every surface shows what runs.
    short = "python3 --version\n# the suite\npytest -q"
    assert label(ShellStep("sh", short)) == "sh: python3 --version; pytest -q"
    # Long: the first command that does something, and how many more there are.
    long = (
        "set -euo pipefail\ncd app\npython3 --version\npip install -e . --quiet\n"
        "pytest -q tests/unit tests/integration --maxfail=1 -x --durations=5\n"
        "echo finished the whole suite and everything after it"
    )
    assert label(ShellStep("sh", long)) == (
        "sh: pytest -q tests/unit tests/integration --maxfail=1 -x --durations=5 (+5 more)"
    )
    # Nothing but setup: the first line stands.
    setup = "cd a\n" + "echo " + "x" * 130
    assert label(ShellStep("sh", setup)).startswith("sh: cd a (+1 more)")
    assert all(len(label(ShellStep("sh", s))) <= 120 for s in (short, long, setup, "x" * 500))
    assert label(FileStep("a.txt", "")) == "file: a.txt"
    assert label(McpStep("s.t", {})) == "mcp: s.t"
    long = label(ShellStep("bash", "x" * 500))
    assert len(long) == 120 and long.endswith("…")


@given(st.text(alphabet=st.sampled_from("ab `~\n-[]@X:\r")) | st.text())
def test_any_text_parses_into_what_it_says(text: str) -> None:
    """Never raises; a step or a delegation only comes from text that holds it."""
    runbook = parse_runbook(text)
    plain = text.replace("\r", "")
    if "```" not in text and "~~~" not in text:
        assert runbook.steps == ()
    for step in runbook.steps:
        body = getattr(step, "command", None) or getattr(step, "content", None) or ""
        assert body.strip() in plain
    if "@" not in text:
        assert runbook.delegations == ()
