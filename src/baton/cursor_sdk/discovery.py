"""The bridge's ``ready`` line on stderr: where it listens and its bearer token, checked.

A Cursor SDK bridge announces itself with one stderr line,
``cursor-sdk-bridge ready {json}`` (``schemaVersion`` 1, ``transport`` ``tcp``,
``protocol`` ``connect``, a ``url`` or ``host``/``port``, and ``authToken`` or an
``authTokenFile``), the contract ``cursor_sdk._bridge`` reads. baton reads it itself,
as untrusted input: the line is bounded, the address must be loopback (the token is
the bridge's whole authentication, and baton never sends it off the machine), the
token file is read bounded and must be a regular file.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any, Final
from urllib.parse import urlsplit

from baton.errors import AgentStartError
from baton.security.loopback import is_loopback_name
from baton.security.paths import open_regular

__all__ = [
    "MAX_READY_LINE",
    "READY_PREFIX",
    "BridgeEndpoint",
    "ReadyLineReader",
    "parse_ready_line",
]

READY_PREFIX: Final = b"cursor-sdk-bridge ready "
MAX_READY_LINE: Final = 16 * 1024
MAX_TOKEN_BYTES: Final = 4096


@dataclass(frozen=True, slots=True)
class BridgeEndpoint:
    """Where a ready bridge listens, and what it is."""

    url: str
    auth_token: str
    server_version: str = ""
    pid: int | None = None
    state_root: str = ""


def _read_token(path: str) -> str:
    try:
        with open_regular(path) as fh:
            data = fh.read(MAX_TOKEN_BYTES + 1)
    except OSError as exc:
        raise AgentStartError(
            f"the bridge's token file cannot be read: {exc.strerror or exc}"
        ) from None
    if len(data) > MAX_TOKEN_BYTES:
        raise AgentStartError("the bridge's token file is implausibly large")
    return data.decode("utf-8", errors="replace").strip()


def parse_ready_line(line: bytes) -> BridgeEndpoint:
    """The endpoint a ``ready`` line announces, or :class:`AgentStartError` saying why not."""
    if len(line) > MAX_READY_LINE:
        raise AgentStartError("the bridge's ready line is implausibly long")
    try:
        data: Any = json.loads(line[len(READY_PREFIX) :].decode("utf-8"))
    except (UnicodeDecodeError, ValueError):
        raise AgentStartError("the bridge's ready line is not JSON") from None
    if not isinstance(data, dict):
        raise AgentStartError("the bridge's ready line is not a JSON object")
    if data.get("schemaVersion") != 1:
        raise AgentStartError(f"unsupported bridge discovery schema {data.get('schemaVersion')!r}")
    if data.get("transport") != "tcp" or data.get("protocol") != "connect":
        raise AgentStartError("the bridge does not offer Connect over TCP")
    url = data.get("url")
    if not isinstance(url, str) or not url:
        host, port = data.get("host"), data.get("port")
        if not isinstance(host, str) or not isinstance(port, int):
            raise AgentStartError("the bridge's ready line names no address")
        url = f"http://[{host}]:{port}" if ":" in host else f"http://{host}:{port}"
    parts = urlsplit(url)
    if parts.scheme != "http" or not parts.hostname or not is_loopback_name(parts.hostname):
        raise AgentStartError(f"the bridge listens on {url[:200]!r}, not on a loopback address")
    token = data.get("authToken")
    if not isinstance(token, str) or not token.strip():
        token_file = data.get("authTokenFile")
        if not isinstance(token_file, str) or not token_file:
            raise AgentStartError("the bridge's ready line carries no auth token")
        token = _read_token(token_file)
    token = token.strip()
    if not token:
        raise AgentStartError("the bridge's auth token is empty")
    pid = data.get("pid")
    return BridgeEndpoint(
        url=url,
        auth_token=token,
        server_version=str(data.get("serverVersion") or "")[:64],
        pid=pid if isinstance(pid, int) and not isinstance(pid, bool) else None,
        state_root=str(data.get("stateRoot") or "")[:4096],
    )


class ReadyLineReader:
    """Feeds stderr chunks; finds the first ``ready`` line (bounded buffering)."""

    def __init__(self) -> None:
        self._buffer = bytearray()
        self._skipping = False
        self.line: bytes | None = None
        self.overflow = False

    def feed(self, data: bytes) -> bytes | None:
        """The ready line once complete (``None`` until then, and after)."""
        if self.line is not None or self.overflow:
            return None
        if self._skipping:  # the rest of a long line that is not the ready line
            newline = data.find(b"\n")
            if newline < 0:
                return None
            self._skipping, data = False, data[newline + 1 :]
        self._buffer += data
        while (newline := self._buffer.find(b"\n")) >= 0:
            line = bytes(self._buffer[:newline])
            del self._buffer[: newline + 1]
            if line.startswith(READY_PREFIX):
                self.line = line
                self._buffer.clear()
                return line
        if len(self._buffer) > MAX_READY_LINE:
            if self._buffer.startswith(READY_PREFIX):
                self.overflow = True
            else:
                self._skipping = True
            self._buffer.clear()
        return None
