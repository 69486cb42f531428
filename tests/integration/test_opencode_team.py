"""A real OpenCode agent as a baton role files its FCoP REPORT through baton's MCP server.

Issue 4's "done when": the human creates a TASK for DEV, ``baton up --until-idle`` starts
OpenCode (npm, pinned, offline against :mod:`tests.support.llm_stub`) for the role, injects
the role-scoped server (``python -m baton.role_tools.server --binding FILE``) into
``session/new`` as ``mcpServers``, the scripted model calls its ``write_report`` tool, FCoP
validation accepts the REPORT (task and attempt come from baton's binding, not from the
model), and baton submits the TASK (T3) to ``review``, where the human (its sender) is
asked to review it.

Everything but the model is real: the CLI, the daemon, the ACP session, OpenCode's MCP
client, baton's MCP server process and the ``fcop`` library.
"""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest

from baton.fcop_port.port import FcopPort
from baton.role_tools.server import SERVER_NAME
from baton.team_config import DEFAULT_TOOLS
from tests.support.llm_scripts import call_tool_then_text, find_tool
from tests.support.llm_stub import ChatRequest, LLMStub
from tests.support.opencode import (
    OFFLINE_NPM_REGISTRY,
    opencode_config,
    require_opencode,
    skip_opencode,
)
from tests.support.project import baton_in, without_isolation

pytestmark = [
    pytest.mark.opencode,
    pytest.mark.skipif(skip_opencode(), reason="BATON_SKIP_OPENCODE=1"),
]

REPORT_BODY = "Implemented the greeting; `hello` now prints hello. Nothing left."
TASK_BODY = "Make `hello` print hello, then file your report with write_report.\n"


@pytest.fixture
def repo(tmp_path: Path) -> Path:
    root = tmp_path / "repo"
    root.mkdir()
    subprocess.run(["git", "init", "-q", str(root)], check=True)
    return root


def baton(repo: Path, *args: str, timeout: float = 120) -> subprocess.CompletedProcess[str]:
    return baton_in(repo, *args, timeout=timeout)


def toml_str(value: str) -> str:
    """A TOML basic string (JSON string escapes are valid TOML)."""
    return json.dumps(value)


def use_opencode_for_dev(
    repo: Path, stub: LLMStub, *, permission: dict[str, str] | None = None
) -> None:
    """Add an ``opencode-stub`` profile to ``baton.toml`` and make DEV run on it."""
    config = opencode_config(stub.base_url, permission=permission)
    path = repo / "baton.toml"
    text = path.read_text()
    dev = '[team.roles.DEV]\nagent = "builtin"'
    assert dev in text, "baton init's team layout changed"
    text = text.replace(dev, '[team.roles.DEV]\nagent = "opencode-stub"')
    command = ", ".join(toml_str(a) for a in (str(require_opencode()), "acp"))
    text += (
        "\n[profiles.opencode-stub]\n"
        'extends = "opencode"\n'
        f"command = [{command}]\n"
        f"env = {{ OPENCODE_CONFIG_CONTENT = {toml_str(json.dumps(config))}, "
        f"npm_config_registry = {toml_str(OFFLINE_NPM_REGISTRY)} }}\n"
        "initialize_timeout = 60\n"
        "session_timeout = 60\n"
    )
    path.write_text(text)


@pytest.mark.parametrize(
    "permission",
    [
        pytest.param(None, id="opencode-default"),  # OpenCode runs MCP tools without asking
        pytest.param({f"{SERVER_NAME}_*": "ask"}, id="ask"),  # DEV's preset "all" allows once
    ],
)
def test_an_opencode_role_files_a_valid_report_through_mcp(
    repo: Path, permission: dict[str, str] | None
) -> None:
    script = call_tool_then_text("write_report", {"result": "done", "body": REPORT_BODY})
    with LLMStub(cwd=repo, script=script) as stub:
        assert baton(repo, "init").returncode == 0
        without_isolation(repo)
        use_opencode_for_dev(repo, stub, permission=permission)
        (repo / "TASK.md").write_text(TASK_BODY)
        created = baton(
            repo, "task", "new", "--to", "DEV", "--subject", "Greeting",
            "--body-file", "TASK.md", "--json",
        )  # fmt: skip
        assert created.returncode == 0, created.stderr
        task_id = json.loads(created.stdout)["task_id"]
        up = baton(repo, "up", "--until-idle", "--json")
        assert up.returncode == 0, (up.stderr[-3000:], stub.replies())
    events = [json.loads(line) for line in up.stdout.splitlines() if line.startswith("{")]
    types = [e["type"] for e in events]

    # OpenCode offered baton's role-scoped tools as "<server>_<tool>" (no leader tools for
    # DEV) and the model called write_report once, then ended the turn with text.
    offered = [ChatRequest(r.body, i).tool_names for i, r in enumerate(stub.completions())]
    tools = next((names for names in offered if names), [])
    assert find_tool(tools, "write_report") == f"{SERVER_NAME}_write_report", offered
    mcp_tools = sorted(t for t in tools if t.startswith(f"{SERVER_NAME}_"))
    assert mcp_tools == [f"{SERVER_NAME}_{t}" for t in sorted(DEFAULT_TOOLS)]
    assert stub.replies().count(f"tool:{SERVER_NAME}_write_report") == 1, stub.replies()

    # The agent session: one OpenCode session, the MCP call completed, one turn.
    assert types.count("session.started") == 1
    calls = [
        e["payload"]
        for e in events
        if e["type"] == "tool.execution.completed" and "write_report" in e["payload"]["title"]
    ]
    assert len(calls) == 1 and calls[0]["status"] == "completed", calls
    assert calls[0]["raw_input"] == {"result": "done", "body": REPORT_BODY}
    assert types.count("turn.completed") == 1
    requests = [e["payload"] for e in events if e["type"] == "request.created"]
    asked = [r for r in requests if r["kind"] == "permission"]
    if permission is None:
        assert not asked, asked
    else:
        assert [r["title"] for r in asked] == [f"{SERVER_NAME}_write_report"]
        answers = [e["payload"] for e in events if e["type"] == "request.answered"]
        assert [(a["decided_by"], a["answer"]["decision"]) for a in answers] == [
            ("policy", "allow")
        ]

    # The REPORT: valid FCoP, identity filled in by baton's binding, not by the model.
    reports = sorted((repo / "fcop" / "reports").glob("REPORT-*.md"))
    assert len(reports) == 1, reports
    port = FcopPort(repo)  # also primes fcop's validators (its jsonschema import warns)
    fields = port.inspect_envelope(reports[0])  # parsed and validated by FCoP Core
    status = json.loads(baton(repo, "status", "--json").stdout)
    (task,) = [t for t in status["board"]["open"] if t["task_id"] == task_id]
    assert fields["subject_ref"] == task_id
    assert task["attempt_id"] and fields["attempt_id"] == task["attempt_id"]
    assert (fields["sender"], fields["recipient"]) == ("DEV", "ADMIN")
    assert (fields["result"], fields["report_kind"]) == ("done", "final")
    assert REPORT_BODY in reports[0].read_text()
    from fcop.workspace import validate_workspace  # after FcopPort primed it (see above)

    validation = validate_workspace(repo)
    assert validation["valid"], validation["errors"]

    # T3: the TASK is submitted and waits for its reviewer, the human who created it.
    assert task["stage"] == "review" and task["report_ref"] == fields["report_id"]
    counts = status["board"]["counts"]
    assert (counts["review"], counts["active"], counts["inbox"]) == (1, 0, 0)
    inbox = baton(repo, "inbox", "--json")
    assert inbox.returncode == 0, inbox.stderr
    pending = [json.loads(line) for line in inbox.stdout.splitlines() if line.strip()]
    reviews = [r for r in pending if r["kind"] == "review"]
    assert len(reviews) == 1, pending
    assert reviews[0]["document"]["task_id"] == task_id
    assert reviews[0]["document"]["report_ref"] == fields["report_id"]
    assert [r["request_id"] for r in requests if r["kind"] == "review"] == [
        reviews[0]["request_id"]
    ]
