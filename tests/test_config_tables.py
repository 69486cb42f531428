"""Every ``baton.toml`` table, driven with unknown keys and wrong types: always a ConfigError.

No configuration mistake may surface as an internal error (a ``TypeError`` deep in a
command): ``load_config`` refuses unknown top-level tables and ``check_config`` has every
part parse its own table at load. The command line turns that into one line and exit 2.
"""

from __future__ import annotations

import json
import subprocess
import sys
import tomllib
from pathlib import Path
from typing import Any

import pytest

from baton.app.configuration import CONFIG_TABLES, check_config
from baton.config import TOP_LEVEL_TABLES, load_config
from baton.errors import ConfigError
from baton.team_config import Isolation

WRONG: tuple[Any, ...] = (5, -1, 2.5, True, "soon", "", [1, 2], ["a"], {"x": 1})
"""Values of every TOML type; for any one key most are wrong."""


def _value(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int | float):
        return repr(value)
    if isinstance(value, str):
        return json.dumps(value)
    if isinstance(value, list):
        return "[" + ", ".join(_value(v) for v in value) + "]"
    return "{ " + ", ".join(f"{k} = {_value(v)}" for k, v in value.items()) + " }"


BASE: dict[str, str] = {
    "profiles.NAME": '[profiles.mine]\nextends = "builtin"\n',
    "secrets": "[secrets]\n",
    "notify": "[notify]\n",
    "team": '[team]\nleader = "PM"\n[team.roles.PM]\nagent = "builtin"\n',
    "team.roles.NAME": '[team]\nleader = "PM"\n[team.roles.PM]\nagent = "builtin"\n',
    "team.fcop_mcp": '[team]\nleader = "PM"\n[team.roles.PM]\nagent = "builtin"\n[team.fcop_mcp]\n',
    "cluster": '[cluster]\naddress = "127.0.0.1:6379"\nstore = "postgresql://x@127.0.0.1/db"\n',
    "budget": "[budget]\n",
    "budget.per_SCOPE": "[budget]\n[budget.per_run]\n",
    "pricing": "[pricing]\n",
    "pricing.models.NAME": '[pricing]\n[pricing.models."some-model"]\ninput = 1.0\noutput = 2.0\n',
}
"""A valid document with the table present, its keys appended after the header."""

HEADER = {
    "profiles.NAME": "[profiles.mine]",
    "secrets": "[secrets]",
    "notify": "[notify]",
    "team": "[team]",
    "team.roles.NAME": "[team.roles.PM]",
    "team.fcop_mcp": "[team.fcop_mcp]",
    "cluster": "[cluster]",
    "budget": "[budget]",
    "budget.per_SCOPE": "[budget.per_run]",
    "pricing": "[pricing]",
    "pricing.models.NAME": '[pricing.models."some-model"]',
}


def _with(table: str, line: str) -> str:
    """BASE of ``table`` with ``line`` added to that table (replacing a same-named key)."""
    header = HEADER[table]
    lines = BASE[table].splitlines()
    at = lines.index(header)
    key = line.split("=")[0].strip()
    end = at + 1
    while end < len(lines) and not lines[end].startswith("["):
        end += 1
    body = [entry for entry in lines[at + 1 : end] if entry.split("=")[0].strip() != key]
    return "\n".join([*lines[: at + 1], *body, line, *lines[end:]]) + "\n"


def _load(tmp_path: Path, text: str) -> None:
    (tmp_path / "baton.toml").write_text(text, encoding="utf-8")
    check_config(load_config(tmp_path, environ={"BATON_STATE_DIR": str(tmp_path / "state")}), {})


def test_every_table_has_a_driver() -> None:
    assert set(BASE) == set(CONFIG_TABLES) == set(HEADER)
    assert {t.split(".")[0] for t in CONFIG_TABLES} == set(TOP_LEVEL_TABLES)


@pytest.mark.parametrize("table", sorted(CONFIG_TABLES))
def test_the_base_document_is_valid(table: str, tmp_path: Path) -> None:
    _load(tmp_path, BASE[table])


@pytest.mark.parametrize("table", sorted(CONFIG_TABLES))
def test_an_unknown_key_in_any_table_is_named(table: str, tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="frobnicate"):
        _load(tmp_path, _with(table, "frobnicate = 1"))


@pytest.mark.parametrize(
    ("table", "key"), sorted((t, k) for t, keys in CONFIG_TABLES.items() for k in keys)
)
def test_a_wrong_type_for_any_key_is_a_config_error_never_an_internal_one(
    table: str, key: str, tmp_path: Path
) -> None:
    refused = 0
    for value in WRONG:
        try:
            _load(tmp_path, _with(table, f"{key} = {_value(value)}"))
        except ConfigError as exc:
            refused += 1
            assert "\n" not in str(exc).strip(), "one line"
    assert refused, f"[{table}] {key} accepted every kind of value"


@pytest.mark.parametrize("text", ["[teem]\nname = 'x'\n", "leader = 'PM'\n", "notify = 5\n"])
def test_unknown_or_misplaced_top_level_entries_are_refused(text: str, tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match=r"unknown table|must be a table"):
        _load(tmp_path, text)


@pytest.mark.parametrize(
    "argv",
    [
        ["status"],
        ["inbox"],
        ["grants"],
        ["answer", "req-x", "--allow"],
        ["up", "--until-idle"],
        ["run", "-a", "builtin", "hello"],
        ["runs"],
    ],
)
@pytest.mark.parametrize(
    ("text", "says"),
    [
        ("[notify]\ncommand = 5\n", "[notify] command must be a list of strings"),
        ('[notify]\ntimeout = "soon"\n', "[notify] timeout must be a positive number"),
        ("[teem]\nname = 'x'\n", "unknown table [teem]"),
        (
            '[team]\nanswer_timeout = true\n[team.roles.PM]\nagent = "builtin"\n',
            "[team] answer_timeout",
        ),
    ],
)
def test_every_command_says_it_in_one_line_with_exit_2(
    argv: list[str], text: str, says: str, tmp_path: Path
) -> None:
    (tmp_path / "baton.toml").write_text(text, encoding="utf-8")
    done = subprocess.run(
        [sys.executable, "-m", "baton", *argv],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=120,
        env={"PATH": "/usr/bin:/bin", "HOME": str(tmp_path), "LANG": "C.UTF-8"},
    )
    assert done.returncode == 2, done.stderr
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("baton: ") and says in lines[0], done.stderr
    assert "internal error" not in done.stderr


def test_a_cluster_projects_trees_have_worktrees_on_the_workers(tmp_path: Path) -> None:
    """With ``[cluster]`` a tree's worktree lives on the worker host that holds the role:
    isolation is ``worktree`` by default there too, in remote mode (the coordinator keeps
    the branch); ``none`` still turns it off."""
    from baton.fcop_port.project import _team

    cluster, team = BASE["cluster"], BASE["team"]
    _load(tmp_path, cluster + team.replace("[team]\n", '[team]\nisolation = "worktree"\n'))
    _load(tmp_path, cluster + team.replace("[team]\n", '[team]\nisolation = "none"\n'))
    raw = {"cluster": {"address": "x"}}
    roles = tomllib.loads(team)["team"]  # a [team] that does not name its isolation
    assert _team(raw, {}).isolation == Isolation(mode="worktree", remote=True)  # no [team]
    builtin = {"builtin": {}}
    assert _team({**raw, "team": roles}, builtin).isolation.remote is True
    off = _team({**raw, "team": {**roles, "isolation": "none"}}, builtin).isolation
    assert off.mode == "none"
    alone = _team({"team": roles}, builtin).isolation  # one machine's default
    assert alone.mode == "worktree" and alone.remote is False
