"""The ``pre-push`` hook's client (:mod:`.push_gate`): ask the actor, fail closed.

Run by the hooks directory the actor gives its agent's git, as
``python -I -m baton.cluster.push_hook REMOTE URL``. Exit 0 lets the push go on;
anything else (no gate, no answer in time, a refusal, a malformed answer) stops it.
Standard input (the refs being pushed) is left for the checkout's own hook.
"""

from __future__ import annotations

import json
import os
import socket
import sys
from typing import Final

from baton.cluster.push_gate import ANSWER_TIMEOUT_S, GATE_ENV, KEY_ENV

__all__ = ["ask", "main"]

ANSWER_LIMIT: Final = 4096


def ask(path: str, key: str, remote: str, url: str) -> tuple[bool, str]:
    """The gate's verdict: (allowed, why not)."""
    request = json.dumps({"key": key, "remote": remote, "url": url}).encode() + b"\n"
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as conn:
        conn.settimeout(ANSWER_TIMEOUT_S + 5)
        conn.connect(path)
        conn.sendall(request)
        answer = b""
        while not answer.endswith(b"\n") and len(answer) <= ANSWER_LIMIT:
            part = conn.recv(ANSWER_LIMIT)
            if not part:
                break
            answer += part
    verdict = json.loads(answer)
    if isinstance(verdict, dict) and verdict.get("allow") is True:
        return True, ""
    reason = verdict.get("reason") if isinstance(verdict, dict) else None
    return False, reason if isinstance(reason, str) else "refused"


def main(argv: list[str]) -> int:
    gate, key = os.environ.get(GATE_ENV), os.environ.get(KEY_ENV)
    if not gate or not key:
        print(
            "baton: push refused: this git is set up for baton's push gate, which is gone",
            file=sys.stderr,
        )
        return 1
    remote = argv[0] if argv else ""
    url = argv[1] if len(argv) > 1 else ""
    try:
        allowed, why = ask(gate, key, remote, url)
    except (OSError, ValueError) as exc:
        print(
            f"baton: push refused: the push gate did not answer ({type(exc).__name__})",
            file=sys.stderr,
        )
        return 1
    if not allowed:
        print(
            f"baton: push refused: {why.encode('ascii', 'replace').decode()[:300]}", file=sys.stderr
        )
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
