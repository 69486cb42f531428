"""``[team]`` parsing: the default team, and every misconfiguration as a clear ConfigError."""

from __future__ import annotations

import tomllib
from pathlib import Path
from typing import Any

import pytest

from baton.errors import ConfigError
from baton.team_config import (
    LEADER_TOOLS,
    default_team,
    default_team_toml,
    load_team,
    parse_team,
)


def test_default_team_is_pm_led_on_the_builtin_agent() -> None:
    team = default_team()
    assert team.leader == "PM" and team.human == "ADMIN"
    assert list(team.roles) == ["PM", "DEV", "QA", "OPS"]
    assert {r.agent for r in team.roles.values()} == {"builtin"}
    assert set(team.roles["PM"].tools) >= LEADER_TOOLS
    for name in ("DEV", "QA", "OPS"):
        assert not LEADER_TOOLS & set(team.roles[name].tools)
        assert "write_report" in team.roles[name].tools
    assert team.role_for("QA") is team.roles["QA"]
    assert team.role_for("ADMIN") is None and team.role_for("qa") is None  # no guessing
    parsed = tomllib.loads(default_team_toml())
    assert parse_team(parsed["team"], known_profiles={"builtin"}) == team


def test_load_team_reads_baton_toml(tmp_path: Path) -> None:
    config = tmp_path / "baton.toml"
    assert load_team(config) == default_team()  # no file: default team
    config.write_text(
        '[team]\nleader = "LEAD"\n[team.roles.LEAD]\nagent = "opencode"\nconcurrency = 2\n'
        '[team.roles.DEV]\nagent = "builtin"\naliases = ["DEV-01"]\n'
    )
    team = load_team(config)
    assert team.leader_spec.concurrency == 2 and team.leader_spec.is_leader
    assert team.role_for("DEV-01") is team.roles["DEV"]


def _team(**roles: Any) -> dict[str, Any]:
    return {"leader": "PM", "roles": {"PM": {"agent": "builtin"}, **roles}}


@pytest.mark.parametrize(
    ("raw", "message"),
    [
        ({"leader": "PM", "roles": {}}, "define at least the leader"),
        ({"leader": "PM", "roles": {"DEV": {"agent": "x"}}}, "leader: PM has no"),
        (_team(ADMIN={"agent": "builtin"}) | {"human": "ADMIN"}, "is the human"),
        (_team(dev={"agent": "builtin"}), "upper-case"),
        (
            _team(DEV={"agent": "builtin", "tools": ["write_report", "create_task"]}),
            r"leader \(PM\) only",
        ),
        (_team(DEV={"agent": "builtin", "tools": ["read_task"]}), "must include write_report"),
        (_team(DEV={"agent": "builtin", "tools": ["write_report", "rm_rf"]}), "unknown rm_rf"),
        (_team(DEV={"agent": "builtin", "concurrency": 0}), "between 1 and 16"),
        (_team(DEV={"agent": "builtin", "permissions": "yolo"}), "not one of"),
        (_team(DEV={"agent": "builtin", "colour": "red"}), "unknown keys colour"),
        (_team(DEV={"agent": "nope"}), "unknown agent profile 'nope'"),
        (_team(DEV={}), "agent: must be a non-empty string"),
        (_team() | {"child_acceptance": "vibes"}, "child_acceptance"),
        (_team() | {"fcop_mcp": {"enabled": True}}, "never taken from PATH"),
        (_team() | {"fcop_mcp": {"enabled": True, "python": "venv/bin/python"}}, "absolute"),
        (_team() | {"turn_limit": 0}, "turn_limit"),
        (_team(QA={"agent": "builtin", "aliases": ["PM"]}), "already names"),
        (_team() | {"surprise": 1}, "unknown keys surprise"),
    ],
)
def test_misconfigurations_say_what_is_wrong(raw: dict[str, Any], message: str) -> None:
    with pytest.raises(ConfigError, match=message):
        parse_team(raw, known_profiles={"builtin", "opencode"})


def test_compat_mode_parses(tmp_path: Path) -> None:
    team = parse_team(
        _team() | {"fcop_mcp": {"enabled": True, "python": "/opt/fcop-mcp/bin/python"}}
    )
    assert team.fcop_mcp.enabled and str(team.fcop_mcp.python) == "/opt/fcop-mcp/bin/python"
