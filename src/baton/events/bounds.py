"""Bounds for diagnostic data: tails, digests, caps. Never for authoritative data.

Tool output and stderr are diagnostic: keep the last bytes, the total size and a
SHA-256 of everything, and say that it was cut. Approval documents and plans are
authoritative and are rejected when too large, elsewhere (``baton.requests``).
"""

from __future__ import annotations

import hashlib
import json
import math
from typing import Any

from baton.events.model import ToolOutput
from baton.events.trusted import trusted

__all__ = [
    "DIAGNOSTIC_PREVIEW_BYTES",
    "DIFF_TEXT_BYTES",
    "OUTPUT_TAIL_BYTES",
    "RAW_VALUE_BYTES",
    "TEXT_FIELD_CHARS",
    "bounded_output",
    "bounded_value",
    "clip_text",
    "utf8_tail",
]

OUTPUT_TAIL_BYTES = 64 * 1024
DIAGNOSTIC_PREVIEW_BYTES = 4 * 1024
TEXT_FIELD_CHARS = 4000
RAW_VALUE_BYTES = 16 * 1024
DIFF_TEXT_BYTES = 256 * 1024


def utf8_tail(text: str, limit: int) -> tuple[str, int, bool]:
    """The last ``limit`` bytes of ``text`` cut on a character boundary."""
    data = text.encode("utf-8", errors="surrogatepass")
    if len(data) <= limit:
        return text, len(data), False
    tail = data[-limit:].decode("utf-8", errors="ignore")
    return tail, len(data), True


def bounded_output(text: str, limit: int = OUTPUT_TAIL_BYTES) -> ToolOutput:
    data = text.encode("utf-8", errors="surrogatepass")
    digest = hashlib.sha256(data).hexdigest()
    if len(data) <= limit:
        return trusted(ToolOutput, tail=text, total_bytes=len(data), sha256=digest, truncated=False)
    tail = data[-limit:].decode("utf-8", errors="ignore")
    return trusted(ToolOutput, tail=tail, total_bytes=len(data), sha256=digest, truncated=True)


def clip_text(text: str, limit: int = TEXT_FIELD_CHARS) -> str:
    """Short display fields (titles, summaries): cut with a visible marker."""
    if len(text) <= limit:
        return text
    return text[: limit - 1] + "…"


def measured(value: object) -> float | None:
    """A number an agent reports as measured (a duration, a cost): a JSON number that is
    finite and not negative, else ``None``. JSON from an agent may decode to ``inf`` or
    ``nan`` (``1e999``, ``Infinity``) or to a bool: none is a measurement, and ``int()``
    of the first two raises."""
    if isinstance(value, bool) or not isinstance(value, int | float):
        return None
    if not math.isfinite(value) or value < 0:
        return None
    return float(value)


# Any: any JSON value, kept or replaced whole.
def bounded_value(value: Any, limit: int = RAW_VALUE_BYTES) -> Any:
    """A JSON value kept whole when small, else replaced by its size and digest."""
    if value is None or isinstance(value, bool | int | float):
        return value
    if isinstance(value, str) and len(value) <= limit // 4:
        return value
    encoded = json.dumps(value, ensure_ascii=False, separators=(",", ":"), default=str)
    data = encoded.encode("utf-8", errors="surrogatepass")
    if len(data) <= limit:
        return value
    return {
        "_baton_omitted": True,
        "bytes": len(data),
        "sha256": hashlib.sha256(data).hexdigest(),
        "head": data[:512].decode("utf-8", errors="ignore"),
    }
