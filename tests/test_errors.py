"""Every exception class baton defines is inside its one documented tree."""

from __future__ import annotations

import importlib
import inspect
import pkgutil
import re

import baton
import baton.errors as errors
from baton.errors import BatonError, LocalFault, RemoteFault

PENDING: dict[str, str] = {}
"""Known gaps and who closes them; a stale entry fails."""


def _exception_classes() -> dict[str, type[BaseException]]:
    found: dict[str, type[BaseException]] = {}
    for info in pkgutil.walk_packages(baton.__path__, "baton."):
        if info.name.endswith("__main__"):
            continue
        module = importlib.import_module(info.name)
        for name, value in vars(module).items():
            if (
                inspect.isclass(value)
                and issubclass(value, BaseException)
                and value.__module__ == module.__name__
            ):
                found[f"{module.__name__}.{name}"] = value
    return found


CLASSES = _exception_classes()


def test_every_exception_is_a_baton_error() -> None:
    outside = sorted(
        name
        for name, cls in CLASSES.items()
        if not issubclass(cls, BatonError) and name not in PENDING
    )
    assert outside == []


def test_pending_gaps_are_still_gaps() -> None:
    for name in PENDING:
        if name in CLASSES:
            assert not issubclass(CLASSES[name], BatonError), f"{name} is fixed: drop it"


def test_the_tree_in_the_docstring_names_every_class_of_errors_py() -> None:
    doc = errors.__doc__ or ""
    for name, cls in vars(errors).items():
        if inspect.isclass(cls) and issubclass(cls, BatonError):
            assert name in doc, f"{name} is missing from the error tree"


def test_fault_marks_are_the_documented_ones() -> None:
    """A class marked ``[local]``/``[remote]`` in the tree carries that mark as a base."""
    doc = errors.__doc__ or ""
    for name, cls in vars(errors).items():
        if not (inspect.isclass(cls) and issubclass(cls, BatonError)) or cls is BatonError:
            continue
        line = next(x for x in doc.splitlines() if re.search(rf"── {name}\b", x))
        assert ("[local]" in line) == (LocalFault in cls.__bases__), name
        assert ("[remote]" in line) == (RemoteFault in cls.__bases__), name
    both = [
        n for n, c in CLASSES.items() if issubclass(c, LocalFault) and issubclass(c, RemoteFault)
    ]
    assert both == [], "nothing is both baton's fault and the peer's"
