"""Reading fcop envelopes fast without reading them differently: a memo and a check.

* :class:`EnvelopeMemo`: fcop's own pure-Python parse (and validation), memoized by
  the SHA-256 of the bytes, so a hit is exactly what fcop would have computed;
* :func:`frontmatter_roundtrips`: whether bytes baton just emitted with fcop's
  emitter parse back (with libyaml, a tenth of the cost) to exactly the fields meant,
  the check before the memo is seeded with them. Never used on untrusted files.
"""

from __future__ import annotations

import hashlib
import threading
from collections import OrderedDict
from collections.abc import Callable
from typing import Any

import yaml
from fcop.errors import V4ProtocolError
from fcop.v4.encoding import _mapping, _parse_envelope_bytes, strict_text

from baton.fcop_port.records import FcopDict, FcopMapping

__all__ = ["EnvelopeMemo", "emitted_frontmatter", "frontmatter_roundtrips"]


class _CUniqueLoader(yaml.CSafeLoader):  # type: ignore[misc]
    """libyaml's parser with fcop's duplicate-key-rejecting mapping constructor."""


_CUniqueLoader.add_constructor(yaml.resolver.BaseResolver.DEFAULT_MAPPING_TAG, _mapping)


def emitted_frontmatter(data: bytes) -> FcopDict | None:
    """libyaml's parse of frontmatter PyYAML's emitter produced (None if it does not parse)."""
    try:
        text = strict_text(data)
        parsed = yaml.load(text.split("---\n", 2)[1], Loader=_CUniqueLoader)  # noqa: S506
    except (V4ProtocolError, yaml.YAMLError, IndexError):
        return None
    return parsed if isinstance(parsed, dict) else None


def frontmatter_roundtrips(data: bytes, fields: FcopMapping) -> bool:
    """Whether ``data``'s frontmatter parses (with libyaml) back to exactly ``fields``.

    Only used on bytes baton just produced with PyYAML's own emitter (fcop's
    ``yaml.safe_dump``): on emitter output the C and pure parsers agree (a
    property test holds them to it), so this is fcop's round-trip check at a
    tenth of the cost. Untrusted files are never parsed this way: libyaml
    accepts inputs PyYAML's pure scanner rejects.
    """
    parsed = emitted_frontmatter(data)
    return parsed is not None and parsed == dict(fields)


def _copy(value: Any) -> Any:
    """A deep copy of what a YAML safe load returns (``copy.deepcopy`` at a third of the cost).

    A self-referencing value (``&a [*a]``) raises RecursionError here, as it does
    in fcop's own ``_json_value`` when fcop validates it.
    """
    if isinstance(value, dict):
        return {key: _copy(item) for key, item in value.items()}
    if isinstance(value, list):
        return [_copy(item) for item in value]
    if isinstance(value, tuple):  # !!omap and !!pairs: tuples of (key, value)
        return tuple(_copy(item) for item in value)
    if isinstance(value, set):
        return set(value)
    return value  # str, int, float, bool, None, bytes, date/datetime: immutable


class EnvelopeMemo:
    """fcop's envelope parse and validation, memoized by the SHA-256 of the bytes.

    Parsing is a pure function of the bytes, and ``_Creation._validate`` a pure
    function of the parsed fields and the file's stem (the workspace id is
    fixed per binding), so a hit is exactly what fcop would have computed.
    Callers get a deep copy because fcop mutates parsed fields (``_relations``
    normalizes ``references``). Bounded LRU; thread-safe.
    """

    def __init__(self, capacity: int = 2048) -> None:
        self._capacity = capacity
        self._items: OrderedDict[bytes, tuple[FcopDict, set[str]]] = OrderedDict()
        self._lock = threading.Lock()
        self.misses = 0

    def _get(self, key: bytes) -> tuple[FcopDict, set[str]] | None:
        with self._lock:
            hit = self._items.get(key)
            if hit is not None:
                self._items.move_to_end(key)
            return hit

    def _put(self, key: bytes, fields: FcopDict, stems: set[str]) -> None:
        with self._lock:
            self._items[key] = (_copy(fields), stems)
            while len(self._items) > self._capacity:
                self._items.popitem(last=False)

    def parse(self, data: bytes) -> FcopDict:
        """``fcop.v4.encoding._parse_envelope_bytes(data)`` (fcop's pure-Python parser)."""
        key = hashlib.sha256(data).digest()
        hit = self._get(key)
        if hit is not None:
            copied: FcopDict = _copy(hit[0])
            return copied
        fields = _parse_envelope_bytes(data)  # raises fcop's INVALID_ENVELOPE
        self.misses += 1
        self._put(key, fields, set())
        return fields

    def validated(
        self, data: bytes, stem: str, validate: Callable[[FcopDict], FcopDict]
    ) -> FcopDict:
        """The parse of ``data``, passed through ``validate`` once per (bytes, stem)."""
        key = hashlib.sha256(data).digest()
        hit = self._get(key)
        if hit is not None and stem in hit[1]:
            copied: FcopDict = _copy(hit[0])
            return copied
        fields = validate(self.parse(data))
        with self._lock:
            entry = self._items.get(key)
            if entry is not None:
                entry[1].add(stem)
        return fields

    def seed(self, data: bytes, fields: FcopDict, stem: str) -> None:
        """Record bytes baton just emitted and checked (see :func:`frontmatter_roundtrips`)."""
        self._put(hashlib.sha256(data).digest(), fields, {stem})
