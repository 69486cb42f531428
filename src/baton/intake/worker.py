"""The screen in a subprocess that can be abandoned and killed.

A parse in a thread cannot be cancelled: the alias bomb that reached 22.7 GB
also ignored SIGINT, because the doorbell's thread held the interpreter. Here
the parse runs in a long-lived child process (``python -m
baton.intake.worker LIMITS``) that:

* sets ``RLIMIT_AS`` (address space), ``RLIMIT_FSIZE`` = 0 (it writes no file),
  ``RLIMIT_NOFILE`` and ``RLIMIT_CORE`` = 0 once its parsers are imported, and
  asks the kernel to kill it when its parent dies (``PR_SET_PDEATHSIG``);
* opens each file itself (``O_NOFOLLOW | O_NONBLOCK``: no symlink, no FIFO hang),
  refuses a non-regular file, reads at most the cap plus one byte, and reports
  the ``fstat`` facts before and after the read so the caller knows whether the
  bytes belong to a file that stayed still;
* answers one JSON line per request with a :mod:`~baton.intake.screen`
  verdict, and, for an inbox TASK, whether Core's create fact proves it complete.

The parent side, :class:`ParseWorker`, waits for each answer with a wall-clock
deadline (``select`` on the pipe). Past it, or when the child dies or answers
garbage, the child is killed and reaped, the file is refused
(``parse_timeout`` / ``parse_crashed`` / ``parse_memory``), and the next request
starts a fresh child. A memory error inside the child is answered, then the
child exits so the next file gets a clean heap. One request at a time
(a lock): the team loop calls it from worker threads.

Length: both ends of one pipe protocol, the parent's deadlines and kills
(:class:`ParseWorker`) and the child's limits, bounded read and verdict
(:func:`main`), so the request and answer shapes, and which side enforces which
bound, are read and changed in one place.
"""

from __future__ import annotations

import atexit
import contextlib
import json
import os
import select
import signal
import stat
import subprocess
import sys
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from baton.intake.limits import DEFAULT_LIMITS, IntakeLimits
from baton.intake.screen import Refused, Screened, verdict_from_json
from baton.intake.stability import FileFacts
from baton.lifeline import die_with_parent

__all__ = ["ParseWorker", "Proof", "WorkerResult", "main", "shared_worker"]

_MAX_RESPONSE = 512 * 1024
_MAX_REQUEST = 64 * 1024


@dataclass(frozen=True, slots=True)
class Proof:
    """Where to look for Core's create fact of an inbox TASK."""

    fcop_root: Path
    """The project root (the directory holding ``fcop/``)."""
    workspace_id: str


@dataclass(frozen=True, slots=True)
class WorkerResult:
    verdict: Screened | Refused
    before: FileFacts | None = None
    """``fstat`` of the opened file before reading (None when it could not be opened)."""
    after: FileFacts | None = None
    proven: bool = False
    seconds: float = 0.0

    @property
    def still(self) -> bool:
        """Whether the file kept the same facts over the read."""
        return self.before is not None and self.before == self.after


# ----------------------------------------------------------------------- parent


class ParseWorker:
    """A killable screening subprocess (see the module docstring)."""

    def __init__(
        self,
        limits: IntakeLimits = DEFAULT_LIMITS,
        *,
        python: str | None = None,
        startup_timeout: float = 60.0,
    ) -> None:
        self.limits = limits
        self.python = python or sys.executable
        self.startup_timeout = startup_timeout
        self.kills = 0
        """Children killed for overrunning (tests and benchmarks read it)."""
        self.spawns = 0
        self._proc: subprocess.Popen[bytes] | None = None
        self._buffer = b""
        self._lock = threading.Lock()

    @property
    def pid(self) -> int | None:
        return self._proc.pid if self._proc is not None else None

    def start(self) -> None:
        """Start the child now (otherwise the first request does)."""
        with self._lock:
            self._ensure()

    def close(self) -> None:
        with self._lock:
            self._stop(kill=False)

    def __enter__(self) -> ParseWorker:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # -------------------------------------------------------------- requests

    def screen_envelope(
        self, path: Path, *, expect_id: str | None = None, proof: Proof | None = None
    ) -> WorkerResult:
        """Screen one TASK/REPORT/ISSUE/REVIEW file (see :func:`screen_envelope`)."""
        request: dict[str, Any] = {"op": "envelope", "path": str(path), "expect_id": expect_id}
        if proof is not None:
            request["proof"] = {"root": str(proof.fcop_root), "workspace_id": proof.workspace_id}
        return self._request(request)

    def prove(self, proof: Proof, verdict: Screened) -> bool:
        """Whether Core's create fact now proves a TASK screened earlier as ``verdict``
        complete (its bytes' digest): the fact alone is read, not the TASK again."""
        if verdict.kind != "TASK" or verdict.operation_id is None:
            return False
        result = self._request(
            {
                "op": "proof",
                "proof": {"root": str(proof.fcop_root), "workspace_id": proof.workspace_id},
                "task_id": verdict.envelope_id,
                "operation_id": verdict.operation_id,
                "digest": verdict.digest,
            }
        )
        return result.proven  # a failed or killed request is never proven

    def screen_json(self, path: Path) -> WorkerResult:
        """Screen one of Core's JSON facts (operation fact, receipt, manifest)."""
        return self._request({"op": "json", "path": str(path)})

    def _request(self, request: dict[str, Any]) -> WorkerResult:
        with self._lock:
            started = time.monotonic()
            try:
                proc = self._ensure()
            except OSError as exc:
                return WorkerResult(
                    Refused("parse_crashed", f"the parse worker did not start: {exc}")
                )
            line = json.dumps(request).encode() + b"\n"
            try:
                assert proc.stdin is not None
                proc.stdin.write(line)
                proc.stdin.flush()
            except (BrokenPipeError, OSError):
                self._stop(kill=True)
                return WorkerResult(Refused("parse_crashed", "the parse worker had exited"))
            deadline = started + self.limits.parse_wall_s
            answer = self._read_line(deadline, cpu_budget=self.limits.parse_deadline_s)
            seconds = time.monotonic() - started
            if isinstance(answer, Refused):
                return WorkerResult(answer, seconds=seconds)
            try:
                data = json.loads(answer)
                result = _result(data, seconds)
            except (ValueError, TypeError, KeyError):
                self._stop(kill=True)
                return WorkerResult(Refused("parse_crashed", "the parse worker answered garbage"))
            if data.get("exiting"):
                self._stop(kill=False)
            return result

    def _read_line(self, deadline: float, *, cpu_budget: float | None = None) -> bytes | Refused:
        proc = self._proc
        assert proc is not None and proc.stdout is not None
        fd = proc.stdout.fileno()
        cpu_start = _cpu_seconds(proc.pid) if cpu_budget is not None else None
        while b"\n" not in self._buffer:
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                self.kills += 1
                self._stop(kill=True)
                return Refused(
                    "parse_timeout",
                    f"no verdict within {self.limits.parse_wall_s:g} s; the parser was killed",
                )
            ready, _, _ = select.select([fd], [], [], min(remaining, 0.05))
            if not ready:
                spent = _cpu_seconds(proc.pid)
                over = (
                    cpu_start is not None
                    and cpu_budget is not None
                    and spent is not None
                    and spent - cpu_start > cpu_budget
                )
                if over:
                    self.kills += 1
                    self._stop(kill=True)
                    return Refused(
                        "parse_timeout",
                        f"the parse used more than {cpu_budget:g} s of CPU; it was killed",
                    )
                continue
            chunk = os.read(fd, 65536)
            if not chunk:
                code = self._stop(kill=True)
                return Refused("parse_crashed", f"the parse worker died ({_exit_text(code)})")
            self._buffer += chunk
            if len(self._buffer) > _MAX_RESPONSE:
                self._stop(kill=True)
                return Refused("parse_crashed", "the parse worker's answer was too large")
        line, _, self._buffer = self._buffer.partition(b"\n")
        return line

    # -------------------------------------------------------------- lifecycle

    def _ensure(self) -> subprocess.Popen[bytes]:
        if self._proc is not None and self._proc.poll() is None:
            return self._proc
        self._stop(kill=True)
        env = dict(os.environ)
        env["PYTHONDONTWRITEBYTECODE"] = "1"
        proc = subprocess.Popen(
            [
                self.python,
                "-m",
                "baton.intake.worker",
                json.dumps(self.limits.to_json()),
                str(os.getpid()),
            ],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,
            close_fds=True,
            env=env,
        )
        self._proc = proc
        self._buffer = b""
        self.spawns += 1
        hello = self._read_line(time.monotonic() + self.startup_timeout)
        if isinstance(hello, Refused):
            raise OSError(hello.detail)
        return proc

    def _stop(self, *, kill: bool) -> int | None:
        proc, self._proc = self._proc, None
        self._buffer = b""
        if proc is None:
            return None
        if kill:
            with contextlib.suppress(ProcessLookupError):
                proc.kill()
        with contextlib.suppress(OSError):
            if proc.stdin is not None:
                proc.stdin.close()
        try:
            code = proc.wait(timeout=5)
        except subprocess.TimeoutExpired:
            proc.kill()
            code = proc.wait()
        if proc.stdout is not None:
            proc.stdout.close()
        return code


_TICKS = os.sysconf("SC_CLK_TCK") if hasattr(os, "sysconf") else 100


def _cpu_seconds(pid: int) -> float | None:
    """CPU time (user + system) of ``pid`` so far, from ``/proc`` (None off Linux)."""
    try:
        stat_line = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    fields = stat_line.rpartition(")")[2].split()
    try:
        return (int(fields[11]) + int(fields[12])) / _TICKS
    except (IndexError, ValueError):
        return None


def _exit_text(code: int | None) -> str:
    if code is None:
        return "unknown exit"
    if code < 0:
        with contextlib.suppress(ValueError):
            return f"killed by {signal.Signals(-code).name}"
    return f"exit code {code}"


def _facts(value: Any) -> FileFacts | None:
    if not isinstance(value, dict):
        return None
    return FileFacts(**{k: int(value[k]) for k in FileFacts.__dataclass_fields__})


def _result(data: dict[str, Any], seconds: float) -> WorkerResult:
    return WorkerResult(
        verdict=verdict_from_json(data["verdict"]),
        before=_facts(data.get("before")),
        after=_facts(data.get("after")),
        proven=bool(data.get("proven")),
        seconds=seconds,
    )


_SHARED: dict[IntakeLimits, ParseWorker] = {}
_SHARED_LOCK = threading.Lock()


def shared_worker(limits: IntakeLimits = DEFAULT_LIMITS) -> ParseWorker:
    """One worker per process and limits (CLI commands, the web UI); closed at exit."""
    with _SHARED_LOCK:
        worker = _SHARED.get(limits)
        if worker is None:
            worker = _SHARED[limits] = ParseWorker(limits)
            atexit.register(worker.close)
        return worker


# ------------------------------------------------------------------------ child


def _vm_size() -> int:
    try:
        with open("/proc/self/status", encoding="ascii") as status:
            for line in status:
                if line.startswith("VmSize:"):
                    return int(line.split()[1]) * 1024
    except (OSError, ValueError):
        pass
    return 0


def _limit_resources(limits: IntakeLimits) -> int:
    import resource

    address_space = max(limits.worker_address_space, _vm_size() + 64 * 1024 * 1024)
    signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
    for name, value in (
        ("RLIMIT_AS", address_space),
        ("RLIMIT_FSIZE", 0),
        ("RLIMIT_NOFILE", 32),
        ("RLIMIT_CORE", 0),
    ):
        limit = getattr(resource, name, None)
        if limit is not None:
            with contextlib.suppress(ValueError, OSError):
                resource.setrlimit(limit, (value, value))
    return address_space


def _facts_json(st: os.stat_result) -> dict[str, int]:
    facts = FileFacts.of(st)
    return {k: getattr(facts, k) for k in FileFacts.__dataclass_fields__}


def _read(
    path: str, cap: int
) -> tuple[bytes | Refused, dict[str, int] | None, dict[str, int] | None]:
    flags = os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC | getattr(os, "O_NOCTTY", 0)
    try:
        fd = os.open(path, flags)
    except OSError as exc:
        return Refused("unreadable", f"cannot open: {exc.strerror or exc}"), None, None
    try:
        st = os.fstat(fd)
        before = _facts_json(st)
        if not stat.S_ISREG(st.st_mode):
            return Refused("not_a_file", "not a regular file"), before, before
        if st.st_size > cap:
            return (
                Refused("too_large", f"{st.st_size} bytes, over the {cap}-byte limit; not read"),
                before,
                before,
            )
        chunks: list[bytes] = []
        total = 0
        while total <= cap:
            chunk = os.read(fd, min(cap + 1 - total, 1 << 20))
            if not chunk:
                break
            chunks.append(chunk)
            total += len(chunk)
        after = _facts_json(os.fstat(fd))
    except OSError as exc:
        return Refused("unreadable", f"cannot read: {exc.strerror or exc}"), None, None
    finally:
        os.close(fd)
    data = b"".join(chunks)
    if len(data) > cap:
        return (
            Refused("too_large", f"grew past the {cap}-byte limit while being read"),
            before,
            after,
        )
    return data, before, after


def _proven(
    proof: Any, task_id: Any, operation_id: Any, content: Any, limits: IntakeLimits
) -> bool:
    """Whether Core's create fact for ``operation_id`` names ``task_id`` with ``content``
    (the published bytes' digest)."""
    from baton.intake.create_fact import create_fact_name
    from baton.intake.screen import screen_json

    if not (
        isinstance(proof, dict)
        and isinstance(proof.get("root"), str)
        and isinstance(proof.get("workspace_id"), str)
        and isinstance(operation_id, str)
        and isinstance(task_id, str)
        and isinstance(content, str)
    ):
        return False
    name = create_fact_name(proof["workspace_id"], operation_id)
    data, _, _ = _read(
        str(Path(proof["root"]) / "fcop" / "operations" / name), limits.max_json_bytes
    )
    if isinstance(data, Refused):
        return False
    fact = screen_json(data, limits=limits)
    return (
        isinstance(fact, dict)
        and fact.get("task_id") == task_id
        and fact.get("content_digest") == content
    )


def _handle(request: dict[str, Any], limits: IntakeLimits) -> dict[str, Any]:
    from baton.intake.screen import screen_envelope, screen_json, to_json

    path = str(request.get("path", ""))
    if request.get("op") == "proof":
        proven = _proven(
            request.get("proof"),
            request.get("task_id"),
            request.get("operation_id"),
            request.get("digest"),
            limits,
        )
        fact = Screened(kind="JSON", envelope_id=str(request.get("task_id")), digest="", size=0)
        return {"verdict": to_json(fact), "proven": proven}
    if request.get("op") == "json":
        data, before, after = _read(path, limits.max_json_bytes)
        if isinstance(data, Refused):
            return {"verdict": to_json(data), "before": before, "after": after}
        value = screen_json(data, limits=limits)
        verdict: Screened | Refused = (
            value
            if isinstance(value, Refused)
            else Screened(kind="JSON", envelope_id=Path(path).name, digest="", size=len(data))
        )
        return {"verdict": to_json(verdict), "before": before, "after": after}
    data, before, after = _read(path, limits.max_file_bytes)
    if isinstance(data, Refused):
        return {"verdict": to_json(data), "before": before, "after": after}
    expect = request.get("expect_id")
    verdict = screen_envelope(
        data, limits=limits, expect_id=expect if isinstance(expect, str) else None
    )
    proven = (
        isinstance(verdict, Screened)
        and verdict.kind == "TASK"
        and _proven(
            request.get("proof"), verdict.envelope_id, verdict.operation_id, verdict.digest, limits
        )
    )
    return {"verdict": to_json(verdict), "before": before, "after": after, "proven": proven}


def main(argv: list[str] | None = None) -> int:
    """The child: ``LIMITS_JSON PARENT_PID``; one JSON request per stdin line."""
    args = sys.argv[1:] if argv is None else argv
    limits = IntakeLimits.from_json(json.loads(args[0])) if args else DEFAULT_LIMITS
    if len(args) > 1:
        die_with_parent(int(args[1]))  # gone already: exits at once
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # the parent decides; Ctrl-C is for it
    import yaml  # noqa: F401 - import the parsers before the address-space limit

    from baton.intake import (
        create_fact,  # noqa: F401 - the proof's key rule
        screen,
    )

    screen._loader(limits)
    address_space = _limit_resources(limits)
    out = sys.stdout.buffer
    out.write(
        json.dumps({"ready": True, "pid": os.getpid(), "address_space": address_space}).encode()
        + b"\n"
    )
    out.flush()
    stdin = sys.stdin.buffer
    while True:
        line = stdin.readline(_MAX_REQUEST)
        if not line:
            return 0
        exiting = False
        try:
            answer = _handle(json.loads(line), limits)
        except MemoryError:
            answer = {
                "verdict": {
                    "ok": False,
                    "reason": "parse_memory",
                    "detail": "the parse ran out of its memory limit",
                }
            }
            exiting = True
        except RecursionError:
            answer = {
                "verdict": {
                    "ok": False,
                    "reason": "yaml_too_deep",
                    "detail": "nesting exhausted the recursion limit",
                }
            }
        except Exception as exc:  # the verdict on this file; the worker lives on
            answer = {
                "verdict": {
                    "ok": False,
                    "reason": "parse_crashed",
                    "detail": f"{type(exc).__name__}: {exc}"[:300],
                }
            }
        if exiting:
            answer["exiting"] = True
        out.write(json.dumps(answer).encode() + b"\n")
        out.flush()
        if exiting:
            return 0


if __name__ == "__main__":
    sys.exit(main())
