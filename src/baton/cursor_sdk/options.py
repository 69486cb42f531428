"""ACP session parameters → Cursor SDK options, sans-I/O.

* :func:`sdk_mcp_servers`: the ACP ``mcpServers`` list of ``session/new`` (stdio entries
  ``{name, command, args, env: [{name, value}]}``, HTTP ones ``{type, name, url,
  headers: [{name, value}]}``) → the SDK's ``mcpServers`` map, which the transport passes
  on every ``Send`` (``SendOptions.mcpServers``): the CodeFlow mechanism, so the role's
  tools are there on every run, resumed agent or not.
* :func:`prompt_text`: an ACP prompt (content blocks) → the ``UserMessage`` text; the SDK
  takes text (and base64 images, not converted here): other blocks are described, not
  silently dropped.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from baton.acp import jsonrpc
from baton.acp.jsonrpc import RpcError
from baton.jsontypes import JsonObject, JsonValue

__all__ = ["prompt_text", "sdk_mcp_servers"]

INVALID_PARAMS = jsonrpc.INVALID_PARAMS


def _pairs(value: Any, what: str) -> dict[str, str]:
    if value is None:
        return {}
    if not isinstance(value, list):
        raise RpcError(INVALID_PARAMS, f"{what} must be a list of {{name, value}}")
    out: dict[str, str] = {}
    for item in value:
        if not isinstance(item, Mapping) or not isinstance(item.get("name"), str):
            raise RpcError(INVALID_PARAMS, f"{what}: every item needs a string name")
        out[item["name"]] = str(item.get("value", ""))
    return out


def sdk_mcp_servers(servers: JsonValue) -> dict[str, JsonObject]:
    """The SDK's ``mcpServers`` for an ACP ``mcpServers`` list (see the module docstring)."""
    if servers is None:
        return {}
    if not isinstance(servers, list):
        raise RpcError(INVALID_PARAMS, "mcpServers must be a list")
    out: dict[str, dict[str, Any]] = {}
    for entry in servers:
        if not isinstance(entry, Mapping) or not isinstance(entry.get("name"), str):
            raise RpcError(INVALID_PARAMS, "every mcpServers entry needs a string name")
        name = entry["name"]
        if name in out:
            raise RpcError(INVALID_PARAMS, f"two mcpServers are named {name!r}")
        kind = entry.get("type", "stdio")
        if kind in ("http", "sse"):
            url = entry.get("url")
            if not isinstance(url, str):
                raise RpcError(INVALID_PARAMS, f"mcpServers {name!r}: url must be a string")
            out[name] = {
                "type": kind,
                "url": url,
                "headers": _pairs(entry.get("headers"), f"mcpServers {name!r} headers"),
            }
            continue
        command = entry.get("command")
        args = entry.get("args", [])
        if kind != "stdio" or not isinstance(command, str) or not isinstance(args, list):
            raise RpcError(INVALID_PARAMS, f"mcpServers {name!r}: not a stdio or http entry")
        out[name] = {
            "type": "stdio",
            "command": command,
            "args": [str(a) for a in args],
            "env": _pairs(entry.get("env"), f"mcpServers {name!r} env"),
        }
    return out


def prompt_text(blocks: JsonValue) -> str:
    """The text of an ACP prompt: text blocks joined; resource links by their URI."""
    if not isinstance(blocks, Sequence) or isinstance(blocks, str):
        raise RpcError(INVALID_PARAMS, "prompt must be a list of content blocks")
    parts: list[str] = []
    for block in blocks:
        if not isinstance(block, Mapping):
            raise RpcError(INVALID_PARAMS, "every prompt block must be an object")
        kind = block.get("type")
        if kind == "text" and isinstance(block.get("text"), str):
            parts.append(block["text"])
        elif kind == "resource_link" and isinstance(block.get("uri"), str):
            parts.append(f"[{block.get('name') or 'resource'}]({block['uri']})")
        elif kind == "resource" and isinstance(block.get("resource"), Mapping):
            resource = block["resource"]
            text = resource.get("text")
            if isinstance(text, str):
                parts.append(text)
        else:
            raise RpcError(
                INVALID_PARAMS, f"the cursor-sdk transport takes text prompts, not {kind!r} blocks"
            )
    return "\n".join(parts)
