"""The opt-in compatibility mode with the real stock ``fcop-mcp`` 4.0.5 (its own venv).

The server must act on the project baton names with ``--root``, never on whatever
directory it happens to start in (the home-directory pollution incident in fcop.md §6).
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest
from mcp import ClientSession, StdioServerParameters
from mcp.client.stdio import stdio_client

from baton.fcop_port.project import init_project
from baton.role_tools.server import fcop_mcp_config
from baton.team_config import FcopMcpCompat

REPO = Path(__file__).resolve().parents[2]
PYTHON = REPO / ".cache" / "fcop-mcp" / "bin" / "python"

pytestmark = pytest.mark.skipif(
    os.environ.get("BATON_SKIP_FCOP_MCP") == "1", reason="BATON_SKIP_FCOP_MCP=1"
)


async def test_stock_server_acts_on_the_root_baton_names(tmp_path: Path) -> None:
    assert PYTHON.exists(), "fcop-mcp's venv is missing: run scripts/install-fcop-mcp"
    project = tmp_path / "project"
    project.mkdir()
    result = init_project(project)
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    entry = fcop_mcp_config(FcopMcpCompat(enabled=True, python=PYTHON), project)
    assert entry["args"][-2:] == ["--root", str(project.resolve())]
    params = StdioServerParameters(
        command=entry["command"],
        args=entry["args"],
        env={e["name"]: e["value"] for e in entry["env"]},
        cwd=str(elsewhere),  # a wrong cwd must not matter
    )
    async with stdio_client(params) as (read, write), ClientSession(read, write) as session:
        await session.initialize()
        tools = {t.name for t in (await session.list_tools()).tools}
        assert {"create_task", "claim_task", "write_report", "submit_task"} <= tools
        answer = await session.call_tool("inspect_workspace", {})
        text = "".join(getattr(c, "text", "") for c in answer.content)
    assert result.workspace.workspace_id in text
    assert not (elsewhere / "fcop").exists(), "nothing written where the server started"
    assert json.loads((project / "fcop" / "fcop.json").read_text())["protocol_version"] == "4.0"
