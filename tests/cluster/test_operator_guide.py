"""docs/cluster.md's from-zero guide, checked against the code it tells an operator to run.

The guide ("From zero: three hosts") is read from the document itself: its code blocks,
its ``baton`` and ``ray start`` commands (also the systemd unit's ``ExecStart``). Checked:

* every ``baton`` command parses with baton's real command line (option names, types,
  ranges), and the worker's becomes the ``ray start --block`` line :func:`worker_argv`
  builds, with the guide's host resource;
* the ``[cluster]`` block parses with :func:`cluster_config` (every key known and valid);
* the head's ``ray start`` parses with Ray's own command line (when Ray is installed:
  ``./scripts/cluster-tier`` installs it and requires it there), and says what the tier's
  head does: the same health checks, no ``baton-host-*`` resource, GCS fault tolerance
  through ``RAY_REDIS_ADDRESS``;
* the tier's ``baton worker`` (:func:`worker_command`) parses with the same command line and
  uses no option the guide does not name, so the tier that passes CI runs what the guide says.

What this does not prove: that the guide works on three real machines (the apt, psql,
systemd and redis lines are not run; the tier builds its hosts in namespaces with its own
PostgreSQL and Redis start-up).
"""

from __future__ import annotations

import configparser
import json
import os
import shlex
import tomllib
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import typer.main

from baton.cli.app import app
from baton.cluster.config import cluster_config
from baton.cluster.worker import worker_argv
from tests.cluster.faults import worker_command
from tests.cluster.tier import HEALTH_CHECKS, head_argv

DOC = Path(__file__).resolve().parents[2] / "docs" / "cluster.md"
TITLE = "## From zero: three hosts"


def guide() -> str:
    text = DOC.read_text()
    start = text.index(TITLE)
    end = text.index("\n## ", start + len(TITLE))
    return text[start:end]


def blocks(lang: str) -> list[str]:
    """The guide's fenced code blocks in ``lang``."""
    found, current, inside = [], [], False
    for line in guide().splitlines():
        if not inside and line.strip() == f"```{lang}":
            inside, current = True, []
        elif inside and line.strip() == "```":
            inside = False
            found.append("\n".join(current))
        elif inside:
            current.append(line)
    return found


def commands(script: str) -> Iterator[tuple[dict[str, str], list[str]]]:
    """Each simple command of a shell block: (its leading VAR=value assignments, argv)."""
    joined = script.replace("\\\n", " ")
    for line in joined.splitlines():
        lexer = shlex.shlex(line, posix=True, punctuation_chars="|&;")
        lexer.whitespace_split = True
        words = list(lexer)
        command: list[str] = []
        for word in [*words, ";"]:
            if word in {"|", "||", "&&", ";", "&"}:
                if command:
                    yield _split_env(command)
                command = []
            else:
                command.append(word)


def _split_env(words: list[str]) -> tuple[dict[str, str], list[str]]:
    env: dict[str, str] = {}
    while words and "=" in words[0] and words[0].split("=")[0].isidentifier():
        key, _, value = words.pop(0).partition("=")
        env[key] = value
    return env, words


def all_commands() -> list[tuple[dict[str, str], list[str]]]:
    found = [c for block in blocks("sh") for c in commands(block)]
    for unit in blocks("ini"):
        parser = configparser.ConfigParser(interpolation=None, strict=False)
        parser.optionxform = str  # type: ignore[assignment,method-assign]
        parser.read_string(unit)
        found += list(commands(parser["Service"]["ExecStart"]))
    return found


def baton_commands(sub: str) -> list[list[str]]:
    return [a[1:] for _, a in all_commands() if a and Path(a[0]).name == "baton" and a[1] == sub]


def parse_baton(args: list[str]) -> dict[str, Any]:
    """``args`` parsed by baton's real command line, without running the command."""
    root = typer.main.get_command(app)
    ctx = type(root).context_class(root)
    command = root.get_command(ctx, args[0])  # type: ignore[attr-defined]
    assert command is not None, args
    return dict(command.make_context(args[0], list(args[1:])).params)


def test_the_guide_has_each_step() -> None:
    text = guide()
    for needed in ("createdb", "pg_hba.conf", "RAY_REDIS_ADDRESS", "systemctl enable"):
        assert needed in text, needed
    assert baton_commands("worker") and baton_commands("up")
    assert [a for _, a in all_commands() if a[:2] == ["/opt/baton/bin/ray", "start"]]


def test_every_baton_command_parses_with_the_real_command_line() -> None:
    for args in baton_commands("worker") + baton_commands("up"):
        parse_baton(args)  # click raises on an unknown option or a bad value
    with pytest.raises(Exception, match="No such option"):
        parse_baton(["worker", "--address=10.0.0.5:6379", "--hostname=w1"])  # the check bites


def test_the_workers_become_the_ray_start_line_the_guide_describes() -> None:
    seen = set()
    for args in baton_commands("worker"):
        p = parse_baton(args)
        argv = worker_argv(
            p["address"],
            p["host"],
            slots=p["slot"] or (),
            node_ip=p["node_ip"],
            num_cpus=p["num_cpus"],
            temp_dir=p["temp_dir"],
            object_store_bytes=p["object_store"],
            ray="ray",
        )
        assert argv[:2] == ["ray", "start"] and "--block" in argv
        resources = json.loads(
            next(a for a in argv if a.startswith("--resources=")).split("=", 1)[1]
        )
        assert resources == {f"baton-host-{p['host']}": 1}, resources  # each actor asks 0.01
        seen.add((p["address"], p["host"], p["node_ip"]))
    assert seen == {("10.0.0.5:6379", "w1", "10.0.0.6")}, seen  # one worker, said the same way


def test_the_cluster_section_parses() -> None:
    (section,) = blocks("toml")
    config = cluster_config(tomllib.loads(section), environ={})
    assert config is not None
    assert (config.address, config.hub_host, config.hub_port) == ("10.0.0.5:6379", "10.0.0.5", 7447)
    head = next(a for _, a in all_commands() if a[:2] == ["/opt/baton/bin/ray", "start"])
    port = next(w for w in head if w.startswith("--port=")).split("=")[1]
    assert config.address == f"10.0.0.5:{port}"  # baton.toml names the head the guide starts


def head_command() -> tuple[dict[str, str], dict[str, str]]:
    env, argv = next((e, a) for e, a in all_commands() if a[:2] == ["/opt/baton/bin/ray", "start"])
    return env, flags_of(argv[2:])


def flags_of(words: list[str]) -> dict[str, str]:
    return {w.partition("=")[0]: w.partition("=")[2] for w in words}


def test_the_head_is_the_tiers_head() -> None:
    env, flags = head_command()
    assert set(env) == {"RAY_REDIS_ADDRESS", "RAY_external_storage_namespace"}, env
    assert json.loads(flags["--system-config"]) == dict(HEALTH_CHECKS)
    assert json.loads(flags["--resources"]) == {}  # the head runs no role actor
    tier = flags_of(head_argv("head", "198.18.0.3", Path("/t"), runs_roles=False)[2:])
    for flag in ("--system-config", "--resources", "--include-dashboard", "--port"):
        assert json.loads(tier[flag]) == json.loads(flags[flag]), flag
    assert "--disable-usage-stats" in flags and "--head" in flags


def test_the_heads_flags_parse_with_rays_command_line() -> None:
    if os.environ.get("BATON_CLUSTER_TIER") != "1":
        pytest.importorskip("ray.scripts.scripts")
    from ray.scripts.scripts import start

    _, argv = next((e, a) for e, a in all_commands() if a[:2] == ["/opt/baton/bin/ray", "start"])
    params = start.make_context("start", argv[2:]).params
    assert params["head"] is True and params["port"] == 6379
    config = params["system_config"]
    assert (json.loads(config) if isinstance(config, str) else config) == dict(HEALTH_CHECKS)
    assert json.loads(params["resources"]) == {}


def test_the_tiers_worker_uses_only_what_the_guide_names() -> None:
    tier = worker_command("198.18.0.3:6379", "w1", "198.18.0.4", Path("/t/r"), ("kill",))
    assert Path(tier[0]).name == "baton"
    parse_baton(tier[1:])
    named = {w.split("=", 1)[0] for args in baton_commands("worker") for w in args[1:]}
    said = {w.split("=", 1)[0] for w in guide().replace("`", " ").split()}
    for word in tier[2:]:
        option = word.split("=", 1)[0]
        assert option in named or option in said, option
