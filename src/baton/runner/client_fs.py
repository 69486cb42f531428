"""The ``fs/*`` client methods, contained to the session's workspace.

Agents that write through the client (after a permission request) get their
writes checked here: the path must resolve inside the workspace, through no
symlink, to a regular file. Refusals raise :class:`SecurityError`, which the
handler turns into a JSON-RPC error for the agent and a ``security.path_refused``
event for the human.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

from baton.acp.jsonrpc import RpcError
from baton.errors import SecurityError
from baton.fsutil import atomic_write
from baton.security.paths import resolve_inside

MAX_READ_BYTES = 16 * 1024 * 1024
MAX_WRITE_BYTES = 16 * 1024 * 1024


def _path_param(params: Mapping[str, Any]) -> str:
    path = params.get("path")
    if not isinstance(path, str) or not path:
        raise RpcError.invalid_params("path must be a non-empty string")
    return path


def read_text_file(workspace: Path, params: Mapping[str, Any]) -> dict[str, Any]:
    target = resolve_inside(workspace, _path_param(params), must_exist=True, regular_file=True)
    size = target.stat().st_size
    if size > MAX_READ_BYTES:
        raise RpcError.invalid_params(
            f"file is {size:,} bytes; the read limit is {MAX_READ_BYTES:,}"
        )
    try:
        text = target.read_text(encoding="utf-8")
    except UnicodeDecodeError as exc:
        raise RpcError.invalid_params(f"not a UTF-8 text file: {exc.reason}") from exc
    line, limit = params.get("line"), params.get("limit")
    if line is not None or limit is not None:
        lines = text.splitlines(keepends=True)
        start = max(0, (line if isinstance(line, int) else 1) - 1)
        stop = start + limit if isinstance(limit, int) and limit >= 0 else None
        text = "".join(lines[start:stop])
    return {"content": text}


def write_text_file(workspace: Path, params: Mapping[str, Any]) -> str:
    """Write atomically and durably; returns the resolved path (for the session's record)."""
    content = params.get("content")
    if not isinstance(content, str):
        raise RpcError.invalid_params("content must be a string")
    data = content.encode("utf-8", errors="surrogatepass")
    if len(data) > MAX_WRITE_BYTES:
        raise RpcError.invalid_params(f"content exceeds {MAX_WRITE_BYTES:,} bytes")
    target = resolve_inside(workspace, _path_param(params), must_exist=False, regular_file=True)
    parent = target.parent
    if not parent.exists():
        # Create missing parents one by one, re-checking containment for each.
        resolve_inside(workspace, parent, must_exist=False, regular_file=False)
        parent.mkdir(parents=True, exist_ok=True)
    mode = target.stat().st_mode & 0o777 if target.exists() else 0o644
    atomic_write(target, data, mode=mode)
    return str(target)


__all__ = ["SecurityError", "read_text_file", "write_text_file"]
