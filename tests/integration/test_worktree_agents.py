"""Real agents edit without asking in a task tree's own worktree; the diff is what is approved.

Issue 26's "done when" for real agents: OpenCode and Claude (``claude-agent-acp``), each npm,
pinned, offline against its scripted model server, run as DEV through ``baton up`` in a fresh
git repository. The task tree gets its branch and worktree; the role session there runs in the
agent's edit mode (Claude ``acceptEdits``, OpenCode with ``edit: allow``), chosen by baton
because the session works in a tree's worktree. The scripted model then

1. writes ``feature.txt`` through the agent's own edit tool: no permission request, the
   audit records it as allowed by the worktree rule (``security.mutation_allowed``), not as
   an unapproved mutation;
2. runs a shell command (``mkdir``/``touch``, which Claude's ``acceptEdits`` alone would run
   unasked): that still asks (a permission request, allowed by DEV's policy);
3. files its REPORT through baton's role tools.

The file is on the tree's branch (the turn's checkpoint), not in the main checkout; the review
request carries the diff; ``baton answer … --approve`` and ``baton up --until-idle`` merge it
into ``main``. Everything the agent and baton said to each other, both directions, is recorded
by a tap and checked against the official ACP schema.
"""

from __future__ import annotations

import json
import os
import subprocess
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from baton.providers.catalog import CLAUDE
from baton.worktrees.naming import branch_name, tree_label
from tests.support.acp_schema import WireValidator
from tests.support.agents import DUMMY_KEY, require_agent
from tests.support.anthropic_stub import AnthropicStub
from tests.support.llm_scripts import find_tool
from tests.support.llm_stub import LLMStub
from tests.support.model_server import Reply, ScriptedServer, Text, ToolCall
from tests.support.opencode import (
    OFFLINE_NPM_REGISTRY,
    opencode_config,
    require_opencode,
    skip_opencode,
)
from tests.support.project import baton_in, commit_all
from tests.support.wiretap import read_tap, tapped

pytestmark = [pytest.mark.slow, pytest.mark.real_agent]

SUBJECT = "Add the feature file"
FILE = "feature.txt"
CONTENT = "written by the agent, unasked, in its worktree\n"
COMMAND = "mkdir -p build && touch build/checked.txt"
"""A filesystem command: Claude's acceptEdits alone would run it unasked."""
REPORT = "Wrote feature.txt and checked it. Nothing left."


@dataclass(frozen=True)
class Agent:
    """How one real agent runs as DEV: its model server, its tools, its profile."""

    stub: type[ScriptedServer]
    write: Callable[[Path], tuple[str, dict[str, Any]]]
    shell: tuple[str, dict[str, Any]]
    profile: Callable[[ScriptedServer, list[str]], str]
    """The ``[profiles.dev-agent]`` table, given the stub and the tapped command."""
    command: Callable[[], list[str]]
    mode: str | None


def _toml(value: Any) -> str:
    return json.dumps(value)  # JSON strings and arrays of strings are valid TOML


def _claude_profile(stub: ScriptedServer, command: list[str]) -> str:
    return (
        "[profiles.dev-agent]\n"
        'extends = "claude"\n'
        f"command = {_toml(command)}\n"
        f"endpoint = {_toml(stub.origin)}\n"
        'credentials = ["ANTHROPIC_API_KEY"]\n'
        # Claude Code defers MCP tools behind ToolSearch; the script wants them offered.
        'env = { ENABLE_TOOL_SEARCH = "false" }\n'
        "initialize_timeout = 120\n"
        "session_timeout = 120\n"
    )


def _opencode_profile(stub: ScriptedServer, command: list[str]) -> str:
    base_url = f"{stub.origin}/v1"
    config = json.dumps(opencode_config(base_url))  # no permission: baton's is applied
    return (
        "[profiles.dev-agent]\n"
        'extends = "opencode"\n'
        f"command = {_toml(command)}\n"
        f"env = {{ OPENCODE_CONFIG_CONTENT = {_toml(config)}, "
        f"npm_config_registry = {_toml(OFFLINE_NPM_REGISTRY)} }}\n"
        "initialize_timeout = 120\n"
        "session_timeout = 120\n"
    )


AGENTS: dict[str, Agent] = {
    "claude": Agent(
        AnthropicStub,
        write=lambda tree: ("Write", {"file_path": str(tree / FILE), "content": CONTENT}),
        shell=("Bash", {"command": COMMAND, "description": "Check the feature"}),
        profile=_claude_profile,
        command=lambda: [str(require_agent(CLAUDE).executable)],
        mode="acceptEdits",
    ),
    "opencode": Agent(
        LLMStub,
        write=lambda tree: ("write", {"filePath": str(tree / FILE), "content": CONTENT}),
        shell=("bash", {"command": COMMAND, "description": "Check the feature"}),
        profile=_opencode_profile,
        command=lambda: [str(require_opencode()), "acp"],
        mode=None,
    ),
}


def _results(req: Any) -> int:
    """How many tool results the conversation holds (Messages blocks or chat tool messages)."""
    if hasattr(req, "blocks"):
        return len(req.blocks("tool_result"))
    return sum(1 for m in req.messages if m.get("role") == "tool")


def script_for(agent: Agent, tree: Path) -> Callable[[Any], Reply]:
    """Write the file, run a command, file the report, then end the turn with text."""

    def script(req: Any) -> Reply:
        report = find_tool(req.tool_names, "write_report")
        if report is None:
            return Text("I do not have baton's role tools.")
        step = _results(req)
        if step == 0:
            return ToolCall(*agent.write(tree), call_id="call_write")
        if step == 1:
            return ToolCall(*agent.shell, call_id="call_shell")
        if step == 2:
            return ToolCall(report, {"result": "done", "body": REPORT}, call_id="call_report")
        return Text("Done: feature.txt is written and the report filed.")

    return script


def git(repo: Path, *args: str) -> str:
    done = subprocess.run(["git", *args], cwd=repo, capture_output=True, text=True, check=True)
    return done.stdout.strip()


def events_of(done: subprocess.CompletedProcess[str]) -> list[dict[str, Any]]:
    return [json.loads(line) for line in done.stdout.splitlines() if line.startswith("{")]


def payloads(events: list[dict[str, Any]], event_type: str) -> list[dict[str, Any]]:
    return [e["payload"] for e in events if e["type"] == event_type]


@pytest.mark.parametrize("name", sorted(AGENTS))
def test_a_real_agent_edits_unasked_in_its_worktree_and_approval_merges_it(
    tmp_path: Path, name: str
) -> None:
    if name == "opencode" and skip_opencode():
        pytest.skip("BATON_SKIP_OPENCODE=1")
    agent = AGENTS[name]
    repo = tmp_path / "repo"
    repo.mkdir()
    subprocess.run(["git", "init", "-q", "-b", "main", str(repo)], check=True)
    assert baton_in(repo, "init").returncode == 0
    commit_all(repo)
    (repo / "TASK.md").write_text(f"Write {FILE}, check it with a command, then report.\n")
    created = baton_in(
        repo, "task", "new", "--to", "DEV", "--subject", SUBJECT, "--body-file", "TASK.md",
        "--json",
    )  # fmt: skip
    assert created.returncode == 0, created.stderr
    task_id = json.loads(created.stdout)["task_id"]
    tree = repo / ".baton" / "worktrees" / tree_label(task_id, SUBJECT)
    branch = branch_name(task_id, SUBJECT)
    wire = tmp_path / "wire.ndjson"
    env = {"ANTHROPIC_API_KEY": DUMMY_KEY, "PATH": os.environ["PATH"]}

    with agent.stub(cwd=repo, script=script_for(agent, tree)) as stub:
        config = repo / "baton.toml"
        text = config.read_text()
        dev = '[team.roles.DEV]\nagent = "builtin"'
        assert dev in text, "baton init's team layout changed"
        text = text.replace(dev, '[team.roles.DEV]\nagent = "dev-agent"')
        config.write_text(text + "\n" + agent.profile(stub, tapped(agent.command(), wire)))
        up = baton_in(repo, "up", "--until-idle", "--json", extra_env=env, timeout=600)
        assert up.returncode == 0, (up.stderr[-3000:], stub.replies())
    events = events_of(up)

    # One DEV session, in the tree's worktree, in the agent's edit mode: baton chose it.
    [started] = payloads(events, "session.started")
    assert started["approval"] == "contained_edits", started
    if agent.mode is not None:
        assert started["current_mode"] == agent.mode
    assert not payloads(events, "security.approval_refused")

    # The edit: written by the agent's own tool, no permission request, allowed by the rule.
    assert (tree / FILE).read_text() == CONTENT
    [allowed] = payloads(events, "security.mutation_allowed")
    assert (allowed["rule"], allowed["path"], allowed["kind"]) == ("worktree", FILE, "edit")
    assert not payloads(events, "security.unapproved_mutation")
    asked = [r for r in payloads(events, "request.created") if r["kind"] == "permission"]
    assert all(":edit" not in (r["rule"] or "") for r in asked), asked

    # The command still asked: a permission request for it, decided by DEV's policy.
    commands = [r for r in asked if (r["rule"] or "").endswith(":execute")]
    assert len(commands) == 1, asked
    assert commands[0]["title"] == COMMAND, commands

    # On the tree's branch (checkpointed), not in the main checkout.
    assert not (repo / FILE).exists()
    assert git(repo, "show", f"{branch}:{FILE}") + "\n" == CONTENT
    assert git(repo, "ls-tree", "-r", "--name-only", branch, "build") == "build/checked.txt"

    # The review request carries the diff; approving merges it into main.
    inbox = baton_in(repo, "inbox", "--json")
    reviews = [json.loads(line) for line in inbox.stdout.splitlines() if line.strip()]
    [review] = [r for r in reviews if r["kind"] == "review"]
    changes = review["document"]["changes"]
    files = {(f["status"], f["path"]) for f in changes["files"]}
    assert files == {("A", FILE), ("A", "build/checked.txt")}
    assert f"+{CONTENT.strip()}" in changes["diff"] and changes["base"] == "main"
    answered = baton_in(repo, "answer", review["request_id"], "--approve")
    assert answered.returncode == 0, answered.stderr
    merged = baton_in(repo, "up", "--until-idle", extra_env=env, timeout=600)
    assert merged.returncode == 0, merged.stderr[-3000:]
    assert (repo / FILE).read_text() == CONTENT
    assert git(repo, "show", f"main:{FILE}") + "\n" == CONTENT
    assert git(repo, "branch", "--list", branch) == ""

    # Both directions of the wire conform to the official ACP schema.
    records = read_tap(wire)
    assert records, "nothing was recorded on the wire"
    assert WireValidator.load().validate(records) == []
