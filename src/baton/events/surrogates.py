"""Lone surrogates: valid in JSON (``"\\ud800"``), not in UTF-8, so they cannot be stored.

One repair for every place that meets them (a frame read from an agent, an event about to
be stored). Standard library only: :mod:`baton.acp.framing` imports it, and the built-in
agent must start without loading pydantic.
"""

from __future__ import annotations

import re
from typing import Any

__all__ = ["repair_unencodable"]

_SURROGATE = re.compile("[\ud800-\udfff]")


# Any: any JSON value (and the same value, repaired).
def repair_unencodable(value: Any) -> tuple[Any, bool]:
    """``value`` with every lone surrogate (valid in JSON, not in UTF-8) replaced by
    U+FFFD, and whether anything was replaced. Containers are copied only then."""
    if isinstance(value, str):
        if _SURROGATE.search(value) is None:
            return value, False
        return _SURROGATE.sub("\ufffd", value), True
    if isinstance(value, dict):
        changed = False
        out: dict[Any, Any] = {}
        for k, v in value.items():
            k2, c1 = repair_unencodable(k)
            v2, c2 = repair_unencodable(v)
            out[k2] = v2
            changed = changed or c1 or c2
        return (out, True) if changed else (value, False)
    if isinstance(value, list | tuple):
        items = [repair_unencodable(v) for v in value]
        if any(c for _, c in items):
            return [v for v, _ in items], True
        return value, False
    return value, False
