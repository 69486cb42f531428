"""A transparent stdio tap: run an agent and record every JSON-RPC line in both directions.

baton launches ``python wiretap.py --log FILE -- <agent argv…>`` as if it were the agent. The
tap starts the real agent (in baton's process group, so baton's group signals reach it),
copies baton's stdin to the agent's stdin and the agent's stdout to baton's stdout byte for
byte, and appends each line it passes as ``{"dir": "client"|"agent", "msg": …}`` to FILE
(the format of ``tests/traces``; a line that is not JSON is kept as ``{"raw": "…"}``). When
baton closes stdin the agent's stdin is closed; when the agent exits, the tap exits with its
status. Standard library only, and run as a file, so it imports nothing from the workspace.

:func:`tapped` wraps an argv; :func:`read_tap` loads a recording. To record without a process
in between (any transport, the in-memory one too), see :mod:`tests.support.transport_tap`.
"""

from __future__ import annotations

import contextlib
import json
import os
import subprocess
import sys
import threading
from collections.abc import Sequence
from pathlib import Path
from typing import IO, Any

__all__ = ["Recorder", "read_tap", "tapped"]


def tapped(argv: Sequence[str], log: Path) -> list[str]:
    """``argv`` run behind the tap, recording to ``log``."""
    return [sys.executable, str(Path(__file__).resolve()), "--log", str(log), "--", *argv]


def read_tap(log: Path) -> list[dict[str, Any]]:
    """The recorded messages, in the order the tap passed them."""
    if not log.exists():
        return []
    return [json.loads(line) for line in log.read_text(encoding="utf-8").splitlines() if line]


class Recorder:
    """Appends each line passed as a record (also used by :mod:`tests.support.transport_tap`)."""

    def __init__(self, path: str) -> None:
        self._fh = open(path, "a", encoding="utf-8")  # noqa: SIM115 - lives as long as the tap
        self._lock = threading.Lock()

    def line(self, direction: str, raw: bytes) -> None:
        text = raw.decode("utf-8", "replace").rstrip("\r\n")
        if not text.strip():
            return
        try:
            record: dict[str, Any] = {"dir": direction, "msg": json.loads(text)}
        except ValueError:
            record = {"dir": direction, "raw": text[:4096]}
        with self._lock:
            if self._fh.closed:
                return  # the tap has ended; what the agent sends after that is not recorded
            self._fh.write(json.dumps(record, ensure_ascii=False) + "\n")
            self._fh.flush()

    def close(self) -> None:
        with self._lock:
            self._fh.close()


def _pump(source: IO[bytes], sink: IO[bytes], recorder: Recorder, direction: str) -> None:
    try:
        for line in iter(source.readline, b""):
            recorder.line(direction, line)
            try:
                sink.write(line)
                sink.flush()
            except (BrokenPipeError, OSError, ValueError):
                break
    finally:
        with contextlib.suppress(OSError):
            sink.close()


def main(argv: list[str]) -> int:
    if len(argv) < 4 or argv[0] != "--log" or argv[2] != "--":
        sys.stderr.write("usage: wiretap.py --log FILE -- AGENT [ARGS...]\n")
        return 2
    recorder = Recorder(argv[1])
    child = subprocess.Popen(argv[3:], stdin=subprocess.PIPE, stdout=subprocess.PIPE)
    assert child.stdin is not None and child.stdout is not None
    inbound = threading.Thread(
        target=_pump, args=(sys.stdin.buffer, child.stdin, recorder, "client"), daemon=True
    )
    inbound.start()
    _pump(child.stdout, sys.stdout.buffer, recorder, "agent")
    code = child.wait()
    sys.stdout.flush()
    os._exit(code if code >= 0 else 128 - code)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
