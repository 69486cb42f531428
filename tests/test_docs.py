"""The docs and the code name the same commands and configuration keys (datasette style).

Commands are read from the typer app, configuration keys from the tables the code declares
(:data:`baton.app.configuration.CONFIG_TABLES`), so a new command or key is checked the moment
it exists: it must be documented (``docs/cli.md``, ``docs/configuration.md``), and whatever
the docs name as a command must exist.
"""

from __future__ import annotations

import re
from pathlib import Path

import typer.main

from baton.app.configuration import CONFIG_TABLES
from baton.cli.app import app

ROOT = Path(__file__).resolve().parents[1]
DOCS = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]


def _commands() -> set[str]:
    found: set[str] = set()

    def walk(command: object, prefix: str) -> None:
        subs = getattr(command, "commands", None)
        if subs is None or getattr(command, "invoke_without_command", False):
            found.add(prefix)  # a group that runs by itself (`baton agents`) is a command too
        if subs is None:
            return
        for name, sub in subs.items():
            walk(sub, f"{prefix} {name}".strip())

    walk(typer.main.get_command(app), "")
    return found


COMMANDS = _commands()
GROUPS = {c.split()[0] for c in COMMANDS if " " in c}


def test_every_command_has_its_row_and_every_row_a_command() -> None:
    text = (ROOT / "docs" / "cli.md").read_text(encoding="utf-8")
    rows = set(re.findall(r"^\| `baton ([a-z][a-z -]*?)` \|", text, flags=re.M))
    assert COMMANDS - rows == set(), "commands missing from docs/cli.md"
    assert rows - COMMANDS == set(), "docs/cli.md rows for commands that do not exist"


def _mentions(text: str) -> set[str]:
    """Commands: code spans that start with ``baton WORD``, and code-block lines that do
    (``$ `` and a path before ``baton`` allowed; comments and output lines are not commands)."""
    code = re.findall(r"`([^`\n]+)`", text)
    blocks = re.findall(r"```[a-z]*\n(.*?)```", text, flags=re.S)
    code += [line for block in blocks for line in block.splitlines()]
    out: set[str] = set()
    for snippet in code:
        command = snippet.split(" #", 1)[0].strip()
        match = re.match(
            r"(?:\$ )?(?:\S*/)?baton ([a-z][a-z-]*)(?: ([a-z][a-z-]*))?(?=\s|$)", command
        )
        if match:
            first, second = match.group(1), match.group(2)
            out.add(f"{first} {second}" if first in GROUPS and second else first)
    return out


def test_every_command_the_docs_name_exists() -> None:
    unknown = {}
    for path in DOCS:
        missing = _mentions(path.read_text(encoding="utf-8")) - COMMANDS - GROUPS
        if missing:
            unknown[path.name] = sorted(missing)
    assert unknown == {}


def _documented_tables() -> dict[str, set[str]]:
    text = (ROOT / "docs" / "configuration.md").read_text(encoding="utf-8")
    tables: dict[str, set[str]] = {}
    for section in re.split(r"^## ", text, flags=re.M)[1:]:
        heading = re.match(r"`\[([^\]]+)\]`", section)
        assert heading, f"a configuration section without a `[table]` heading: {section[:40]!r}"
        keys = set(re.findall(r"^\| `([a-z_]+)` \|", section, flags=re.M))
        tables[heading.group(1)] = keys
    return tables


def test_every_configuration_key_is_documented_and_every_documented_one_is_read() -> None:
    documented = _documented_tables()
    assert set(documented) == set(CONFIG_TABLES), "tables differ"
    for table, keys in CONFIG_TABLES.items():
        assert set(keys) - documented[table] == set(), f"[{table}] keys missing from the docs"
        assert documented[table] - set(keys) == set(), f"[{table}] documents unknown keys"


def test_the_checks_can_fail() -> None:
    assert _mentions("run `baton frobnicate --now`") == {"frobnicate"}
    assert _mentions("```\n.venv/bin/baton task new --to PM\n```") == {"task new"}
    assert _mentions("baton stores events") == set(), "prose is not a command"
    assert _mentions("```\nbaton dashboard: http://x\n```") == set(), "output is not a command"
