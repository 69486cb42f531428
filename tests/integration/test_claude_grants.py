"""Issue 27 with the real Claude agent (``claude-agent-acp``, pinned) against a scripted server.

- A repository's ordinary ``.claude/settings.json`` with a ``permissions.allow`` list is
  admitted, and its allow list approves nothing: Claude loads only its private user
  settings (``settingSources``), so it still asks baton, which decides.
- A human's grant for a command prefix answers later commands of that prefix (``allow_once``
  each time, named ``grant:<id>``), never a command line with a shell operator, and no
  longer once revoked.
"""

from __future__ import annotations

import asyncio
import json
import re
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from baton.request_model.documents import GrantSpec, PermissionAnswer
from baton.requests.grant_book import GrantBook
from baton.requests.policy import Policy
from baton.runner.requests_broker import RequestBroker
from tests.support.agents import claude_profile
from tests.support.anthropic_stub import AnthropicStub, MessagesRequest
from tests.support.harness import Harness
from tests.support.model_server import Reply, Text, ToolCall
from tests.support.real_session import assert_wire_conforms, open_real

pytestmark = [pytest.mark.slow, pytest.mark.real_agent]


def _repo_with_allow_list(workspace: Path) -> None:
    (workspace / ".git").mkdir(exist_ok=True)
    settings = {
        "model": "claude-sonnet",
        "permissions": {"allow": ["Write", "Edit", "Bash(*)"], "deny": ["Read(.env)"]},
    }
    (workspace / ".claude").mkdir(exist_ok=True)
    (workspace / ".claude" / "settings.json").write_text(json.dumps(settings))


async def test_a_repository_allow_list_approves_nothing(harness: Harness) -> None:
    _repo_with_allow_list(harness.workspace)
    with AnthropicStub(cwd=harness.workspace) as stub:
        session = await open_real(harness, claude_profile(stub.origin), preset="none")
        outcome = await session.prompt("write hello.txt", timeout=180)
    assert outcome.status == "completed"
    assert not harness.of("security.admission_refused"), "ordinary settings are admitted"
    # Claude asked (its repository allow list was not loaded), and baton's policy said no.
    created = harness.of("request.created")
    assert [c.kind for c in created] == ["permission"]
    [answered] = harness.of("request.answered")
    assert answered.answer["decision"] == "deny" and answered.rule.startswith("preset-none")
    assert not (harness.workspace / stub.file_name).exists()
    assert not harness.of("security.unapproved_mutation")
    assert outcome.unapproved_mutations == 0
    assert_wire_conforms(harness)


def _commands(workspace: Path) -> Callable[[MessagesRequest], Reply]:
    """Each prompt ``RUN<<COMMAND>>`` becomes one Bash call; after its result, a short text."""

    def script(req: MessagesRequest) -> Reply:
        if req.is_side_request:
            return Text("Commands")
        last = req.messages[-1] if req.messages else {}
        content = last.get("content")
        blocks = content if isinstance(content, list) else []
        if any(isinstance(b, dict) and b.get("type") == "tool_result" for b in blocks):
            return Text("Done.")
        # The latest RUN<<…>> the user sent (Claude adds reminders around prompts).
        asked = re.findall(r"RUN<<(.+?)>>", json.dumps(req.messages))
        command = asked[-1].strip() if asked else "true"
        return ToolCall(
            "Bash",
            {"command": command, "description": "run it"},
            call_id=f"toolu_{req.index:04d}",
        )

    return script


async def _answer_first_request(harness: Harness, answer: PermissionAnswer) -> str:
    async with asyncio.timeout(150):
        while not harness.of("request.created"):
            await asyncio.sleep(0.05)
    request_id = str(harness.of("request.created")[0].request_id)
    await harness.ledger.answer(request_id, answer, decided_by="human", rule="cli")
    return request_id


async def test_a_grant_answers_the_prefix_never_a_compound_line(harness: Harness) -> None:
    broker = RequestBroker(harness.ledger, Policy.preset("reads"), wait_timeout=120)
    ws = harness.workspace
    with AnthropicStub(cwd=ws, script=_commands(ws)) as stub:
        session = await open_real(harness, claude_profile(stub.origin), broker=broker)
        first = asyncio.create_task(session.prompt("RUN<<touch one.txt>>", timeout=180))
        grant_answer = PermissionAnswer(decision="allow", grant=GrantSpec(scope="run", uses=5))
        await _answer_first_request(harness, grant_answer)
        assert (await first).status == "completed"
        assert (ws / "one.txt").exists()
        [grant] = await GrantBook(harness.ledger.store).list()
        assert (grant.tool_kind, grant.subject, grant.scope) == ("execute", "touch", "run")

        # The same program again: answered by the grant, allow_once, no human.
        outcome = await session.prompt("RUN<<touch two.txt>>", timeout=180)
        assert outcome.status == "completed" and (ws / "two.txt").exists()
        by_grant = [
            a for a in harness.of("request.answered") if a.rule == f"grant:{grant.grant_id}"
        ]
        assert len(by_grant) == 1 and by_grant[0].decided_by == "policy"
        used = await GrantBook(harness.ledger.store).get(grant.grant_id)
        assert (used.uses, used.uses_left) == (1, 4)

        # A shell operator: no argv to match, so it asks (and nobody answers: denied).
        broker.wait_timeout = 0.5
        outcome = await session.prompt("RUN<<touch three.txt; touch pwned.txt>>", timeout=180)
        assert outcome.status == "completed"
        assert not (ws / "pwned.txt").exists() and not (ws / "three.txt").exists()
        last: Any = harness.of("request.created")[-1]
        assert last.rule == "preset-reads:escalate:execute"

        # Revoked: the next touch asks again.
        await GrantBook(harness.ledger.store).revoke(grant.grant_id)
        outcome = await session.prompt("RUN<<touch four.txt>>", timeout=180)
        assert not (ws / "four.txt").exists()
        assert harness.of("request.created")[-1].rule == "preset-reads:escalate:execute"
    # Claude offered "Yes, and don't ask again" (allow_always): baton never picked it.
    picked = {a.answer.get("option_id") for a in harness.of("request.answered")}
    assert picked <= {"allow-once", "reject"} and "allow-once" in picked
    assert_wire_conforms(harness)
