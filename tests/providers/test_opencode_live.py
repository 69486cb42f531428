"""The real OpenCode agent, offline: its wire matches its inventory, its task tool is delegation.

Runs ``opencode acp`` (installed by ``scripts/install-opencode``) against the scripted
LLM stub: the model calls OpenCode's ``task`` tool once, the subagent answers, the
parent answers. Everything OpenCode puts on the wire must be in
:data:`~baton.providers.inventory.OPENCODE_INVENTORY`, and the replay through
:class:`~baton.providers.opencode.OpenCodeExtension` must show the subagent as
``delegation.started`` then ``delegation.completed``. ``BATON_SKIP_OPENCODE=1`` skips it.
"""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import pytest

from baton.providers.inventory import GENERIC_METHODS, OPENCODE_INVENTORY

from ._replay import replay

support = pytest.importorskip("tests.support.opencode")
stub_mod = pytest.importorskip("tests.support.llm_stub")
raw = pytest.importorskip("tests.support.rawclient")

pytestmark = [
    pytest.mark.opencode,
    pytest.mark.skipif(support.skip_opencode(), reason="BATON_SKIP_OPENCODE=1"),
]


def script(request: Any) -> Any:
    if "task" in request.tool_names and not request.has_tool_result:
        return stub_mod.ToolCall(
            "task",
            {
                "description": "Survey files",
                "prompt": "List the files.",
                "subagent_type": "general",
            },
            call_id="call_task",
        )
    return stub_mod.Text("done")


async def run(workspace: Path) -> list[dict[str, Any]]:
    with stub_mod.LLMStub(cwd=workspace, script=script) as stub:
        launch = support.opencode_launch(
            stub.base_url, workspace=workspace, private_dir=workspace.parent / "agent"
        )
        client = await raw.RawClient.spawn(launch.argv, env=launch.env, cwd=launch.cwd, record=True)
        try:
            await client.initialize(timeout=60)
            session = await client.new_session(workspace, timeout=60)
            result = await client.prompt(
                session["sessionId"], "Survey with a subagent.", timeout=90
            )
            assert result["stopReason"] == "end_turn"
        finally:
            await client.close(grace=2.0)
        trace: list[dict[str, Any]] = list(client.trace)
        return trace


def test_opencode_wire_is_inventoried_and_its_task_tool_is_delegation(tmp_path: Path) -> None:
    if support.find_opencode() is None:
        pytest.skip(support.INSTALL_HINT)
    workspace = tmp_path / "workspace"
    workspace.mkdir()
    trace = asyncio.run(run(workspace))

    variants = {
        line["msg"]["params"]["update"]["sessionUpdate"]
        for line in trace
        if line["dir"] == "agent" and line["msg"].get("method") == "session/update"
    }
    methods = {
        line["msg"]["method"]
        for line in trace
        if line["dir"] == "agent"
        and "method" in line["msg"]
        and line["msg"]["method"] != "session/update"
    }
    assert variants <= OPENCODE_INVENTORY.natives("update"), variants
    assert methods <= OPENCODE_INVENTORY.natives("method") | set(GENERIC_METHODS), methods
    assert {"tool_call", "tool_call_update", "usage_update"} <= variants

    events = replay(trace, "opencode", str(workspace))
    delegation = [e for e in events if e.get("type", "").startswith("delegation.")]
    assert [e["type"] for e in delegation] == ["delegation.started", "delegation.completed"]
    child = delegation[-1]["payload"]["children"][0]
    assert (child["role"], child["description"], child["status"]) == (
        "general",
        "Survey files",
        "completed",
    )
    assert not any(e.get("payload", {}).get("category") == "unclassified" for e in events)
