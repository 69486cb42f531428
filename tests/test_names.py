"""No two public classes in ``src/baton`` share a name (issue 10: names that collide).

Two ``SessionRecord``s or two ``TurnDriver``s make every reader check which one a module
means, and an import of the wrong one type-checks when both have the fields used. Read
from the source with ``ast`` (top-level classes not starting with ``_``).
"""

from __future__ import annotations

import ast
from collections import defaultdict
from pathlib import Path

SRC = Path(__file__).resolve().parents[1] / "src"

KNOWN: dict[str, str] = {
    # The built-in agent is the other side of ACP, a program of its own: its JSON-RPC
    # message types mirror the client's on purpose (it reads them through acp.jsonrpc).
    "Request": "built-in agent's side of JSON-RPC",
    "Response": "built-in agent's side of JSON-RPC",
    "Notification": "built-in agent's side of JSON-RPC",
    "Invalid": "built-in agent's side of JSON-RPC",
    "ConnectionClosed": "built-in agent's side of the connection",
    "TurnRecord": "the built-in agent's own record of a turn (agents.builtin.store) vs team.records",
}
"""Names defined more than once, and why; an entry whose collision is gone fails."""


def _classes() -> dict[str, list[str]]:
    found: dict[str, list[str]] = defaultdict(list)
    for path in sorted((SRC / "baton").rglob("*.py")):
        module = ".".join(path.relative_to(SRC).with_suffix("").parts)
        for node in ast.parse(path.read_text(encoding="utf-8")).body:
            if isinstance(node, ast.ClassDef) and not node.name.startswith("_"):
                found[node.name].append(module)
    return found


CLASSES = _classes()


def test_no_two_public_classes_share_a_name() -> None:
    twice = {name: where for name, where in CLASSES.items() if len(where) > 1}
    assert {n: w for n, w in twice.items() if n not in KNOWN} == {}


def test_known_collisions_still_collide() -> None:
    stale = [name for name in KNOWN if len(CLASSES.get(name, [])) < 2]
    assert stale == [], "no longer defined twice: drop them from KNOWN"


AMBIGUOUS = {"decide", "startup", "daemon"}
"""Words that meant several things (a policy's verdict, the next team step, a placement;
two start-ups; the team loop called a daemon): a function or class is named for what it
does instead, and so is a module (issue 31)."""


def _defined_names() -> dict[str, list[str]]:
    found: dict[str, list[str]] = defaultdict(list)
    for path in sorted((SRC / "baton").rglob("*.py")):
        module = ".".join(path.relative_to(SRC).with_suffix("").parts)
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
                found[node.name].append(f"{module}:{node.lineno}")
        for part in module.split(".")[1:]:  # a module or package is a name too
            found[part].append(f"{module} (module)")
    return found


def _ambiguous(names: dict[str, list[str]]) -> dict[str, list[str]]:
    return {
        name: where
        for name, where in names.items()
        if any(word in name.lower().strip("_").split("_") for word in AMBIGUOUS)
    }


def test_no_function_class_or_module_is_named_by_an_ambiguous_word() -> None:
    assert _ambiguous(_defined_names()) == {}


def test_the_ambiguous_word_check_can_fail() -> None:
    names = {"decide": ["a:1"], "decision_for": ["b:2"], "daemon_alive": ["c:3"], "x": ["d:4"]}
    assert _ambiguous(names) == {"decide": ["a:1"], "daemon_alive": ["c:3"]}
