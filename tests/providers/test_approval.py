"""Approval mode is baton's: selected per built-in profile, verified from what the agent says.

Pure checks of :mod:`baton.providers.approval`, then the runner against the fake agent, which
advertises modes and config options like Claude (``--mode``) and can refuse to change mode
(``--stuck-mode``) or switch itself mid-turn (``switch-mode``).
"""

from __future__ import annotations

import dataclasses
import json
from types import MappingProxyType
from typing import Any

import pytest

from baton.errors import ConfigError, SecurityError
from baton.providers.approval import APPROVAL_TABLES, verify
from baton.providers.catalog import BUILTIN_PROFILES, CLAUDE, CODEX, OPENCODE
from tests.support.harness import Harness, fake


def _session(mode: str | None = None, legacy: str | None = None) -> dict[str, Any]:
    result: dict[str, Any] = {}
    if mode is not None:
        result["configOptions"] = [
            {"id": "mode", "category": "mode", "type": "select", "currentValue": mode}
        ]
    if legacy is not None:
        result["modes"] = {"currentModeId": legacy, "availableModes": []}
    return result


@pytest.mark.parametrize("name", sorted(BUILTIN_PROFILES))
def test_every_builtin_profile_selects_a_mode_that_asks(name: str) -> None:
    profile = BUILTIN_PROFILES[name]
    table = APPROVAL_TABLES[profile.family]
    assert profile.mode == table.select
    assert not profile.agent_approves
    if table.select is not None:
        assert table.modes[table.select].klass in ("asks", "read_only")
        verdict = verify(profile, _session(table.select, table.select))
        assert verdict.klass in ("asks", "read_only"), verdict
    elif table.modes:  # a mode of its own that baton never selects (builtin's 'runbook')
        for mode in table.modes:
            assert verify(profile, _session(legacy=mode)).klass == "asks", (name, mode)
    else:
        assert verify(profile, {}).klass == "asks", name


def test_the_builtin_agent_advertises_only_modes_baton_classified() -> None:
    from baton.agents.builtin.agent import MODES

    advertised = {m["id"] for m in MODES["availableModes"]} | {MODES["currentModeId"]}
    assert advertised <= set(APPROVAL_TABLES["builtin"].modes), advertised


def test_the_effective_mode_comes_from_what_the_agent_advertises() -> None:
    assert verify(CLAUDE, _session("default")).klass == "asks"
    auto = verify(CLAUDE, _session("auto"))
    assert auto.self_approves and auto.source == "configOptions" and auto.mode == "auto"
    assert verify(CLAUDE, _session(legacy="acceptEdits")).self_approves
    # Option and legacy object disagree: the less safe one counts.
    mixed = verify(CLAUDE, _session("default", legacy="bypassPermissions"))
    assert mixed.self_approves and mixed.source == "modes"
    assert verify(CLAUDE, _session("telepathy")).klass == "unknown"
    assert verify(CLAUDE, {}).klass == "unknown", "no mode advertised: nothing verified"
    assert verify(CODEX, _session("read-only")).klass == "asks"
    for preset in ("auto", "full-access", "agent", "agent-full-access"):
        assert verify(CODEX, _session(preset)).self_approves, preset


def test_opencode_is_verified_from_its_permission_config() -> None:
    assert verify(OPENCODE, {}).klass == "asks"
    bare = dataclasses.replace(OPENCODE, env=MappingProxyType({}))
    assert verify(bare, {}).self_approves, "OpenCode's default writes without asking"
    allowing = dataclasses.replace(
        OPENCODE,
        env=MappingProxyType(
            {**OPENCODE.env, "OPENCODE_PERMISSION": json.dumps({"edit": "allow", "bash": "ask"})}
        ),
    )
    verdict = verify(allowing, {})
    assert verdict.self_approves and "edit" in verdict.reason
    patterns = dataclasses.replace(
        OPENCODE,
        env=MappingProxyType(
            {
                "OPENCODE_CONFIG_CONTENT": json.dumps(
                    {"permission": {"edit": "ask", "bash": {"*": "ask", "git push": "allow"}}}
                )
            }
        ),
    )
    assert verify(patterns, {}).self_approves


def test_an_unknown_family_is_unverified() -> None:
    profile = dataclasses.replace(CLAUDE, family="generic", mode=None)
    assert verify(profile, _session("whatever")).klass == "unknown"


# ------------------------------------------------------------------ through the runner


async def test_baton_selects_the_asking_mode_when_the_agent_starts_in_auto(
    harness: Harness,
) -> None:
    session = await harness.open(fake("ok", "--mode", "auto"), family="claude", mode="default")
    started = harness.of("session.started")[0]
    assert started.current_mode == "default" and started.approval == "asks"
    assert session.approval is not None and session.approval.mode == "default"
    assert not harness.of("security.approval_refused")


async def test_an_initial_self_approving_mode_is_refused(harness: Harness) -> None:
    with pytest.raises(SecurityError, match=r"approve its own mutations.*auto"):
        await harness.open(fake("ok", "--mode", "auto"), family="claude")
    [refused] = harness.of("security.approval_refused")
    assert refused.mode == "auto"
    assert harness.of("session.failed")[0].error_type == "SecurityError"
    assert not harness.of("session.started")


async def test_a_profile_asking_for_a_self_approving_mode_is_refused(harness: Harness) -> None:
    with pytest.raises(SecurityError, match="agent_approves"):
        await harness.open(fake("ok", "--mode", "default"), family="claude", mode="acceptEdits")
    assert harness.of("security.approval_refused")[0].mode == "acceptEdits"


async def test_an_agent_that_will_not_change_mode_is_refused(harness: Harness) -> None:
    with pytest.raises(ConfigError, match="did not confirm"):
        await harness.open(
            fake("ok", "--mode", "auto", "--stuck-mode"), family="claude", mode="default"
        )


async def test_agent_approves_runs_flagged(harness: Harness) -> None:
    session = await harness.open(
        fake("skip-permission", "--mode", "default"),
        family="claude",
        mode="acceptEdits",
        agent_approves=True,
    )
    types = harness.types()
    assert types.index("security.approval_bypass") > types.index("session.started")
    bypass = harness.of("security.approval_bypass")[0]
    assert bypass.mode == "acceptEdits" and "agent_approves" in bypass.reason
    outcome = await session.prompt("go")
    [finding] = harness.of("security.unapproved_mutation")
    assert finding.expected and outcome.unapproved_mutations == 0


async def test_switching_itself_to_a_self_approving_mode_cancels_the_turn(
    harness: Harness,
) -> None:
    session = await harness.open(
        fake("switch-mode", "--mode", "default", "--switch-to", "acceptEdits"),
        family="claude",
        mode="default",
    )
    outcome = await session.prompt("go", timeout=30)
    [refused] = harness.of("security.approval_refused")
    assert refused.mode == "acceptEdits"
    assert outcome.status == "cancelled"
    assert "self-approving" in harness.of("turn.cancelled")[0].reason
