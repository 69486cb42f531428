"""No class in ``src/baton`` gets its state from two lines of in-project bases (issue 31).

The god objects of the first architecture step came back as mixins: ``Executor`` built
from four bases, 41 attributes declared by one half and set by another. The rule since:
composition over inheritance. A class may still combine in-project bases (a marker such
as ``LocalFault``, the FCoP port's parts over one ``PortBase``), but every in-project
ancestor that *carries state* (sets ``self.x``, declares fields, or has ``__slots__``)
must lie on one line of descent: state comes from one place, behaviour may be mixed in.
Read from the source with ``ast``; protocols, enums and typed dicts only declare shapes.
"""

from __future__ import annotations

import ast
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path

SRC = Path(__file__).resolve().parents[1] / "src"

SHAPES_ONLY = {"Protocol", "Enum", "StrEnum", "IntEnum", "TypedDict", "NamedTuple"}
"""Bases whose subclasses declare a shape, not state an instance holds."""


@dataclass
class ClassInfo:
    module: str
    name: str
    node: ast.ClassDef
    base_names: list[str]
    bases: list[ClassInfo] = field(default_factory=list)

    @property
    def key(self) -> str:
        return f"{self.module}.{self.name}"

    def ancestry(self) -> Iterator[ClassInfo]:
        """The class and its in-project ancestors."""
        seen: set[str] = set()
        todo = [self]
        while todo:
            info = todo.pop()
            if info.key in seen:
                continue
            seen.add(info.key)
            yield info
            todo.extend(info.bases)

    @property
    def carries_state(self) -> bool:
        if any(name in SHAPES_ONLY for name in self.base_names):
            return False
        for statement in self.node.body:
            if isinstance(statement, ast.AnnAssign) and not _is_classvar(statement.annotation):
                return True
            if isinstance(statement, ast.Assign) and _declares_slots(statement):
                return True
            if isinstance(statement, ast.FunctionDef | ast.AsyncFunctionDef) and _sets_self(
                statement
            ):
                return True
        return False


def _is_classvar(annotation: ast.expr) -> bool:
    text = ast.unparse(annotation)
    return text.startswith(("ClassVar", "typing.ClassVar", "Final", "typing.Final"))


def _declares_slots(statement: ast.Assign) -> bool:
    """``__slots__ = (...)`` with at least one name (an empty one is a mixin's promise)."""
    named = any(isinstance(t, ast.Name) and t.id == "__slots__" for t in statement.targets)
    empty = isinstance(statement.value, ast.Tuple) and not statement.value.elts
    return named and not empty


def _sets_self(function: ast.FunctionDef | ast.AsyncFunctionDef) -> bool:
    for node in ast.walk(function):
        targets: Iterable[ast.expr] = ()
        if isinstance(node, ast.Assign):
            targets = node.targets
        elif isinstance(node, ast.AnnAssign | ast.AugAssign):
            targets = (node.target,)
        for target in targets:
            if (
                isinstance(target, ast.Attribute)
                and isinstance(target.value, ast.Name)
                and target.value.id == "self"
            ):
                return True
    return False


def classes_in(sources: dict[str, str]) -> list[ClassInfo]:
    """Every class in ``sources`` (module name → text), its in-project bases resolved."""
    infos: list[ClassInfo] = []
    by_module: dict[str, dict[str, ClassInfo]] = {}
    imported: dict[str, dict[str, str]] = {}
    for module, text in sources.items():
        tree = ast.parse(text)
        names: dict[str, str] = {}
        for node in ast.walk(tree):
            if isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
                for alias in node.names:
                    names[alias.asname or alias.name] = f"{node.module}.{alias.name}"
            if isinstance(node, ast.ClassDef):
                base_names = [ast.unparse(b).split("[")[0].split(".")[-1] for b in node.bases]
                info = ClassInfo(module, node.name, node, base_names)
                infos.append(info)
                by_module.setdefault(module, {})[node.name] = info
        imported[module] = names
    everywhere = {info.key: info for info in infos}
    for info in infos:
        for base in info.node.bases:
            name = ast.unparse(base).split("[")[0]
            found = by_module[info.module].get(name)
            if found is None:
                qualified = imported[info.module].get(name.split(".")[0])
                found = everywhere.get(qualified) if qualified else None
            if found is not None and found is not info:
                info.bases.append(found)
    return infos


def state_from_two_lines(infos: Iterable[ClassInfo]) -> list[str]:
    """Classes whose stateful in-project ancestors do not lie on one line of descent."""
    broken = []
    for info in infos:
        if len(info.bases) < 2:
            continue
        stateful = {a.key: a for base in info.bases for a in base.ancestry() if a.carries_state}
        lines = {key: {a.key for a in cls.ancestry()} for key, cls in stateful.items()}
        for one in lines:
            for other in lines:
                if one < other and one not in lines[other] and other not in lines[one]:
                    broken.append(f"{info.key}: state from {one} and from {other}")
    return broken


def _sources() -> dict[str, str]:
    return {
        ".".join(path.relative_to(SRC).with_suffix("").parts): path.read_text(encoding="utf-8")
        for path in sorted((SRC / "baton").rglob("*.py"))
    }


def test_no_class_gets_state_from_two_lines_of_bases() -> None:
    assert state_from_two_lines(classes_in(_sources())) == []


def test_the_check_sees_mixed_bases_in_the_package() -> None:
    """The rule has something to look at: the FCoP port combines parts over one base."""
    combined = [i.key for i in classes_in(_sources()) if len(i.bases) >= 2]
    assert "baton.fcop_port.port.FcopPort" in combined


def test_the_check_can_fail() -> None:
    two_halves = """
class Book:
    def __init__(self) -> None:
        self.rows = []

class Steps:
    queue: list[str]

class Marker:
    def describe(self) -> str:
        return "no state"

class Executor(Steps, Book):
    pass

class Fine(Book, Marker):
    pass

class Child(Book):
    def more(self) -> None:
        self.extra = 1

class AlsoFine(Child, Book):
    pass
"""
    assert state_from_two_lines(classes_in({"m": two_halves})) == [
        "m.Executor: state from m.Book and from m.Steps"
    ]
