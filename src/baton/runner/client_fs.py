"""The ``fs/*`` client methods, contained to the session's workspace.

Agents that write through the client (after a permission request) get their writes
checked here: the path must resolve inside the workspace, through no symlink, to a
regular file. A refusal raises :class:`SecurityError`, which the handler turns into a
JSON-RPC error for the agent and a ``security.path_refused`` event for the human.

Everything else is answered with ACP's code for the case (:mod:`baton.acp.params`): a
file that is not there (inside the workspace) is *resource not found* (-32002), no
security matter (agents read a file before writing it, to learn whether it exists);
params that do not fit, a file too large or not text, *invalid params* (-32602); the
filesystem failing under a valid request, *internal error* (-32603).
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

from baton.acp import params as acp_params
from baton.acp.jsonrpc import RpcError
from baton.errors import SecurityError
from baton.fsutil import atomic_write
from baton.jsontypes import JsonMapping, JsonObject
from baton.security.paths import display_path, resolve_inside

MAX_READ_BYTES = 16 * 1024 * 1024
MAX_WRITE_BYTES = 16 * 1024 * 1024


def _path(params: Mapping[str, Any]) -> str:
    return acp_params.required_text(params, "path", non_empty=True)


def read_text_file(workspace: Path, params: JsonMapping) -> JsonObject:
    """``{content}``: the file's text, or the lines ``line`` (1-based) .. ``line+limit``."""
    line = acp_params.optional_uint(params, "line", maximum=acp_params.UINT32_MAX)
    limit = acp_params.optional_uint(params, "limit", maximum=acp_params.UINT32_MAX)
    # Contained first (a refusal is a refusal, whether or not the file exists); a missing
    # tail of the path is then simply not there.
    target = resolve_inside(workspace, _path(params), must_exist=False, regular_file=True)
    try:
        size = target.stat().st_size
    except FileNotFoundError:
        shown = display_path(workspace, target)
        raise RpcError.not_found(f"{shown} does not exist in the workspace") from None
    if size > MAX_READ_BYTES:
        raise RpcError.invalid_params(
            f"the file is {size:,} bytes; baton reads at most {MAX_READ_BYTES:,}"
        )
    try:
        text = target.read_text(encoding="utf-8")
    except UnicodeDecodeError as exc:
        raise RpcError.invalid_params(f"not a UTF-8 text file ({exc.reason})") from exc
    if line is not None or limit is not None:
        lines = text.splitlines(keepends=True)
        start = max(0, (line or 1) - 1)
        stop = start + limit if limit is not None else None
        text = "".join(lines[start:stop])
    return {"content": text}


def write_text_file(workspace: Path, params: JsonMapping) -> str:
    """Write atomically and durably; returns the resolved path (for the session's record)."""
    content = acp_params.required_text(params, "content")
    data = content.encode("utf-8", errors="surrogatepass")
    if len(data) > MAX_WRITE_BYTES:
        raise RpcError.invalid_params(f"content exceeds {MAX_WRITE_BYTES:,} bytes")
    target = resolve_inside(workspace, _path(params), must_exist=False, regular_file=True)
    parent = target.parent
    if not parent.exists():
        # Create missing parents one by one, re-checking containment for each.
        resolve_inside(workspace, parent, must_exist=False, regular_file=False)
        parent.mkdir(parents=True, exist_ok=True)
    mode = target.stat().st_mode & 0o777 if target.exists() else 0o644
    atomic_write(target, data, mode=mode)
    return str(target)


__all__ = [
    "MAX_READ_BYTES",
    "MAX_WRITE_BYTES",
    "SecurityError",
    "read_text_file",
    "write_text_file",
]
