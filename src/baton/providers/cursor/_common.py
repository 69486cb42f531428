"""Small pure helpers shared by the Cursor normalizers (ids, strings, replies)."""

from __future__ import annotations

import hashlib
import re
from typing import Any

from baton.events.bounds import clip_text
from baton.jsontypes import JsonObject, JsonValue

_SAFE_ID = re.compile(r"^[A-Za-z0-9._:-]{1,160}$")


def safe_id(native: str, prefix: str) -> str:
    """A canonical id: the native id when it is already safe, else a stable digest.

    Canonical ids are ``[A-Za-z0-9._:-]``, at most 160 characters, so surfaces can
    use them in URLs and filenames. A digest (not a lossy rewrite) keeps two
    different native ids from colliding after sanitizing.
    """
    if _SAFE_ID.match(native):
        return native
    digest = hashlib.sha256(native.encode("utf-8", errors="surrogatepass")).hexdigest()[:24]
    return f"{prefix}-{digest}"


def opt_str(value: JsonValue, limit: int = 4000) -> str | None:
    """A string field, bounded for display, or ``None`` when absent or not a string."""
    if isinstance(value, str):
        return clip_text(value, limit)
    return None


def native_id(value: JsonValue) -> str | None:
    """A native id: non-empty string, or an integer spelled as one (JSON ids may be either)."""
    if isinstance(value, bool):
        return None
    if isinstance(value, int):
        return str(value)
    if isinstance(value, str) and value:
        return value
    return None


def outcome(value: str, **fields: JsonValue) -> JsonObject:
    """Cursor's reply envelope ``{"outcome": {"outcome": value, ...}}`` (acp.md §2)."""
    body: dict[str, Any] = {"outcome": value}
    body.update({k: v for k, v in fields.items() if v is not None})
    return {"outcome": body}
