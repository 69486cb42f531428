"""Validate recorded ACP traffic, both directions, against the official ACP JSON Schema.

The schema ships in the npm package ``@agentclientprotocol/sdk`` (``schema/v1/schema.json``);
``claude-agent-acp`` 0.101.0 depends on exactly ``@agentclientprotocol/sdk`` 2.4.0, so the
test tier's install (``scripts/install-agents``) brings it. Every ``$defs`` entry carries
``x-method`` (and ``x-side``, the receiver), which is how a message is matched to its
definition: a request's ``params`` against ``<Name>Request``, a notification's against
``<Name>Notification``, a response's ``result`` against the ``<Name>Response`` of the method
it answers (matched by id across the two directions), an error against ``Error``.

Extension methods (``_…``) are checked only as JSON-RPC envelopes, and so are the vendor
methods of agents that do not follow that rule when the caller names their prefixes (Qwen
Code's ``qwen/…`` and ``craft/…``, Cursor's ``cursor/…``); any other method the schema does not
define is a finding, as is a response to nothing::

    problems = WireValidator.load().validate(read_tap(log))
    assert problems == []
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from jsonschema import Draft202012Validator
from referencing import Registry, Resource

from tests.support.agents import AGENTS_DIR

__all__ = ["SCHEMA_PACKAGE_VERSION", "WireValidator", "schema_path"]

SCHEMA_PACKAGE_VERSION = "2.4.0"


def schema_path(root: Path = AGENTS_DIR) -> Path:
    """The schema shipped by ``@agentclientprotocol/sdk`` under the installed Claude agent."""
    sdk = root / "claude" / "node_modules" / "@agentclientprotocol" / "sdk"
    meta = json.loads((sdk / "package.json").read_text(encoding="utf-8"))
    if meta.get("version") != SCHEMA_PACKAGE_VERSION:
        raise RuntimeError(
            f"@agentclientprotocol/sdk is {meta.get('version')}, the tests expect "
            f"{SCHEMA_PACKAGE_VERSION}"
        )
    return sdk / "schema" / "v1" / "schema.json"


@dataclass
class WireValidator:
    schema: dict[str, Any]
    _validators: dict[str, Draft202012Validator] = field(default_factory=dict)
    _by_method: dict[tuple[str, str], str] = field(default_factory=dict)

    @classmethod
    def load(cls, path: Path | None = None) -> WireValidator:
        schema = json.loads((path or schema_path()).read_text(encoding="utf-8"))
        validator = cls(schema)
        for name, definition in schema["$defs"].items():
            method = definition.get("x-method") if isinstance(definition, Mapping) else None
            if not isinstance(method, str):
                continue
            for suffix in ("Request", "Notification", "Response"):
                if name.endswith(suffix):
                    validator._by_method[(method, suffix)] = name
        return validator

    def definition(self, name: str) -> Draft202012Validator:
        if name not in self._validators:
            resource = Resource.from_contents(self.schema)
            registry: Registry[Any] = Registry().with_resource("urn:acp", resource)
            self._validators[name] = Draft202012Validator(
                {"$ref": f"urn:acp#/$defs/{name}"}, registry=registry
            )
        return self._validators[name]

    def _check(self, name: str, value: Any, where: str) -> list[str]:
        errors = sorted(self.definition(name).iter_errors(value), key=lambda e: list(e.path))
        return [
            f"{where}: {name}{''.join(f'[{p!r}]' for p in e.path)}: {e.message[:300]}"
            for e in errors[:5]
        ]

    def validate(
        self, records: Iterable[Mapping[str, Any]], *, vendor: tuple[str, ...] = ()
    ) -> list[str]:
        """Every schema violation in the recording (an empty list when it all conforms).

        ``vendor``: method prefixes to treat like ``_`` extensions (checked as envelopes).
        """
        extension = ("_", *vendor)
        problems: list[str] = []
        requests: dict[tuple[str, str], str] = {}  # (sender, json id) -> method
        for index, record in enumerate(records):
            direction = record.get("dir")
            msg = record.get("msg")
            where = f"#{index} {direction}"
            if not isinstance(msg, Mapping):
                problems.append(f"{where}: not a JSON object: {str(record.get('raw'))[:200]}")
                continue
            if msg.get("jsonrpc") != "2.0":
                problems.append(f"{where}: missing jsonrpc 2.0")
            method = msg.get("method")
            if isinstance(method, str):
                where += f" {method}"
                kind = "Request" if "id" in msg else "Notification"
                if kind == "Request":
                    requests[(str(direction), json.dumps(msg["id"]))] = method
                if method.startswith(extension):
                    continue
                name = self._by_method.get((method, kind))
                if name is None:
                    problems.append(f"{where}: no {kind.lower()} {method!r} in the ACP schema")
                    continue
                problems += self._check(name, msg.get("params"), where)
                continue
            if "id" not in msg:
                problems.append(f"{where}: neither a request, a notification nor a response")
                continue
            sender = "agent" if direction == "client" else "client"
            asked = requests.pop((sender, json.dumps(msg["id"])), None)
            if asked is None:
                problems.append(f"{where}: response to unknown id {msg['id']!r}")
                continue
            where += f" response to {asked}"
            if "error" in msg:
                problems += self._check("Error", msg["error"], where)
            elif "result" not in msg:
                problems.append(f"{where}: a response needs result or error")
            elif not asked.startswith(extension):
                name = self._by_method.get((asked, "Response"))
                if name is None:
                    problems.append(f"{where}: no response {asked!r} in the ACP schema")
                else:
                    problems += self._check(name, msg["result"], where)
        return problems
