"""Loose types say why (issue 31 item 5): ``Any`` in a public signature, ``except Exception``.

``Any`` belongs at edges (decoded JSON, a row, an untyped library) and a broad ``except``
where one fault must not end more than itself; both are fine where the code says which.
A public function (or method) whose annotations name ``Any`` needs a ``#`` comment on its
header (the ``def`` through the ``:``, or its body's first line) or on the line above it; named aliases such as
:mod:`baton.jsontypes`' carry their reason in their docstring and are not ``Any`` here. An
``except Exception`` needs a comment on its line. Read from the source with ``ast``.
"""

from __future__ import annotations

import ast
import io
import tokenize
from pathlib import Path

SRC = Path(__file__).resolve().parents[1] / "src"


def _names_any(annotation: ast.expr) -> bool:
    return any(
        (isinstance(n, ast.Name) and n.id == "Any")
        or (isinstance(n, ast.Attribute) and n.attr == "Any")
        for n in ast.walk(annotation)
    )


def _commented_lines(text: str) -> set[int]:
    lines: set[int] = set()
    for token in tokenize.generate_tokens(io.StringIO(text).readline):
        if token.type == tokenize.COMMENT:
            lines.add(token.start[0])
    return lines


def _public(node: ast.FunctionDef | ast.AsyncFunctionDef, parents: dict[ast.AST, ast.AST]) -> bool:
    if node.name.startswith("_") and not (node.name.startswith("__") and node.name.endswith("__")):
        return False
    parent = parents.get(node)
    if isinstance(parent, ast.FunctionDef | ast.AsyncFunctionDef):
        return False  # a closure is nobody's signature
    return not (isinstance(parent, ast.ClassDef) and parent.name.startswith("_"))


def unexplained(text: str, where: str) -> list[str]:
    """``where:line what`` for each loose type in ``text`` that does not say why."""
    tree = ast.parse(text)
    comments = _commented_lines(text)
    parents = {child: node for node in ast.walk(tree) for child in ast.iter_child_nodes(node)}
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.ExceptHandler) and node.type is not None:
            broad = isinstance(node.type, ast.Name) and node.type.id == "Exception"
            if broad and node.lineno not in comments:
                found.append(f"{where}:{node.lineno} except Exception")
        if not isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
            continue
        if not _public(node, parents):
            continue
        arguments = [*node.args.posonlyargs, *node.args.args, *node.args.kwonlyargs]
        arguments += [a for a in (node.args.vararg, node.args.kwarg) if a is not None]
        annotations = [a.annotation for a in arguments if a.annotation is not None]
        annotations += [node.returns] if node.returns is not None else []
        if not any(_names_any(a) for a in annotations):
            continue
        start = min([d.lineno for d in node.decorator_list] + [node.lineno])
        header = range(start - 1, node.body[0].lineno + 1)  # a one-line def's body too
        if not comments.intersection(header):
            found.append(f"{where}:{node.lineno} {node.name}")
    return found


def test_every_loose_type_in_the_package_says_why() -> None:
    found = []
    for path in sorted((SRC / "baton").rglob("*.py")):
        found += unexplained(path.read_text(encoding="utf-8"), str(path.relative_to(SRC)))
    assert found == []


def test_the_check_can_fail() -> None:
    text = """
from typing import Any

def loose(value: Any) -> None: ...

def said(value: Any) -> None:  # Any: decoded JSON, checked below
    ...

# Any: a row of the store
def above(row: dict[str, Any]) -> None: ...

def _private(value: Any) -> None: ...

def typed(value: int) -> None:
    try:
        pass
    except Exception:
        pass
    try:
        pass
    except Exception:  # one bad file never stops the sweep
        pass
"""
    assert unexplained(text, "m.py") == ["m.py:4 loose", "m.py:17 except Exception"]
