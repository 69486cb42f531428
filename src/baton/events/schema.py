"""The exported JSON Schema of the canonical event stream.

Generated from :mod:`baton.events.model`; the committed copy lives at
``schema/events.schema.json`` and a test fails when it is stale
(regenerate with ``baton schema --write``).
"""

from __future__ import annotations

import json
from typing import Annotated, Any, Literal, Union

from pydantic import BaseModel, ConfigDict, Field, TypeAdapter, create_model

from baton.events.model import PAYLOAD_TYPES, SCHEMA_VERSION, CanonicalEvent

__all__ = [
    "SCHEMA_ID",
    "event_json_schema",
    "render_schema",
]

SCHEMA_ID = f"https://baton.dev/schema/events/v{SCHEMA_VERSION}.json"


def _variant(event_type: str, payload_cls: type[BaseModel]) -> type[BaseModel]:
    name = "".join(part.capitalize() for part in event_type.replace("_", ".").split(".")) + "Event"
    fields: dict[str, Any] = {
        name_: (info.annotation, info)
        for name_, info in CanonicalEvent.model_fields.items()
        if name_ not in ("type", "payload")
    }
    fields["type"] = (Literal[event_type], Field())
    fields["payload"] = (payload_cls, Field())
    return create_model(name, __config__=ConfigDict(extra="forbid"), **fields)


# Any: a JSON Schema document (pydantic builds it).
def event_json_schema() -> dict[str, Any]:
    variants = [_variant(t, cls) for t, cls in sorted(PAYLOAD_TYPES.items())]
    union = Union[tuple(variants)]  # type: ignore[valid-type]  # noqa: UP007
    adapter: TypeAdapter[Any] = TypeAdapter(
        Annotated[union, Field(discriminator="type")]  # type: ignore[arg-type]
    )
    schema = adapter.json_schema(mode="serialization")
    schema["$schema"] = "https://json-schema.org/draft/2020-12/schema"
    schema["$id"] = SCHEMA_ID
    schema["title"] = f"baton canonical event (schema_version {SCHEMA_VERSION})"
    return schema


def render_schema() -> str:
    return json.dumps(event_json_schema(), indent=2, sort_keys=True, ensure_ascii=False) + "\n"
