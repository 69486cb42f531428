"""The import graph of ``src/baton``: no cycles, no arrow that points up.

Read from the source with ``ast`` (every ``import`` counts, also those inside functions and
under ``TYPE_CHECKING``: a lazy import is still a dependency). The layers, top to bottom,
are the ones of ``docs/architecture.md`` ("Layers"); a package may import its own layer's
modules and anything below, never above, and never a *sibling* (packages that share a tier
but must not know each other, like ``role_tools`` and ``runner``). A new package must be
given a place here, so the picture and the code cannot drift apart.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

SRC = Path(__file__).resolve().parents[1] / "src"

Layer = str | tuple[str, ...]
"""A package or module prefix, or several that form one layer (they may import each other)."""

TIERS: list[tuple[Layer, ...]] = [
    ("baton.__main__",),  # python -m baton
    ("baton.cli",),  # the command line: thin over the root
    ("baton.web",),  # the web surface (``baton serve`` mounts it)
    ("baton.app",),  # the composition root: Baton.open(project)
    ("baton.cluster",),  # cluster mode: role sessions as Ray actors, placements, epoch fencing
    ("baton.team",),  # the team loop: next_step(facts) -> step -> handler
    # Siblings: none of these imports another.
    (
        "baton.inbox",  # the doorbell: TASK files landing in the inbox, routed or refused
        "baton.role_tools",  # the role tool server: FCoP as MCP tools, one binding per session
        "baton.runner",  # one agent session
        "baton.testing",  # the shipped test transports
        "baton.agents",  # baton's own agent (a separate process)
        "baton.worktrees",  # a task tree's branch and worktree, through git itself
    ),
    (
        "baton.fcop_port",  # the FCoP port and baton's own write paths over fcop's Core
        "baton.workflow",  # what a role is told, when a task may start, what a result means
    ),
    ("baton.intake",),  # task files as untrusted input: screened in a sandboxed worker
    ("baton.cursor_sdk",),  # the Cursor SDK transport: a bridge process behind an ACP face
    ("baton.acp",),  # transports, framing, JSON-RPC, the typed client
    ("baton.requests",),  # the ledger and what reads it (payloads, render, notify)
    ("baton.store",),  # the only persistence
    ("baton.config", "baton.team_config"),
    ("baton.budgets",),  # budgets: limits, the usage ledger, prices (pure)
    ("baton.providers",),  # one extension per agent family
    ("baton.security",),  # admission, pins, containment, redaction, launch environments
    ("baton.events",),  # the canonical event model, normalizers, the extension seam
    (
        "baton.request_model",  # request documents and their refusals, pure data
        "baton.fcop_errors",  # FCoP's error codes as baton's coordination error subtree
    ),
    (
        "baton",
        "baton.errors",
        "baton.fsutil",
        "baton.procgroup",
        "baton.aiotasks",
        "baton.statetable",
        "baton.import_gc",
        "baton.jsontypes",
        "baton.agent_profile",
    ),  # leaves everyone uses
]
"""The layers, top first. Layers in one tier are siblings, except in the bottom tier."""

SIBLING_FREE = {len(TIERS) - 1}


def _prefixes(layer: Layer) -> tuple[str, ...]:
    return (layer,) if isinstance(layer, str) else layer


PENDING_MOVES: dict[tuple[str, str], str] = {}
"""Known arrows that the team-loop issue removes by moving the module; each must still
exist (a stale entry fails), so none outlives its reason."""


def _modules() -> dict[str, Path]:
    out = {}
    for path in (SRC / "baton").rglob("*.py"):
        name = ".".join(path.relative_to(SRC).with_suffix("").parts)
        out[name.removesuffix(".__init__")] = path
    return out


MODULES = _modules()


def _owner(name: str) -> str | None:
    """The module ``name`` is, or the package whose attribute it is."""
    while name and name not in MODULES:
        name = name.rpartition(".")[0]
    return name or None


def _imports(module: str, path: Path) -> set[str]:
    """The baton modules ``module`` imports (``from pkg import sub`` means ``pkg.sub``)."""
    package = module if path.name == "__init__.py" else module.rpartition(".")[0]
    found: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        names: list[str] = []
        if isinstance(node, ast.Import):
            names = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                parts = package.split(".")[: len(package.split(".")) - node.level + 1]
                base = ".".join([*parts, *([node.module] if node.module else [])])
            names = [
                f"{base}.{a.name}" if f"{base}.{a.name}" in MODULES else base for a in node.names
            ]
        for name in names:
            target = _owner(name) if name.split(".")[0] == "baton" else None
            if target is not None and target != module:
                found.add(target)
    return found


GRAPH = {module: _imports(module, path) for module, path in MODULES.items()}


def _tier(module: str) -> tuple[int, str]:
    """(tier index, the layer entry that holds ``module``): the longest matching prefix."""
    best: tuple[int, str, str] | None = None  # (tier, layer name, matched prefix)
    for index, tier in enumerate(TIERS):
        for layer in tier:
            name = _prefixes(layer)[0]
            for prefix in _prefixes(layer):
                if (module == prefix or module.startswith(prefix + ".")) and (
                    best is None or len(prefix) > len(best[2])
                ):
                    best = (index, name, prefix)
    assert best is not None, f"{module} has no layer: give its package a place in TIERS"
    return best[0], best[1]


def test_every_module_has_a_layer() -> None:
    for module in MODULES:
        _tier(module)


def test_no_arrow_points_up_or_across() -> None:
    wrong = []
    for module, targets in GRAPH.items():
        tier, entry = _tier(module)
        for target in targets:
            to_tier, to_entry = _tier(target)
            upward = to_tier < tier
            across = to_tier == tier and to_entry != entry and tier not in SIBLING_FREE
            if (upward or across) and (module, to_entry) not in PENDING_MOVES:
                wrong.append(f"{module} -> {target} ({'up' if upward else 'sibling'})")
    assert wrong == []


def test_pending_moves_are_still_pending() -> None:
    for module, package in PENDING_MOVES:
        if module in GRAPH:
            assert any(t == package or t.startswith(package + ".") for t in GRAPH[module]), (
                f"{module} no longer imports {package}: drop it from PENDING_MOVES"
            )


SURFACES = ("baton.cli", "baton.web")
"""The surfaces: they reach the core through the composition root only."""

SURFACE_DOORS = (
    "baton",  # the package itself (its version)
    "baton.app",  # the composition root and its facade (baton.app.facade.<area>)
    "baton.errors",  # the error tree every layer shares
    "baton.security.display",  # what makes text safe on a terminal or a page
    "baton.security.loopback",  # the one "only this machine" rule (the dashboard's host check)
    *(p for layer in TIERS[-1] for p in _prefixes(layer)),  # the leaves everyone uses
)
"""What a surface may import besides the surfaces themselves (issue 31 item 6)."""


def _within(module: str, prefixes: tuple[str, ...]) -> bool:
    return any(module == p or module.startswith(p + ".") for p in prefixes if p != "baton") or (
        "baton" in prefixes and module == "baton"
    )


def _surface_bypasses(graph: dict[str, set[str]]) -> list[str]:
    return [
        f"{module} -> {target}"
        for module, targets in sorted(graph.items())
        if _within(module, SURFACES)
        for target in sorted(targets)
        if not _within(target, SURFACES + SURFACE_DOORS)
    ]


def test_the_surfaces_reach_the_core_through_the_app() -> None:
    """The CLI and the web import the core from ``baton.app`` (the root and its facade), so
    what they use of it is listed in one place and the core can move behind it."""
    assert _surface_bypasses(GRAPH) == []


def test_the_surface_check_can_fail() -> None:
    graph = {
        "baton.cli.x": {"baton.store.store", "baton.app.facade.store", "baton.errors"},
        "baton.web.y": {"baton.cli.z", "baton.security.display", "baton.security.paths"},
        "baton.team.loop": {"baton.store.store"},
    }
    assert _surface_bypasses(graph) == [
        "baton.cli.x -> baton.store.store",
        "baton.web.y -> baton.security.paths",
    ]


def _cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected components with more than one module (Tarjan, iterative)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    out: list[list[str]] = []
    counter = 0
    for root in sorted(graph):
        if root in index:
            continue
        work = [(root, iter(sorted(graph[root])))]
        index[root] = low[root] = counter
        counter += 1
        stack.append(root)
        on_stack.add(root)
        while work:
            node, children = work[-1]
            child = next(children, None)
            if child is not None:
                if child not in index:
                    index[child] = low[child] = counter
                    counter += 1
                    stack.append(child)
                    on_stack.add(child)
                    work.append((child, iter(sorted(graph.get(child, ())))))
                elif child in on_stack:
                    low[node] = min(low[node], index[child])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[node])
            if low[node] == index[node]:
                component = []
                while True:
                    member = stack.pop()
                    on_stack.discard(member)
                    component.append(member)
                    if member == node:
                        break
                if len(component) > 1:
                    out.append(sorted(component))
    return out


KNOWN_CYCLES: dict[frozenset[str], str] = {}
"""Cycles another issue is removing; each must still exist (a stale entry fails)."""


def test_no_module_cycles() -> None:
    cycles = [frozenset(c) for c in _cycles(GRAPH)]
    assert [sorted(c) for c in cycles if c not in KNOWN_CYCLES] == []
    stale = [sorted(c) for c in KNOWN_CYCLES if c not in cycles]
    assert stale == [], "no longer a cycle: drop it from KNOWN_CYCLES"


def test_the_checks_can_fail() -> None:
    """The detectors on a tiny graph with a cycle and an upward arrow."""
    assert _cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]
    assert _tier("baton.events.model") == (TIERS.index(("baton.events",)), "baton.events")
    assert _tier("baton.security.paths")[1] == "baton.security"
    assert _tier("baton.security.redact")[1] == "baton.security"
    assert _tier("baton.runner.session")[1] == "baton.runner"
    with pytest.raises(AssertionError, match="no layer"):
        _tier("elsewhere.module")


def test_the_documented_layers_are_these() -> None:
    """``docs/architecture.md`` lists the same tiers in the same order."""
    text = (SRC.parent / "docs" / "architecture.md").read_text(encoding="utf-8")
    section = text.split("## Layers", 1)[1].split("\n## ", 1)[0]
    rows = [line for line in section.splitlines() if line.startswith("| ") and "---" not in line]
    documented = [
        tuple(name.strip(" `") for name in row.split("|")[1].split("·")) for row in rows[1:]
    ]
    expected = [
        tuple(p.removeprefix("baton.") for layer in tier for p in _prefixes(layer))
        for tier in TIERS
    ]
    assert documented == expected
