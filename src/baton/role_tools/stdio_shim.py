"""The stdio MCP shim: relays an agent's MCP lines to its ``baton up`` over a unix socket.

Started by the agent as ``python -I -S <this file> --socket PATH --slot NAME`` with the
slot's credential in ``BATON_MCP_TOKEN`` (its environment, never its arguments). It
imports only the standard library (no baton, no ``mcp``, no pydantic: ``-S`` skips even
``site``), so a role slot costs a few MiB instead of a Python process holding the MCP
SDK, the store and ``fcop``. The MCP server itself runs in the team loop
(:mod:`baton.role_tools.hub`).

The first line it sends is the hello (slot and credential); the team loop answers
``{"ok": true}`` or refuses with a reason, which the shim prints to stderr before it
exits with status 2. After that it forwards bytes both ways unchanged. It exits when
either side closes: the agent closing stdin, or the socket closing, which is what
happens the moment the team loop dies (the kernel closes the team loop's end), so a shim never
outlives its team loop. A team loop that is already gone (nothing listening) exits it with 3.
"""

import contextlib
import json
import os
import socket
import sys
import threading

__all__ = ["HELLO", "TOKEN_ENV", "main"]

HELLO = "baton-mcp-shim/1"
TOKEN_ENV = "BATON_MCP_TOKEN"  # noqa: S105 - a variable name, not a secret
MAX_REPLY = 64 * 1024
CHUNK = 64 * 1024
UNIX_PATH_MAX = 107


def _arg(argv: list[str], flag: str) -> str:
    if flag not in argv or argv.index(flag) + 1 >= len(argv):
        raise SystemExit(f"baton mcp shim: {flag} is required")
    return argv[argv.index(flag) + 1]


def _connect(path: str) -> socket.socket:
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    target = path
    if len(path.encode()) > UNIX_PATH_MAX:  # too long for sockaddr_un: through the directory
        head, _, name = path.rpartition("/")
        target = f"/proc/self/fd/{os.open(head or '/', os.O_PATH | os.O_DIRECTORY)}/{name}"
    try:
        sock.connect(target)
    except OSError as exc:
        sock.close()
        sys.stderr.write(f"baton mcp shim: the baton up serving {path} is not running ({exc})\n")
        raise SystemExit(3) from exc
    return sock


def _read_reply(sock: socket.socket) -> bytes:
    reply = b""
    while not reply.endswith(b"\n"):
        chunk = sock.recv(4096)
        if not chunk or len(reply) > MAX_REPLY:
            sys.stderr.write("baton mcp shim: the team loop closed the connection\n")
            raise SystemExit(3)
        reply += chunk
    return reply


def _pump_stdin(sock: socket.socket) -> None:
    """Agent -> team loop; half-closes the socket at end of input."""
    with contextlib.suppress(OSError):
        while True:
            data = os.read(0, CHUNK)
            if not data:
                break
            sock.sendall(data)
    with contextlib.suppress(OSError):
        sock.shutdown(socket.SHUT_WR)


def main(argv: list[str]) -> int:
    token = os.environ.pop(TOKEN_ENV, "")
    if not token:
        sys.stderr.write(f"baton mcp shim: {TOKEN_ENV} is not set\n")
        return 2
    sock = _connect(_arg(argv, "--socket"))
    hello = {"hello": HELLO, "slot": _arg(argv, "--slot"), "credential": token}
    sock.sendall(json.dumps(hello).encode() + b"\n")
    try:
        answer = json.loads(_read_reply(sock))
    except ValueError:
        answer = {"ok": False, "message": "unreadable answer from the team loop"}
    if not isinstance(answer, dict) or answer.get("ok") is not True:
        message = answer.get("message") if isinstance(answer, dict) else None
        sys.stderr.write(f"baton mcp shim: refused: {message or 'no reason given'}\n")
        return 2
    threading.Thread(target=_pump_stdin, args=(sock,), name="stdin", daemon=True).start()
    while True:  # team loop -> agent, until the team loop closes (or dies)
        try:
            data = sock.recv(CHUNK)
        except OSError:
            break
        if not data:
            break
        try:
            _write_all(data)
        except OSError:
            break
    return 0


def _write_all(data: bytes) -> None:
    view = memoryview(data)
    while view:
        view = view[os.write(1, view) :]


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
