"""Role tools for workers on other hosts (issue 16 item 3), without a cluster.

The hub's HTTP front on a non-loopback-default address (``127.0.0.2`` stands in for
the coordinator's cluster address), the bounds and refusals it applies, the built-in
agent speaking HTTP MCP when told, the ``[cluster] hub_address`` key, and the role
actor's choice of entry. The tier (``test_tier_ci.py``) files real reports over it
from other hosts with the hub's unix socket hidden there.
"""

from __future__ import annotations

import json
import os
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from baton.acp.messages import AgentCapabilities, InitializeAnswer
from baton.agents.builtin.config import MCP_HTTP_ENV, AgentConfig
from baton.agents.builtin.mcp_client import HttpServer, StdioServer, parse_servers
from baton.app.root import open_holder_root
from baton.cluster.actor import HolderSpec, RoleHolder
from baton.cluster.config import ClusterConfig, cluster_config
from baton.cluster.team_factory import _remote_profile
from baton.errors import ConfigError
from baton.fcop_errors import CoordinationError
from baton.fcop_port.authority import TrustedAuthority
from baton.fcop_port.workspace import init_workspace
from baton.providers.catalog import BUILTIN
from baton.role_tools.http_front import MAX_BODY, _bounded
from baton.role_tools.hub import RoleHub
from baton.store.sqlite import SqliteStore
from baton.store.store import Store
from tests.agents.builtin_client import AgentProcess
from tests.cluster.support import fake_profile
from tests.coordination.slots import open_slot, own_project

CLUSTER_IP = "127.0.0.2"
LIST = "baton-report: none\n```mcp baton.list_reports\n{}\n```\n"


@pytest.fixture
def project(tmp_path: Path) -> Path:
    root = tmp_path / "project"
    root.mkdir()
    init_workspace(root, TrustedAuthority(bytes(range(32))))
    return root


@pytest.fixture
def store(project: Path) -> Iterator[Store]:
    opened = SqliteStore.open(project / ".baton" / "baton.db")
    own_project(opened)
    try:
        yield opened
    finally:
        opened.close()


@pytest.fixture
async def hub(store: Store, project: Path) -> AsyncIterator[RoleHub]:
    open_slot(store, project, "QA")
    open_slot(store, project, "OPS")
    started = await RoleHub.start(store, project / ".baton")
    try:
        yield started
    finally:
        await started.aclose()


def test_hub_address_is_an_ip_with_an_optional_port_or_refused() -> None:
    base = {"address": "10.0.0.5:6379", "store": "host=db"}

    def parsed(value: object) -> ClusterConfig | None:
        return cluster_config({"cluster": {**base, "hub_address": value}}, {})

    assert cluster_config({"cluster": base}, {}) == ClusterConfig("10.0.0.5:6379", "host=db")
    one = parsed("10.0.0.5")
    assert one is not None and (one.hub_host, one.hub_port) == ("10.0.0.5", 0)
    two = parsed("10.0.0.5:7400")
    assert two is not None and (two.hub_host, two.hub_port) == ("10.0.0.5", 7400)
    six = parsed("[fd00::5]:7400")
    assert six is not None and (six.hub_host, six.hub_port) == ("fd00::5", 7400)
    for wrong in ("coordinator.lan", "10.0.0.5:99999", "10.0.0.5:x", "", 7, "[fd00::5", "a" * 80):
        with pytest.raises(ConfigError, match="hub_address"):
            parsed(wrong)


async def test_the_hub_serves_http_on_the_cluster_address(hub: RoleHub) -> None:
    base = await hub.start_http(CLUSTER_IP)
    assert base.startswith(f"http://{CLUSTER_IP}:")
    assert await hub.start_http(CLUSTER_IP) == base  # idempotent
    with pytest.raises(CoordinationError, match="already serves HTTP"):
        await hub.start_http("127.0.0.1")
    entry = hub.http_entry(hub.issue("QA"))
    assert entry["url"] == f"{base}/mcp/QA"


async def test_unauthenticated_wrong_slot_replaced_and_oversized_requests_are_refused(
    hub: RoleHub,
) -> None:
    await hub.start_http(CLUSTER_IP)
    qa = hub.issue("QA")
    ops = hub.issue("OPS")
    url = hub.http_entry(qa)["url"]
    body = {"jsonrpc": "2.0", "id": 1, "method": "tools/list", "params": {}}
    accept = {"accept": "application/json, text/event-stream"}

    async def post(token: str | None, *, content: bytes | None = None) -> httpx.Response:
        headers = {**accept, **({"authorization": f"Bearer {token}"} if token else {})}
        async with httpx.AsyncClient(timeout=30) as client:
            if content is not None:
                return await client.post(url, content=content, headers=headers)
            return await client.post(url, json=body, headers=headers)

    refused = await post(None)
    assert refused.status_code == 401 and refused.json()["error"]["data"] == "BAD_HELLO"
    wrong_slot = await post(ops.token)
    assert wrong_slot.status_code == 401
    assert wrong_slot.json()["error"]["data"] == "CREDENTIAL_REFUSED"
    big = await post(qa.token, content=b" " * (MAX_BODY + 1))
    assert big.status_code == 413 and big.json()["error"]["data"] == "TOO_LARGE"
    hub.issue("QA")  # the slot's session was re-placed: the old credential stops working
    stale = await post(qa.token)
    assert stale.status_code == 401 and stale.json()["error"]["data"] == "CREDENTIAL_REPLACED"
    for response in (refused, wrong_slot, stale):
        assert qa.token not in response.text and ops.token not in response.text


async def test_a_body_growing_past_the_bound_is_dropped_not_cut_short() -> None:
    chunks = [
        {"type": "http.request", "body": b"x" * MAX_BODY, "more_body": True},
        {"type": "http.request", "body": b"y", "more_body": False},
    ]

    async def receive() -> dict[str, Any]:
        return chunks.pop(0)

    bounded = _bounded(receive)
    assert (await bounded())["type"] == "http.request"
    assert await bounded() == {"type": "http.disconnect"}


def test_the_builtin_agent_reads_http_entries_only_when_told() -> None:
    raw = [
        {"type": "http", "name": "baton", "url": "http://10.0.0.5:7400/mcp/QA", "headers": []},
        {"name": "echo", "command": "/bin/echo"},
    ]
    assert [type(s) for s in parse_servers(raw)] == [StdioServer]
    told = parse_servers(
        [{**raw[0], "headers": [{"name": "Authorization", "value": "Bearer bmcp_secret"}]}],
        http=True,
    )
    assert told == [HttpServer("baton", raw[0]["url"], (("Authorization", "Bearer bmcp_secret"),))]
    assert "bmcp_secret" not in repr(told)
    with pytest.raises(ValueError, match="url must be http"):
        parse_servers([{**raw[0], "url": "file:///etc/passwd"}], http=True)
    env = {"BATON_AGENT_STATE_DIR": "/tmp/x"}
    assert AgentConfig.from_env(env).mcp_http is False
    assert AgentConfig.from_env({**env, MCP_HTTP_ENV: "1"}).mcp_http is True


async def test_the_builtin_agent_calls_role_tools_over_http_and_a_stale_copy_is_refused(
    hub: RoleHub, tmp_path: Path
) -> None:
    await hub.start_http(CLUSTER_IP)
    first = hub.issue("QA")
    env = {
        **os.environ,
        "BATON_AGENT_STATE_DIR": str(tmp_path / "agent"),
        "BATON_BUILTIN_LOG_LEVEL": "INFO",
        MCP_HTTP_ENV: "1",
    }
    agent = await AgentProcess.start(env, tmp_path / "agent.log")
    try:
        init = await agent.initialize()
        assert init["agentCapabilities"]["mcpCapabilities"]["http"] is True
        work = tmp_path / "work"
        work.mkdir()
        session = await agent.new_session(work, [hub.http_entry(first)])
        turn = await agent.prompt(session, LIST, timeout=60)
        reached = json.dumps(turn.finals())
        assert "NO_CURRENT_TASK" in reached, reached  # the tool itself answered, over HTTP
        hub.issue("QA")  # re-placed: this session is now the stale copy
        turn = await agent.prompt(session, LIST, timeout=60)
        refused = json.dumps(turn.finals())
        assert [f["status"] for f in turn.finals()] == ["failed"], refused
        assert "NO_CURRENT_TASK" not in refused, refused  # refused before any tool ran
        assert "earlier session of slot" in refused, refused
    finally:
        assert await agent.close() == 0, agent.log()
    assert first.token not in agent.log()


def _answer(http: bool) -> InitializeAnswer:
    return InitializeAnswer(1, AgentCapabilities(mcp_http=http))


async def test_the_role_actor_hands_the_http_entry_to_an_agent_that_speaks_it() -> None:
    stdio = [{"name": "baton", "command": "python", "args": [], "env": []}]
    http = [{"type": "http", "name": "baton", "url": "http://10.0.0.5:1/mcp/QA", "headers": []}]
    spec = HolderSpec(
        dsn="",
        slot="QA",
        epoch=1,
        host="w1",
        lease_s=6,
        parent_run="run",
        profile=fake_profile("ok"),
        workspace="/",
        state_dir="/",
        mcp_servers=stdio,
        mcp_http=http,
        root=open_holder_root,
    )
    holder = RoleHolder(spec)
    assert await holder._choose_mcp(_answer(True)) == http and holder.role_tools == "http"
    assert await holder._choose_mcp(_answer(False)) == stdio and holder.role_tools == "stdio"


def test_the_cluster_factory_tells_the_builtin_agent_to_speak_http() -> None:
    """Its holder's relay serves the role tools over loopback HTTP on every worker."""
    plain = ClusterConfig("h:1", "dsn")
    served = ClusterConfig("h:1", "dsn", hub_host="10.0.0.5")
    assert _remote_profile(BUILTIN, plain).env[MCP_HTTP_ENV] == "1"
    assert _remote_profile(BUILTIN, served).env[MCP_HTTP_ENV] == "1"
    other = fake_profile("ok")
    assert _remote_profile(other, served) is other
