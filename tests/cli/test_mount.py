"""Lazy command mounting and the cold-start import budget of the run path.

:data:`baton.cli.mount.COMMANDS` names each top-level command without importing its
module; these tests check that it names exactly what the modules register, and that
``import baton.cli.app``, ``baton run --help`` and a trivial ``baton run`` import only
what they use: never the ACP SDK's models (``acp.schema``, most of a second), never
another command's module, and the command line alone not even pydantic.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import typer.main

from baton.cli import mount
from baton.cli.app import app
from tests.cli.conftest import user_env

HEAVY = (
    "acp",
    "acp.schema",
    "baton.web.server",
    "starlette",
    "rich.markdown",
    "uvicorn",
    "pydantic",
)


def test_the_manifest_names_what_each_module_registers() -> None:
    groups: list[str] = []
    for module in mount.COMMAND_MODULES:
        built = mount.module_commands(module, pretty_exceptions_short=True, rich_markup_mode=None)
        assert set(built) == {n for n, m in mount.COMMANDS.items() if m == module}, module
        groups += [name for name, command in built.items() if hasattr(command, "commands")]
    names = list(mount.COMMANDS)
    # typer lists a group after every command; the manifest keeps that order.
    assert names[len(names) - len(groups) :] == sorted(groups, key=names.index)


def test_every_command_resolves_with_its_options() -> None:
    root = typer.main.get_command(app)
    ctx = type(root).context_class(root)
    assert root.list_commands(ctx) == list(mount.COMMANDS)  # type: ignore[attr-defined]
    run = root.get_command(ctx, "run")  # type: ignore[attr-defined]
    assert {"--json", "--agent", "--approve"} <= {o for p in run.params for o in p.opts}


def _loaded_after(code: str, cwd: Path, home: Path) -> dict[str, list[str]]:
    """Run ``code`` in a fresh interpreter; which of the watched modules it imported."""
    probe = (
        "import json, sys\n"
        "try:\n"
        f"    {code}\n"
        "except SystemExit:\n"
        "    pass\n"
        f"heavy = [m for m in {HEAVY!r} if m in sys.modules]\n"
        "cmds = sorted(m for m in sys.modules if m.startswith('baton.cli.') and "
        "(m.endswith('_cmd') or m.endswith('_cmds')))\n"
        "sys.stderr.write('\\nLOADED ' + json.dumps({'heavy': heavy, 'commands': cmds}) + '\\n')\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", probe],
        cwd=cwd,
        env=user_env(home),
        capture_output=True,
        text=True,
        timeout=120,
    )
    line = [x for x in done.stderr.splitlines() if x.startswith("LOADED ")]
    assert line, done.stderr
    loaded: dict[str, list[str]] = json.loads(line[-1].removeprefix("LOADED "))
    return loaded


def test_importing_the_command_line_loads_no_command_and_no_sdk(tmp_path: Path) -> None:
    loaded = _loaded_after("import baton.cli.app", tmp_path, tmp_path)
    assert loaded == {"heavy": [], "commands": []}


def test_a_command_help_loads_only_that_command(tmp_path: Path) -> None:
    loaded = _loaded_after(
        "from baton.cli.app import main; main(['run', '--help'])", tmp_path, tmp_path
    )
    # typer's rich help loads rich.markdown itself, run's options name event types
    # (pydantic); nothing else heavy may come.
    heavy = [m for m in loaded["heavy"] if m not in ("rich.markdown", "pydantic")]
    assert (heavy, loaded["commands"]) == ([], ["baton.cli.run_cmd"])


def test_a_trivial_run_never_loads_the_acp_sdk(project: Path, user_home: Path) -> None:
    out = project.parent / "out.ndjson"
    loaded = _loaded_after(
        f"sys.stdout = open({str(out)!r}, 'w'); "
        "from baton.cli.app import main; main(['run', '--json', 'hello'])",
        project,
        user_home,
    )
    types = [json.loads(line)["type"] for line in out.read_text().splitlines()]
    assert types[0] == "session.started" and "turn.completed" in types, types
    # Every event is a pydantic model; nothing else heavy may come.
    assert loaded == {"heavy": ["pydantic"], "commands": ["baton.cli.run_cmd"]}
