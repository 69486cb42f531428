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
_Call = tuple[dict[str, Any] | None, tuple[tuple[str, Any], ...]]
_CALLS: dict[tuple[type[BaseModel], tuple[str, ...]], _Call] = {}
"""Per model and call shape (the field names given, in order; a call site always gives
the same): the defaults to fill in, in field order (``None`` when the names given are
every field in order, so the keyword dict is the ``__dict__`` as it is), and the factories
of the fields left out. The names are checked once per shape, not per object."""


def _call(cls: type[BaseModel], names: tuple[str, ...]) -> _Call:
    defaults: dict[str, Any] = {}
    factories: list[tuple[str, Any]] = []
    missing: list[str] = []
    for name, info in cls.model_fields.items():
        defaults[name] = None
        if name in names:
            continue
        if info.default_factory is not None:
            factories.append((name, info.default_factory))
        elif info.default is PydanticUndefined:
            missing.append(name)
        else:
            defaults[name] = info.default
    unknown = sorted(set(names) - defaults.keys())
    if unknown:
        raise TypeError(f"{cls.__name__}: not fields: {unknown}")
    if missing:
        raise TypeError(f"{cls.__name__}: missing fields: {missing}")
    exact = names == tuple(defaults)
    call = _CALLS[cls, names] = (None if exact else defaults, tuple(factories))
    return call


# Any: the model's fields, which the caller built (not validated: see above).
def trusted(cls: type[M], /, **values: Any) -> M:
    """``cls(**values)`` without validating ``values`` (see the module docstring).

    Raises :class:`TypeError` for a name that is not a field or a required field left
    out: the only checks validation makes that a typed caller could still get wrong.
    """
    names = tuple(values)
    call = _CALLS.get((cls, names))
    defaults, factories = _call(cls, names) if call is None else call
    data = values if defaults is None else {**defaults, **values}
    for name, factory in factories:
        data[name] = factory()
    model = _new(cls)
    _set(model, "__dict__", data)
    _set(model, "__pydantic_fields_set__", set(names))
    _set(model, "__pydantic_extra__", None)
    _set(model, "__pydantic_private__", None)
    return model
