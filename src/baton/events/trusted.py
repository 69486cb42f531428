"""Payloads built without validation, for values that are typed by construction.

The pydantic models of :mod:`baton.events.model` stay the schema of record. On the
ingest hot path (one tool progress, one transcript chunk per agent update) their
validation cost more than the rest of normalizing: :func:`trusted` builds the very
object validation would build from the same keyword arguments (same ``__dict__`` in
field order, defaults filled in, the same set of fields given), but checks nothing
beyond the field names. Only code whose arguments are typed by construction calls
it (the tool tracker, the transcript coalescer, :func:`baton.events.bounds.bounded_output`);
``tests/events/test_trusted_payloads.py`` holds it equal to validation over recorded
traces and hostile updates.
"""

from __future__ import annotations

from typing import Any, TypeVar

from pydantic import BaseModel
from pydantic_core import PydanticUndefined

__all__ = ["trusted"]

M = TypeVar("M", bound=BaseModel)

_new = BaseModel.__new__
_set = object.__setattr__
_Shape = tuple[dict[str, Any], tuple[tuple[str, Any], ...], frozenset[str]]
_SHAPES: dict[type[BaseModel], _Shape] = {}
"""Per model: its fields in order with their defaults (``None`` where a factory or
nothing gives it), the factories (called per object), and the required fields."""


def _shape(cls: type[BaseModel]) -> _Shape:
    shape = _SHAPES.get(cls)
    if shape is None:
        defaults: dict[str, Any] = {}
        factories: list[tuple[str, Any]] = []
        required: set[str] = set()
        for name, info in cls.model_fields.items():
            defaults[name] = None
            if info.default_factory is not None:
                factories.append((name, info.default_factory))
            elif info.default is PydanticUndefined:
                required.add(name)
            else:
                defaults[name] = info.default
        shape = _SHAPES[cls] = (defaults, tuple(factories), frozenset(required))
    return shape


def trusted(cls: type[M], /, **values: Any) -> M:
    """``cls(**values)`` without validating ``values`` (see the module docstring).

    Raises :class:`TypeError` for a name that is not a field or a required field left
    out: the only checks validation makes that a typed caller could still get wrong.
    """
    defaults, factories, required = _shape(cls)
    data = {**defaults, **values}
    if len(data) != len(defaults):
        raise TypeError(f"{cls.__name__}: not fields: {sorted(set(values) - set(defaults))}")
    if not required <= values.keys():
        raise TypeError(f"{cls.__name__}: missing fields: {sorted(required - values.keys())}")
    for name, factory in factories:
        if name not in values:
            data[name] = factory()
    model = _new(cls)
    _set(model, "__dict__", data)
    _set(model, "__pydantic_fields_set__", set(values))
    _set(model, "__pydantic_extra__", None)
    _set(model, "__pydantic_private__", None)
    return model
