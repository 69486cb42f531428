"""The built-in agent reads params with the ACP schema's meaning of each error, over real stdio.

A member of the wrong type, or a required one missing: invalid params (-32602), whatever else
is wrong; a well-formed session id naming no session: resource not found (-32002); a method it
does not serve: method not found (-32601). :data:`REQUIRED` lists the members each method needs
(``tests/integration/test_acp_schema.py`` holds it to the pinned schema's ``required``). The
``acp.v1.errors.*`` cases of the ACP conformance suite (openclaw/acpx, profile ``acp-core-v1``)
are here by name.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from tests.agents.builtin_client import AgentError, AgentProcess

REQUIRED: dict[str, dict[str, Any]] = {
    "initialize": {"protocolVersion": 1},
    "session/new": {"cwd": "<cwd>", "mcpServers": []},
    "session/load": {"sessionId": "<session>", "cwd": "<cwd>", "mcpServers": []},
    "session/prompt": {"sessionId": "<session>", "prompt": []},
    "session/set_mode": {"sessionId": "<session>", "modeId": "runbook"},
}
"""Each method's required members, with a valid value (``<cwd>``, ``<session>`` filled in)."""
LENIENT = {("session/new", "mcpServers"), ("session/load", "mcpServers")}
"""Required by the schema, read as empty when missing (as when ``null``, which it allows)."""
WRONG_TYPES: dict[str, list[Any]] = {
    "protocolVersion": ["1", -1, 70000, True, None],
    "cwd": [12345, None, ["/tmp"], "relative/dir"],
    "mcpServers": ["none", 3],
    "sessionId": [12345, None, ["x"], ""],
    "prompt": ["hello", {"type": "text"}, [{"type": "text", "text": 5}], [7]],
    "modeId": [1, None],
}


async def _params(agent: AgentProcess, method: str, workdir: Path) -> dict[str, Any]:
    session = await agent.new_session(workdir) if "<session>" in REQUIRED[method].values() else ""
    filled = {"<cwd>": str(workdir), "<session>": session}
    return {k: filled.get(v, v) if isinstance(v, str) else v for k, v in REQUIRED[method].items()}


async def _code(agent: AgentProcess, method: str, params: dict[str, Any]) -> int | None:
    try:
        await agent.call(method, params)
    except AgentError as error:
        assert isinstance(error.code, int)
        return error.code
    return None


@pytest.mark.parametrize("method", list(REQUIRED))
async def test_valid_params_are_accepted(agent: AgentProcess, workdir: Path, method: str) -> None:
    assert await _code(agent, method, await _params(agent, method, workdir)) is None


@pytest.mark.parametrize(
    ("method", "member"), [(m, k) for m, members in REQUIRED.items() for k in members]
)
async def test_a_missing_or_mistyped_member_is_invalid_params(
    agent: AgentProcess, workdir: Path, method: str, member: str
) -> None:
    params = await _params(agent, method, workdir)
    missing = {k: v for k, v in params.items() if k != member}
    if (method, member) in LENIENT:
        assert await _code(agent, method, missing) is None
    else:
        assert await _code(agent, method, missing) == -32602, f"{method} without {member}"
    for wrong in WRONG_TYPES[member]:
        if wrong is None and (method, member) in LENIENT:
            continue  # null means empty here (the schema's x-deserialize-default-on-null)
        code = await _code(agent, method, {**params, member: wrong})
        assert code == -32602, f"{method} {member}={wrong!r} answered {code}"


@pytest.mark.parametrize("method", ["session/prompt", "session/set_mode", "session/load"])
async def test_an_unknown_session_is_resource_not_found(
    agent: AgentProcess, workdir: Path, method: str
) -> None:
    params = await _params(agent, method, workdir)
    assert await _code(agent, method, {**params, "sessionId": "rb-" + "0" * 32}) == -32002


async def test_an_unknown_method_is_method_not_found(agent: AgentProcess) -> None:
    assert await _code(agent, "session/fork", {"sessionId": "x", "cwd": "/"}) == -32601


# ---------------------------------------------------- acp-core-v1 (openclaw/acpx) by name


async def test_acp_v1_errors_invalid_params(agent: AgentProcess) -> None:
    """``session/new`` with a numeric ``cwd``."""
    assert await _code(agent, "session/new", {"cwd": 12345, "mcpServers": []}) == -32602


async def test_acp_v1_errors_invalid_params_cwd_null(agent: AgentProcess) -> None:
    assert await _code(agent, "session/new", {"cwd": None, "mcpServers": []}) == -32602


async def test_acp_v1_errors_invalid_prompt_session_type(
    agent: AgentProcess, workdir: Path
) -> None:
    """A numeric ``sessionId`` is a type error, not an unknown session (was -32002)."""
    await agent.new_session(workdir)
    prompt = [{"type": "text", "text": "hello"}]
    assert await _code(agent, "session/prompt", {"sessionId": 12345, "prompt": prompt}) == -32602


async def test_acp_v1_errors_unknown_session(agent: AgentProcess) -> None:
    prompt = [{"type": "text", "text": "hello"}]
    params = {"sessionId": "does-not-exist", "prompt": prompt}
    assert await _code(agent, "session/prompt", params) == -32002


async def test_acp_v1_session_prompt_structured_blocks(agent: AgentProcess, workdir: Path) -> None:
    """``text`` and ``resource_link`` blocks (every agent must accept both) end the turn."""
    session_id = await agent.new_session(workdir)
    prompt = [
        {"type": "text", "text": "Look at this file."},
        {"type": "resource_link", "uri": f"file://{workdir}/a.py", "name": "a.py"},
    ]
    assert (await agent.call("session/prompt", {"sessionId": session_id, "prompt": prompt})) == {
        "stopReason": "end_turn"
    }
