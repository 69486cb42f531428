"""Terminals in tool events: baton's own keep their output; the agent's own are labelled."""

from __future__ import annotations

from tests.support.harness import Harness, fake


async def test_a_client_terminals_output_is_kept_in_its_tool_event(harness: Harness) -> None:
    session = await harness.open(fake("client-terminal-tool"), preset="all")
    await session.prompt("go")
    [done] = harness.of("tool.execution.completed")
    assert done.terminal_ids and not done.agent_terminal_ids
    assert done.output is not None and "from the client terminal" in done.output.tail


async def test_an_agent_side_terminal_is_labelled_and_its_output_kept(harness: Harness) -> None:
    session = await harness.open(fake("agent-terminal"), preset="all")
    await session.prompt("go")
    [done] = harness.of("tool.execution.completed")
    assert done.agent_terminal_ids == ["agent-term-1"]
    assert done.output is not None and done.output.tail == "built ok\n"
