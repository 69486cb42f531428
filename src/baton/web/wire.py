"""What the web puts on the wire: JSON objects, named once so a signature says which
dicts are JSON (the API's replies, the data a page renders from)."""

from __future__ import annotations

from typing import Any

__all__ = ["JsonObject"]

JsonObject = dict[str, Any]
"""A JSON object the API sends or a page renders from (``Any``: JSON values, whose
shape the API's OpenAPI document gives, not the type system)."""
