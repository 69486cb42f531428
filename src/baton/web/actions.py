"""Acting from the page: create a task, start a one-off run, cancel a run's turn.

Each action goes through the same code path as its CLI command, with the same
validation, so the page can do nothing the CLI refuses:

* **create a task** = ``baton task new``: FCoP T1 as the team's human, through
  the ``fcop`` library (:meth:`FcopPort.create_task`), the recipient checked
  against the team, the body bounded by the team's ``max_task_bytes``;
* **start a run** = ``baton run --json --agent A --wait-timeout S -``: a child
  process of this server, the prompt on stdin; its requests wait in the ledger
  and are answered here like any other;
* **cancel a turn** of a one-off run = Ctrl-C on that ``baton run``: SIGINT to
  the process that owns the run, only when it is still running, owned by a live
  baton process on this machine and boot;
* **raise a budget limit** = ``baton budget raise``: the same check (above the limit in
  force) and the same transaction, its ``budget.raised`` events in a run of kind
  ``budget``; a running ``baton up`` lets what the old limit parked go on;
* **cancel a role's turn** in a team run: a control row the owning ``baton up``
  consumes (:mod:`baton.team.controls`); the team loop cancels the turn and the TASK
  goes to *needs attention* (the human's retry re-prompts it).
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
import socket
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Final

from baton.app.facade.config import boot_id, load_config
from baton.app.facade.fcop import subject_problem
from baton.app.facade.store import Store
from baton.app.facade.team import ControlRefused, request_cancel
from baton.errors import BatonError, ConfigError
from baton.jsontypes import JsonObject

__all__ = [
    "MAX_PROMPT_BYTES",
    "ActionRefused",
    "RunLauncher",
    "cancel_role_turn",
    "cancel_run",
    "create_task",
    "raise_budget",
]

MAX_PROMPT_BYTES: Final = 256 * 1024
WAIT_TIMEOUT_S: Final = 600.0
"""How long a run started from the page waits in the ledger for each answer."""
_FIND_RUN_S: Final = 20.0
_ERRORS_KEPT: Final = 4000


class ActionRefused(BatonError):
    """The action is not possible in this state (mapped to 409)."""


def create_task(
    project_dir: Path, *, to: str, subject: str, body: str, operation_id: str | None
) -> JsonObject:
    """T1 as the human, exactly as ``baton task new`` does it (blocking: call off-loop)."""
    from baton.app.facade.fcop import open_context

    ctx = open_context(project_dir)
    if ctx.team.role_for(to) is None:
        known = ", ".join(ctx.team.role_names)
        raise ConfigError(f"{to!r} is not a role of this team (roles: {known})")
    problem = subject_problem(subject)
    if problem is not None:
        raise ConfigError(problem)
    subject = subject.strip()
    if len(body.encode("utf-8")) > ctx.team.max_task_bytes:
        raise ConfigError(f"the body is over the team's max_task_bytes ({ctx.team.max_task_bytes})")
    created = ctx.port.create_task(
        sender=ctx.team.human,
        recipient=to,
        subject=subject,
        body=body if body.strip() else subject,  # an empty body: the subject is the task
        operation_id=operation_id,
    )
    return {
        "task_id": created.task_id,
        "existing": created.existing,
        "operation_id": created.operation_id,
        "recipient": to,
    }


def _is_baton_process(pid: int) -> bool:
    try:
        cmdline = Path(f"/proc/{pid}/cmdline").read_bytes()
    except OSError:
        return False
    return b"baton" in cmdline


def cancel_run(store: Store, run_id: str) -> JsonObject:
    """SIGINT to the live ``baton run`` owning ``run_id`` (what Ctrl-C does there)."""
    run = store.get_run(run_id)
    if run is None:
        raise ActionRefused(f"no run {run_id!r}")
    if run.status != "running":
        raise ActionRefused(f"run {run_id} is {run.status}; there is no turn to cancel")
    if run.kind != "run":
        raise ActionRefused(
            f"run {run_id} is a {run.kind!r} run: cancel a role's turn with "
            "POST /api/team/slots/{slot}/cancel (the team board's Cancel turn)"
        )
    meta = run.meta
    pid = meta.get("pid")
    if (
        not isinstance(pid, int)
        or meta.get("host") != socket.gethostname()
        or (meta.get("boot") and meta.get("boot") != boot_id())
        or not _is_baton_process(pid)
    ):
        raise ActionRefused(f"the process that owns run {run_id} is not running on this machine")
    os.kill(pid, signal.SIGINT)
    return {"run_id": run_id, "signalled": pid}


def cancel_role_turn(store: Store, slot: str, *, task_id: str | None, reason: str) -> JsonObject:
    """Ask the team loop to cancel ``slot``'s running turn (blocking: call off-loop)."""
    try:
        return request_cancel(store, slot, task_id=task_id, reason=reason, via="dashboard")
    except ControlRefused as exc:
        raise ActionRefused(str(exc)) from None


# Any: a limit's value as the JSON body gave it (Limits.from_table checks it).
async def raise_budget(
    store: Store, project_dir: Path, *, scope: str, key: str, dimension: str, value: Any
) -> JsonObject:
    """Raise one limit of one scope, exactly as ``baton budget raise`` does."""
    from baton.app.budgets import raise_limits
    from baton.app.facade.budgets import SCOPES, Limits, ScopeKey
    from baton.app.facade.runs import EventEmitter, Sequencer, format_ts
    from baton.app.facade.store import RunRecord

    if scope not in SCOPES:
        raise ConfigError(f"{scope!r} is not a budget scope (one of {', '.join(SCOPES)})")
    limits = Limits.from_table({dimension: value}, "the raise")
    config = load_config(project_dir).budget
    run_id = f"budget-{time.strftime('%Y%m%d-%H%M%S', time.gmtime())}-{os.urandom(3).hex()}"
    record = RunRecord(
        run_id, "budget", "dashboard", str(project_dir), "running", format_ts(time.time())
    )
    await asyncio.to_thread(store.create_run, record)
    emitter = EventEmitter(Sequencer(run_id), store)
    status = "failed"
    try:
        raised = await raise_limits(
            store,
            config,
            ScopeKey(scope, key),
            limits,
            by="dashboard",
            commit=lambda payloads, fn: emitter.commit(payloads, fn),
        )
        status = "completed"
    finally:
        await emitter.flush()
        await asyncio.to_thread(store.finish_run, run_id, status, format_ts(time.time()))
    return {"raised": [r.model_dump() for r in raised], "run_id": run_id}


@dataclass
class RunLauncher:
    """Starts ``baton run`` children for the page and reaps them."""

    project_dir: Path
    store: Store
    python: str = sys.executable
    _children: dict[int, asyncio.subprocess.Process] = field(default_factory=dict)
    _reapers: set[asyncio.Task[None]] = field(default_factory=set)
    _last_errors: dict[int, str] = field(default_factory=dict)

    def agents(self) -> list[str]:
        return sorted(load_config(self.project_dir).profiles)

    async def launch(self, *, agent: str, prompt: str) -> JsonObject:
        """Start a one-off run; returns its ``run_id`` once the child recorded it."""
        load_config(self.project_dir).profile(agent)  # unknown agent: ConfigError (422)
        data = prompt.encode("utf-8")
        if not prompt.strip():
            raise ConfigError("the prompt is empty")
        if len(data) > MAX_PROMPT_BYTES:
            raise ConfigError(f"the prompt is over {MAX_PROMPT_BYTES} bytes")
        errors = tempfile.TemporaryFile()  # noqa: SIM115 - lives as long as the child
        proc = await asyncio.create_subprocess_exec(
            self.python,
            "-m",
            "baton",
            "run",
            "--json",
            "--agent",
            agent,
            "--project",
            str(self.project_dir),
            "--wait-timeout",
            f"{WAIT_TIMEOUT_S:g}",
            "-",
            stdin=asyncio.subprocess.PIPE,
            stdout=asyncio.subprocess.DEVNULL,
            stderr=errors,
            cwd=self.project_dir,
            start_new_session=True,
        )
        assert proc.stdin is not None
        proc.stdin.write(data)
        with contextlib.suppress(BrokenPipeError, ConnectionResetError):
            await proc.stdin.drain()
        proc.stdin.close()
        self._children[proc.pid] = proc
        reaper = asyncio.create_task(self._reap(proc, errors))
        self._reapers.add(reaper)
        reaper.add_done_callback(self._reapers.discard)
        run_id = await self._find_run(proc)
        if run_id is None:
            await asyncio.wait({reaper}, timeout=5)
            message = self._last_errors.pop(proc.pid, "")
            raise ConfigError(f"the run did not start: {message or 'no output'}")
        return {"run_id": run_id, "agent": agent, "pid": proc.pid}

    async def _find_run(self, proc: asyncio.subprocess.Process) -> str | None:
        loop = asyncio.get_running_loop()
        deadline = loop.time() + _FIND_RUN_S
        while loop.time() < deadline:
            runs = await asyncio.to_thread(self.store.list_runs, 20)
            for run in runs:
                if run.meta.get("pid") == proc.pid and run.kind == "run":
                    return run.run_id
            if proc.returncode is not None:
                return None
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(asyncio.shield(proc.wait()), 0.05)
        return None

    async def _reap(self, proc: asyncio.subprocess.Process, errors: Any) -> None:
        try:
            await proc.wait()
            errors.seek(0)
            tail = errors.read(_ERRORS_KEPT).decode("utf-8", "replace").strip()
            if tail:  # kept for launch() to quote when the run never started
                self._last_errors[proc.pid] = tail
        finally:
            self._children.pop(proc.pid, None)
            errors.close()

    async def aclose(self) -> None:
        """Cancel the runs still going (SIGINT, like Ctrl-C) and wait for them."""
        for proc in list(self._children.values()):
            with contextlib.suppress(ProcessLookupError):
                proc.send_signal(signal.SIGINT)
        for proc in list(self._children.values()):
            try:
                await asyncio.wait_for(proc.wait(), 20)
            except TimeoutError:
                with contextlib.suppress(ProcessLookupError):
                    proc.kill()
                await proc.wait()
        if self._reapers:
            await asyncio.wait(set(self._reapers), timeout=5)
