"""The real OpenCode agent (npm, pinned) driven through baton's runner, offline.

OpenCode talks to a scripted OpenAI-compatible endpoint on loopback
(``tests/support/llm_stub.py``); everything between it and baton is real: the
process group, the private launch environment, ACP over stdio, the normalizer,
the ledger and the store.
"""

from __future__ import annotations

import asyncio
import dataclasses
import json
import os
from collections.abc import AsyncIterator
from types import MappingProxyType
from typing import Any

import pytest

from baton.agent_profile import AgentProfile
from baton.providers.catalog import OPENCODE
from baton.runner.session import AgentSession
from tests.support.harness import Harness
from tests.support.llm_stub import LLMStub
from tests.support.opencode import (
    OFFLINE_NPM_REGISTRY,
    PERMISSION_ASK,
    opencode_config,
    require_opencode,
    skip_opencode,
)

pytestmark = [
    pytest.mark.opencode,
    pytest.mark.skipif(skip_opencode(), reason="BATON_SKIP_OPENCODE=1"),
]


def profile_for(stub: LLMStub, permission: dict[str, str] | None = None) -> AgentProfile:
    config = opencode_config(stub.base_url, permission=permission)
    return dataclasses.replace(
        OPENCODE,
        command=(str(require_opencode()), "acp"),
        env=MappingProxyType(
            {
                **OPENCODE.env,
                "OPENCODE_CONFIG_CONTENT": json.dumps(config),
                "npm_config_registry": OFFLINE_NPM_REGISTRY,
            }
        ),
        initialize_timeout=60.0,
        session_timeout=60.0,
    )


async def open_opencode(harness: Harness, profile: AgentProfile, **kwargs: Any) -> AgentSession:
    broker = kwargs.pop("requests", None) or harness.baton.broker(
        kwargs.pop("preset", "reads"), wait_timeout=0, notify=False
    )
    session = await harness.baton.open_session(
        profile,
        run=await harness.run(),
        requests=broker,
        workspace=harness.workspace,
        environ={"PATH": os.environ["PATH"]},
        **kwargs,
    )
    harness.sessions.append(session)
    return session


@pytest.fixture
async def stub(harness: Harness) -> AsyncIterator[LLMStub]:
    with LLMStub(cwd=harness.workspace) as s:
        yield s


async def test_a_turn_streams_text_writes_a_file_and_ends(harness: Harness, stub: LLMStub) -> None:
    # No permission config of the user's: the built-in profile's OPENCODE_PERMISSION still
    # makes OpenCode ask (its default writes unasked), and the policy allows.
    session = await open_opencode(harness, profile_for(stub), preset="all")
    outcome = await session.prompt("write the file", timeout=120)
    assert outcome.status == "completed" and outcome.stop_reason == "end_turn"
    assert (harness.workspace / stub.file_name).read_text() == stub.file_content
    assert [c.kind for c in harness.of("request.created")] == ["permission"]
    assert harness.of("session.started")[0].approval == "asks"
    assert not harness.of("security.unapproved_mutation")
    done = harness.of("tool.execution.completed")
    assert done and done[0].kind == "edit" and done[0].status == "completed"
    assert [loc.path for loc in done[0].locations] == [stub.file_name], (
        "paths are workspace-relative"
    )
    text = "".join(t.text for t in harness.of("transcript.assistant"))
    assert stub.text in text
    assert harness.types().count("turn.completed") == 1
    started = harness.of("session.started")[0]
    assert started.how == "new" and any(o["id"] == "model" for o in started.config_options)


async def test_edits_ask_permission_and_go_through_baton(harness: Harness, stub: LLMStub) -> None:
    session = await open_opencode(harness, profile_for(stub, PERMISSION_ASK), preset="all")
    outcome = await session.prompt("write the file", timeout=120)
    assert outcome.status == "completed"
    created = harness.of("request.created")
    assert created and created[0].kind == "permission"
    answered = harness.of("request.answered")
    assert answered[0].decided_by == "policy" and answered[0].answer["decision"] == "allow"
    assert len(harness.of("request.delivered")) == len(created)
    assert (harness.workspace / stub.file_name).read_text() == stub.file_content


async def test_denied_edit_leaves_the_workspace_untouched(harness: Harness, stub: LLMStub) -> None:
    session = await open_opencode(harness, profile_for(stub, PERMISSION_ASK), preset="none")
    await session.prompt("write the file", timeout=120)
    assert harness.of("request.answered")[0].answer["decision"] == "deny"
    assert not (harness.workspace / stub.file_name).exists()


async def test_cancel_ends_the_turn_cancelled(harness: Harness) -> None:
    with LLMStub(cwd=harness.workspace, script="hang") as stub:
        session = await open_opencode(harness, profile_for(stub))
        prompt = asyncio.create_task(session.prompt("hang please", timeout=120))
        await asyncio.to_thread(stub.stalled.wait, 60)
        await session.cancel("test cancel")
        outcome = await asyncio.wait_for(prompt, 60)
        stub.release()
    assert outcome.status == "cancelled"
    cancelled = harness.of("turn.cancelled")
    assert len(cancelled) == 1 and not cancelled[0].forced


async def test_session_load_replays_without_recounting(harness: Harness, stub: LLMStub) -> None:
    root = harness.tmp / "opencode-root"
    first = await open_opencode(harness, profile_for(stub), persistent_root=root)
    await first.prompt("write the file", timeout=120)
    session_id = first.agent_session_id
    await first.close()
    before = len(harness.of("transcript.assistant"))
    second = await open_opencode(
        harness,
        profile_for(stub),
        persistent_root=root,
        resume_session_id=session_id,
        recovery=("load",),
    )
    started = harness.of("session.started")[-1]
    assert started.how == "load" and started.agent_session_id == session_id
    assert started.replayed_updates > 0
    assert len(harness.of("transcript.assistant")) == before, "replayed history is not new events"
    outcome = await second.prompt("write the file again", timeout=120)
    assert outcome.status == "completed"


async def test_the_wire_conforms_to_the_acp_schema_both_ways(
    harness: Harness, stub: LLMStub
) -> None:
    """Permission asked, edit written through baton's fs/write_text_file: all schema-valid."""
    from tests.support.real_session import assert_wire_conforms, open_real

    session = await open_real(harness, profile_for(stub, PERMISSION_ASK), preset="all")
    outcome = await session.prompt("write the file", timeout=120)
    assert outcome.status == "completed"
    records = assert_wire_conforms(harness)
    methods = {r["msg"].get("method") for r in records}
    assert {"session/request_permission", "fs/write_text_file"} <= methods
