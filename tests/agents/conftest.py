"""Fixtures starting the built-in agent as a subprocess (see `builtin_client`)."""

import os
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from tests.agents.builtin_client import AgentProcess, StartAgent


@pytest.fixture
def state_dir(tmp_path: Path) -> Path:
    path = tmp_path / "state"
    path.mkdir()
    return path


@pytest.fixture
def workdir(tmp_path: Path) -> Path:
    path = tmp_path / "work"
    path.mkdir()
    return path


@pytest.fixture
async def start_agent(tmp_path: Path, state_dir: Path) -> AsyncIterator[StartAgent]:
    """Start agents sharing one state dir; each is closed (and must exit cleanly) at teardown."""
    agents: list[AgentProcess] = []

    async def start(**extra_env: str) -> AgentProcess:
        env = {
            **os.environ,
            "BATON_AGENT_STATE_DIR": str(state_dir),
            "BATON_BUILTIN_LOG_LEVEL": "INFO",
        }
        env.update(extra_env)
        agent = await AgentProcess.start(env, tmp_path / f"agent-{len(agents)}.log")
        agents.append(agent)
        return agent

    yield start
    for agent in agents:
        if agent.process.returncode is None:
            assert await agent.close() == 0, agent.log()


@pytest.fixture
async def agent(start_agent: StartAgent) -> AgentProcess:
    """An initialized agent whose client does not write files."""
    process = await start_agent()
    await process.initialize()
    return process
