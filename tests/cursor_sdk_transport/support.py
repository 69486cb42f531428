"""Helpers for the cursor-sdk tests: projects on the scripted bridge, traces, the schema.

The recorded bridge traffic (``BATON_CURSOR_BRIDGE_TRACE``) is checked against the
``sdk/v1`` protobuf contract shipped in the installed ``cursor-sdk`` wheel, compiled with
``grpcio-tools``' protoc into descriptors: every request, response and stream message must
parse as its RPC's declared message type under proto3's JSON mapping (unknown fields
refused), and every error must be a Connect error whose ``SdkErrorDetails`` decode.
"""

from __future__ import annotations

import base64
import functools
import json
import subprocess
import tempfile
from collections import Counter
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

from baton.lifeline import processes
from tests.support.project import baton_in, git_repo

KEY = "key_0123456789abcdef0123"
"""A dummy Cursor API key (never leaves the machine: the scripted bridge takes any)."""


def script(*steps: Mapping[str, Any], lead: str = "Do as scripted.") -> str:
    """A prompt holding one ``cursor-sdk-script`` block."""
    return f"{lead}\n```cursor-sdk-script\n{json.dumps(list(steps))}\n```\n"


def toml_str(value: str) -> str:
    return json.dumps(value)


def scripted_project(
    parent: Path, *, extra: str = "", profile: str = "cursor-scripted", credentials: bool = True
) -> Path:
    """A git repository with a ``cursor-sdk`` profile on baton's scripted bridge."""
    repo = git_repo(parent)
    trace = parent / "bridge-trace.ndjson"
    (repo / "baton.toml").write_text(
        f"[profiles.{profile}]\n"
        'extends = "cursor-sdk"\n'
        'command = ["$PYTHON", "-m", "baton.testing.cursor_bridge"]\n'
        + ('credentials = ["CURSOR_API_KEY"]\n' if credentials else "")
        + f"env = {{ BATON_CURSOR_BRIDGE_TRACE = {toml_str(str(trace))} }}\n"
        f"{extra}"
    )
    return repo


def run(
    repo: Path, *args: str, key: str | None = KEY, timeout: float = 120
) -> subprocess.CompletedProcess[str]:
    return baton_in(repo, *args, timeout=timeout, extra_env={"CURSOR_API_KEY": key} if key else {})


def events(stdout: str) -> list[dict[str, Any]]:
    return [json.loads(line) for line in stdout.splitlines() if line.startswith("{")]


def of_type(items: Iterable[dict[str, Any]], kind: str) -> list[dict[str, Any]]:
    return [e for e in items if e["type"] == kind]


def trace(repo: Path) -> list[dict[str, Any]]:
    path = repo.parent / "bridge-trace.ndjson"
    return [json.loads(line) for line in path.read_text().splitlines()]


def bridge_groups(lines: Iterable[Mapping[str, Any]]) -> list[int]:
    return [int(line["message"]["pgid"]) for line in lines if line["kind"] == "process"]


def group_alive(pgid: int) -> bool:
    return any(stat.pgrp == pgid and stat.live for _, stat in processes())


# ----------------------------------------------------------------------- schema


@functools.cache
def _pool() -> Any:
    import cursor_sdk
    import grpc_tools
    from google.protobuf import descriptor_pb2, descriptor_pool
    from grpc_tools import protoc

    proto = Path(cursor_sdk.__file__).parent / "_vendor" / "bridge" / "proto"
    include = Path(grpc_tools.__file__).parent / "_proto"
    files = [p.relative_to(proto).as_posix() for p in sorted(proto.rglob("*.proto"))]
    assert files, f"no .proto files in {proto}"
    with tempfile.TemporaryDirectory() as tmp:
        out = Path(tmp) / "sdk.pb"
        argv = ["protoc", f"-I{proto}", f"-I{include}", "--include_imports"]
        assert protoc.main([*argv, f"--descriptor_set_out={out}", *files]) == 0
        descriptors = descriptor_pb2.FileDescriptorSet.FromString(out.read_bytes())
    pool = descriptor_pool.DescriptorPool()
    for file in descriptors.file:
        pool.Add(file)
    return pool


def _parse(type_name: str, message: Any) -> None:
    from google.protobuf import json_format, message_factory

    cls = message_factory.GetMessageClass(_pool().FindMessageTypeByName(type_name))
    json_format.ParseDict(message, cls(), ignore_unknown_fields=False)


KNOWN_CLIENT_EXTRAS: dict[str, tuple[str, ...]] = {"Send": ("options", "apiKey")}
"""Fields the real client sends outside the contract, by RPC. cursor-sdk 1.1.0 adds the
agent's ``apiKey`` to ``SendOptions`` (``_options_with_api_key``), which ``sdk/v1`` does not
declare; the real bridge ignores unknown JSON fields (observed), so the key travels and is
discarded. Allowed here by name only; :func:`check_against_schema` counts each use."""


def _without_known_extra(method: str, message: Any) -> tuple[Any, bool]:
    path = KNOWN_CLIENT_EXTRAS.get(method)
    if path is None or not isinstance(message, dict):
        return message, False
    outer, leaf = path
    inner = message.get(outer)
    if not isinstance(inner, dict) or leaf not in inner:
        return message, False
    return {**message, outer: {k: v for k, v in inner.items() if k != leaf}}, True


def check_against_schema(lines: Iterable[Mapping[str, Any]]) -> Counter[str]:
    """Every recorded message parses as its RPC's type; returns what was checked, by kind."""
    checked: Counter[str] = Counter()
    for line in lines:
        kind = line["kind"]
        if kind == "process":
            continue
        method = _pool().FindServiceByName(line["service"]).FindMethodByName(line["method"])
        assert method is not None, line
        if kind == "request":
            message, extra = _without_known_extra(line["method"], line["message"])
            checked["known_client_extra"] += extra
            _parse(method.input_type.full_name, message)
        elif kind in ("response", "stream"):
            assert kind == ("stream" if method.server_streaming else "response"), line
            _parse(method.output_type.full_name, line["message"])
        else:
            assert kind == "error", line
            error = line["message"]
            assert set(error) <= {"code", "message", "details"}, error
            for detail in error.get("details", []):
                assert detail["type"] == "sdk.v1.SdkErrorDetails"
                value = detail["value"] + "=" * (-len(detail["value"]) % 4)
                _decode("sdk.v1.SdkErrorDetails", base64.b64decode(value))
        checked[kind] += 1
    return checked


def _decode(type_name: str, data: bytes) -> None:
    from google.protobuf import message_factory

    cls = message_factory.GetMessageClass(_pool().FindMessageTypeByName(type_name))
    cls.FromString(data)
