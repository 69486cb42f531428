"""The role session factory offers HTTP MCP only to agents that advertise it.

Real ACP sessions of the built-in agent (which advertises ``mcpCapabilities.http:
false``) over the daemon's hub: whatever family it is given (``opencode`` agents do
advertise HTTP) the entry is chosen from its own ``initialize`` answer, so every session
gets the stdio shim at once: no session is opened twice, no notice, no guess. (Agents
that advertise HTTP get it: ``tests/integration/test_role_tools_real.py``.)
"""

from __future__ import annotations

import dataclasses
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from baton.acp.messages import parse_initialize
from baton.config import load_config
from baton.events.sequencer import Sequencer
from baton.requests.ledger import Ledger
from baton.role_tools.credentials import SlotCredential
from baton.role_tools.hub import RoleHub
from baton.runner.emitter import EventEmitter
from baton.store.sqlite import SqliteStore
from baton.team.role_sessions import offer_http, role_session_factory
from baton.team_config import RoleSpec
from tests.coordination.slots import open_slot, own_project
from tests.support.records import run_record


class RecordingHub(RoleHub):
    """The real hub, noting which kind of entry each session was given."""

    given: list[str]

    def stdio_entry(self, credential: SlotCredential, *, name: str = "baton") -> dict[str, Any]:
        self.given.append("stdio")
        return super().stdio_entry(credential, name=name)

    def http_entry(self, credential: SlotCredential, *, name: str = "baton") -> dict[str, Any]:
        self.given.append("http")
        return super().http_entry(credential, name=name)


@pytest.fixture
async def hub(root: Path, state_dir: Path) -> AsyncIterator[RecordingHub]:
    store = SqliteStore.open(state_dir / "baton.db")
    own_project(store)
    started = await RecordingHub.start(store, state_dir)
    started.given = []
    try:
        yield started
    finally:
        await started.aclose()
        store.close()


def test_the_advertised_bit_decides_and_absent_means_no() -> None:
    def http(answer: dict[str, Any]) -> bool:
        return offer_http(parse_initialize({"protocolVersion": 1, **answer}))

    assert http({"agentCapabilities": {"mcpCapabilities": {"http": True}}})
    assert not http({"agentCapabilities": {"mcpCapabilities": {"sse": True}}})
    assert not http({"agentCapabilities": {}})  # absent = unsupported (ACP)
    assert not http({})


@pytest.mark.parametrize(
    ("family", "given"), [("builtin", ["stdio", "stdio"]), ("opencode", ["stdio", "stdio"])]
)
async def test_http_is_offered_only_to_agents_advertising_it(
    root: Path,
    state_dir: Path,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    hub: RecordingHub,
    family: str,
    given: list[str],
) -> None:
    monkeypatch.setenv("XDG_STATE_HOME", str(tmp_path / "xdg"))
    config = load_config(root, environ={"XDG_STATE_HOME": str(tmp_path / "xdg")})
    agent = dataclasses.replace(
        config.profile("builtin"), name="role-agent", family=family, agent_approves=True
    )
    config = dataclasses.replace(config, profiles={**config.profiles, "role-agent": agent})
    store = hub.store
    store.create_run(run_record("run-t", kind="up"))
    emitter = EventEmitter(Sequencer("run-t"), store)
    factory = role_session_factory(
        config, workspace=root, store=store, ledger=Ledger(store), emitter=emitter, hub=hub
    )
    spec = RoleSpec(name="QA", agent="role-agent", permissions="all")
    binding = open_slot(store, root, "QA").binding()
    for _ in range(2):  # a first session and a resumed one
        session = await factory(spec, binding, None)
        await session.close()
    assert hub.given == given
    record = store.get_session("role-QA")
    assert record is not None and record.state["mcp_http"] is False
    opened = [e.type for e in store.iter_events("run-t") if e.type.startswith("session.")]
    assert opened.count("session.started") == 2, opened  # one agent session each, none reopened
