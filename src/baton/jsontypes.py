"""The JSON of baton's edges: what ``json.loads`` returns and ``json.dumps`` takes.

Agents speak JSON-RPC, the Cursor SDK bridge speaks Connect JSON, and manifests, traces
and probes are JSON files. Such a value is read once at the edge (:mod:`baton.acp.params`,
the provider normalizers, pydantic models) and travels inside as a typed record. These
three names mark that edge in a signature: a parameter typed ``JsonObject`` is a decoded
JSON object nobody has vouched for yet, a return typed ``JsonObject`` goes to
``json.dumps``.

They stand for ``Any`` on purpose: a recursive union (``dict[str, JsonValue] |
list[JsonValue] | str | …``) would make every reader cast a value its own ``isinstance``
check already narrowed, and pydantic and the ACP SDK take and give ``Any`` anyway. The
checking is the edge's job, not the type's.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

__all__ = ["JsonMapping", "JsonObject", "JsonValue"]

JsonValue = Any
"""One decoded JSON value (object, array, string, number, boolean or null)."""

JsonObject = dict[str, Any]
"""One decoded JSON object: a message, its params or result, a record on its way to disk."""

JsonMapping = Mapping[str, Any]
"""A decoded JSON object only read (``params`` of a request, a probe, a session result)."""
