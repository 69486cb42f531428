"""Validate recorded ACP traffic, both directions, against the official ACP JSON Schema.

The schema is the one the official TypeScript library ships: npm ``@agentclientprotocol/sdk``
:data:`SCHEMA_PACKAGE_VERSION` (the newest on the registry when pinned, 2026-12), file
``schema/v1/schema.json``: ACP protocol version 1 (the package's ``PROTOCOL_VERSION`` for
``v1``), its stable surface; the package's ``schema.unstable.json`` and ``v2`` drafts are not
used. ``scripts/install-agents`` installs exactly that version, on its own, into
``.cache/agents/acp-schema`` (``python -m tests.support.acp_schema DIR``), and the file's
SHA-256 is pinned here (:data:`SCHEMA_SHA256`): a different file fails every schema test.
(The Python SDK the project could use, ``agent-client-protocol`` 0.12.1, is generated from
schema-v1.19.0 and ships no JSON Schema.)

Every ``$defs`` entry carries ``x-method`` (and ``x-side``, the receiver), which is how a
message is matched to its definition: a request's ``params`` against ``<Name>Request``, a
notification's against ``<Name>Notification``, a response's ``result`` against the
``<Name>Response`` of the method it answers (matched by id across the two directions), an
error against ``Error``.

Extension methods (``_…``) are checked only as JSON-RPC envelopes, and so are the vendor
methods of agents that do not follow that rule when the caller names their prefixes (Qwen
Code's ``qwen/…`` and ``craft/…``, Cursor's ``cursor/…``); any other method the schema does not
define is a finding, as is a response to nothing::

    problems = WireValidator.load().validate(read_tap(log))
    assert problems == []
"""

from __future__ import annotations

import hashlib
import json
import shutil
import subprocess
import sys
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from jsonschema import Draft202012Validator
from referencing import Registry, Resource

from tests.support.agents import AGENTS_DIR

__all__ = [
    "PROTOCOL_VERSION",
    "SCHEMA_PACKAGE",
    "SCHEMA_PACKAGE_VERSION",
    "SCHEMA_SHA256",
    "WireValidator",
    "install",
    "schema_path",
]

SCHEMA_PACKAGE = "@agentclientprotocol/sdk"
SCHEMA_PACKAGE_VERSION = "2.4.0"
SCHEMA_SHA256 = "0d0b1ca83c4872e5473f68926a894c7a8203b59b118e2a79bfe43dd76fbcbc1a"
"""Of ``schema/v1/schema.json`` in :data:`SCHEMA_PACKAGE` :data:`SCHEMA_PACKAGE_VERSION`."""
PROTOCOL_VERSION = 1
"""The ACP protocol version the pinned schema describes."""
SCHEMA_DIR = "acp-schema"


def _schema_file(root: Path) -> Path:
    return root / SCHEMA_DIR / "node_modules" / SCHEMA_PACKAGE / "schema" / "v1" / "schema.json"


def _problem(root: Path) -> str | None:
    """Why the pinned schema is not usable under ``root`` (``None``: it is)."""
    package = _schema_file(root).parents[2] / "package.json"
    try:
        version = json.loads(package.read_text(encoding="utf-8")).get("version")
        digest = hashlib.sha256(_schema_file(root).read_bytes()).hexdigest()
    except (OSError, ValueError) as exc:
        return f"{SCHEMA_PACKAGE} is not installed under {root / SCHEMA_DIR} ({exc})"
    if version != SCHEMA_PACKAGE_VERSION:
        return f"{SCHEMA_PACKAGE} is {version}, the tests pin {SCHEMA_PACKAGE_VERSION}"
    if digest != SCHEMA_SHA256:
        return f"{SCHEMA_PACKAGE} {version}: schema.json has SHA-256 {digest}, not the pinned one"
    return None


def schema_path(root: Path = AGENTS_DIR) -> Path:
    """The pinned schema (checked: version and digest), installed by ``scripts/install-agents``."""
    problem = _problem(root)
    if problem is not None:
        raise RuntimeError(f"{problem}: run scripts/install-agents")
    return _schema_file(root)


def install(root: Path) -> Path:
    """Install the pinned schema package under ``root`` (kept when already right)."""
    if _problem(root) is None:
        return _schema_file(root)
    npm = shutil.which("npm")
    if npm is None:
        raise RuntimeError("npm is not on PATH: install Node.js first")
    target = root / SCHEMA_DIR
    shutil.rmtree(target, ignore_errors=True)
    target.mkdir(parents=True)
    (target / "package.json").write_text('{"name": "baton-acp-schema", "private": true}\n')
    spec = f"{SCHEMA_PACKAGE}@{SCHEMA_PACKAGE_VERSION}"
    argv = [npm, "install", "-E", spec, "--prefix", str(target), "--ignore-scripts"]
    argv += ["--no-audit", "--no-fund", "--omit=optional", "--loglevel=error"]
    subprocess.run(argv, check=True, cwd=target, timeout=600)
    return schema_path(root)


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


if __name__ == "__main__":  # scripts/install-agents: python -m tests.support.acp_schema DIR
    print(install(Path(sys.argv[1])))
