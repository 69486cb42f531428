"""A role holder's relay: its agent's role tools, served on the worker, outliving the hub.

Before, a worker's agent called the coordinator's hub directly: when the coordinator
died while the agent filed its report, the call failed, and the report's content was
lost with it (issue 30: 9 of 19 coordinator kills). Now the holder serves its agent's
role tools itself, on the worker (a :class:`~baton.role_tools.hub.RoleHub` of its own on
loopback HTTP and a private unix socket, with a credential of its own), and relays each
call to the coordinator's hub:

* a **writing** call (a report, a task, a question, an issue, a review) is first
  recorded in the store, ``pending``, under its idempotency key
  (:func:`~baton.role_tools.delivery.call_key`: task, attempt, epoch, turn, its place in
  the turn); then the relay asks the hub to deliver that key (``POST /calls/<slot>``)
  until it answers, backing off from 0.2 s to 2 s, for at most ``wait_s``
  (``[cluster] delivery_wait_seconds``, 60 s by default). The agent's call waits
  meanwhile; only past the bound does it answer "pending delivery" (the call is
  recorded and will be delivered: do not file it again), and the relay keeps delivering
  in the background. The next coordinator also delivers what is open when it adopts the
  turn (:class:`~baton.cluster.delivery.TurnCalls`), so a call is delivered exactly once
  to whichever coordinator comes next, by either path;
* a **reading** call (``read_task``, ``list_reports``) is forwarded (``POST /read``) on
  the turn's task, with the same bounded wait, and fails after it: nothing to keep.

Where the hub is: the store's ``cluster_hubs`` row (a restarted coordinator may listen on
another port), else the address the holder was given. The relay speaks to it with the
session's hub credential; a hub that refuses it (the slot was re-placed: the session's
credential retired) refuses the call for good, and the relay records it ``refused``.
"""

from __future__ import annotations

import contextlib
import json
import logging
import shutil
import tempfile
import threading
import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Final
from urllib.parse import quote

import httpx

from baton.events.sequencer import utc_now
from baton.fcop_errors import CoordinationError
from baton.role_tools.binding import Binding, CurrentTask, SlotAccess
from baton.role_tools.delivery import TOOL_CALL, CallEvent, CallState, call_key, refusal
from baton.role_tools.hub import RoleHub
from baton.role_tools.server import (
    TOOL_SPECS,
    WRITING_TOOLS,
    McpServerEntry,
    ToolRefused,
    ToolResult,
    ToolSpec,
    allowed_tools,
    checked_call,
)
from baton.store.store import Store
from baton.store.tool_call_sql import hub_url, insert_call, move_call

__all__ = ["DELIVERY_WAIT_S", "Relay", "RelayTools"]

log = logging.getLogger(__name__)

DELIVERY_WAIT_S: Final = 60.0
"""How long an agent's call waits for an absent hub before it answers "pending delivery"."""
_BACKOFF: Final = (0.2, 2.0)
"""The first and the longest pause between two tries (doubling)."""
_REQUEST_TIMEOUT: Final = httpx.Timeout(120.0, connect=5.0)
"""One delivery may run a tool (an FCoP write) on a loaded coordinator."""


@dataclass
class _Turn:
    turn: str
    pointer: CurrentTask
    seq: int = 0


@dataclass
class Relay:
    """One holder's relay (see the module docstring)."""

    store: Store
    project: str
    slot: str
    epoch: int
    token: str
    """The session's credential at the coordinator's hub."""
    url: str | None = None
    """The hub's address as the holder was given it (the store's row, when there, wins)."""
    wait_s: float = DELIVERY_WAIT_S
    client: httpx.Client = field(default_factory=lambda: httpx.Client(timeout=_REQUEST_TIMEOUT))
    _turn: _Turn = field(default_factory=lambda: _Turn("", CurrentTask(None, None)))
    _lock: threading.Lock = field(default_factory=threading.Lock)
    _closed: threading.Event = field(default_factory=threading.Event)
    _hub: RoleHub | None = None
    _dir: Path | None = None
    _behind: list[threading.Thread] = field(default_factory=list)
    delivered: int = 0
    """Calls the hub answered (tests read it)."""

    # ------------------------------------------------------------ serving the agent

    async def start(self) -> tuple[list[McpServerEntry], list[McpServerEntry]]:
        """Serve the agent: the (stdio, http) ``mcpServers`` entries of the relay."""
        self._dir = Path(tempfile.mkdtemp(prefix="baton-relay-"))
        hub = await RoleHub.start(self.store, self._dir, tools_for=self._tools)
        self._hub = hub
        await hub.start_http("127.0.0.1")
        credential = hub.issue(self.slot)
        return [hub.stdio_entry(credential)], [hub.http_entry(credential)]

    def _tools(self, slot: str) -> RelayTools:
        return RelayTools(self, SlotAccess(self.store, slot).binding())

    def begin_turn(self, turn: str, pointer: CurrentTask) -> None:
        """A new turn: its calls are keyed by its prompt's digest and its task."""
        with self._lock:
            self._turn = _Turn(turn, pointer)

    async def close(self) -> None:
        """Stop serving and delivering; remove the relay's private folder (idempotent)."""
        self._closed.set()
        if self._hub is not None:
            await self._hub.aclose()
            self._hub = None
        for thread in self._behind:
            thread.join(timeout=5)
        self.client.close()
        if self._dir is not None:
            shutil.rmtree(self._dir, ignore_errors=True)
            self._dir = None

    # ------------------------------------------------------------ the calls (blocking)

    def call(self, name: str, args: Mapping[str, str]) -> ToolResult:
        """One checked call of the agent, relayed (see the module docstring)."""
        if name not in WRITING_TOOLS:
            return self._read(name, args)
        with self._lock:
            self._turn.seq += 1
            turn = self._turn.turn
            pointer, seq = self._turn.pointer, self._turn.seq
        key = call_key(
            project=self.project,
            slot=self.slot,
            task_id=pointer.task_id,
            attempt_id=pointer.attempt_id,
            epoch=self.epoch,
            turn=turn,
            seq=seq,
        )
        now = utc_now()
        row = {
            "call_key": key,
            "project": self.project,
            "slot": self.slot,
            "epoch": self.epoch,
            "turn": turn,
            "seq": seq,
            "tool": name,
            "arguments": json.dumps(dict(args), ensure_ascii=False),
            "task_id": pointer.task_id,
            "attempt_id": pointer.attempt_id,
            "state": TOOL_CALL.next(None, CallEvent.RECORD).value,
            "created_at": now,
            "updated_at": now,
        }
        self.store.write_sync(lambda tx: insert_call(tx, row))
        answer = self._deliver(key, time.monotonic() + self.wait_s)
        if answer is None:
            self._deliver_behind(key)
            return {
                "status": "pending_delivery",
                "call": key,
                "next": (
                    f"baton recorded this call; the coordinator has been unreachable for "
                    f"{self.wait_s:g} s and baton delivers it as soon as one is back. Do not "
                    "make it again. If it was your report, stop now."
                ),
            }
        return _result(answer)

    def _read(self, name: str, args: Mapping[str, str]) -> ToolResult:
        with self._lock:
            pointer = self._turn.pointer
        request = {
            "tool": name,
            "arguments": dict(args),
            "task_id": pointer.task_id,
            "attempt_id": pointer.attempt_id,
        }
        answer = self._post("read", request, time.monotonic() + self.wait_s)
        if answer is None:
            raise ToolRefused(
                "HUB_UNREACHABLE",
                f"the coordinator's role tools were unreachable for {self.wait_s:g} s; "
                "nothing was read. Try again later.",
            )
        return _result(answer)

    def _deliver(self, key: str, deadline: float) -> dict[str, Any] | None:
        answer = self._post("calls", {"key": key}, deadline)
        if answer is not None:
            self.delivered += 1
            code = (answer.get("error") or {}).get("code")
            if code == "CREDENTIAL_REPLACED":
                self._refuse(key, str((answer.get("error") or {}).get("message", code)))
        return answer

    def _post(self, kind: str, request: dict[str, Any], deadline: float) -> dict[str, Any] | None:
        """The hub's answer, tried until ``deadline`` (None: no hub answered by then)."""
        pause = _BACKOFF[0]
        while not self._closed.is_set():
            url = self._hub_url()
            if url is not None:
                answer = self._try(f"{url}/{kind}/{quote(self.slot, safe='')}", request)
                if answer is not None:
                    return answer
            if time.monotonic() + pause > deadline:
                return None
            # The hub is another host's process: nothing to wait on but trying again.
            self._closed.wait(pause)
            pause = min(pause * 2, _BACKOFF[1])
        return None

    def _try(self, url: str, request: dict[str, Any]) -> dict[str, Any] | None:
        headers = {"authorization": f"Bearer {self.token}"}
        try:
            response = self.client.post(url, json=request, headers=headers)
        except httpx.HTTPError as exc:
            log.info("slot %s: the hub at %s is unreachable: %s", self.slot, url, exc)
            return None
        if response.status_code in (401, 404):
            try:
                error = response.json().get("error") or {}
            except ValueError:
                error = {}
            message = str(error.get("message") or f"the hub refused this session ({url})")
            return refusal("CREDENTIAL_REPLACED", message)
        if response.status_code != 200:
            log.info("slot %s: the hub answered %d; trying again", self.slot, response.status_code)
            return None
        try:
            answer = response.json()
        except ValueError:
            return None
        return answer if isinstance(answer, dict) else None

    def _hub_url(self) -> str | None:
        project = self.project
        try:
            found = self.store.read_tx(lambda tx: hub_url(tx, project))
        except Exception as exc:  # the store is out too: the address given, if any
            log.info("slot %s: where the hub is could not be read: %s", self.slot, exc)
            found = None
        return found or self.url

    def _refuse(self, key: str, reason: str) -> None:
        refused = TOOL_CALL.next(CallState.PENDING, CallEvent.REFUSE).value
        with contextlib.suppress(Exception):
            self.store.write_sync(
                lambda tx: move_call(
                    tx,
                    key,
                    expect=CallState.PENDING.value,
                    state=refused,
                    answer=json.dumps(refusal("CREDENTIAL_REPLACED", reason)),
                    reason=reason,
                    updated_at=utc_now(),
                )
            )

    def _deliver_behind(self, key: str) -> None:
        """Keep delivering ``key`` until a hub answers or the relay closes."""

        def run() -> None:
            while not self._closed.is_set():
                if self._deliver(key, time.monotonic() + self.wait_s) is not None:
                    return

        thread = threading.Thread(target=run, name=f"baton-relay-{self.slot}", daemon=True)
        self._behind.append(thread)
        thread.start()


def _result(answer: Mapping[str, Any]) -> ToolResult:
    error = answer.get("error")
    if isinstance(error, dict):
        raise ToolRefused(str(error.get("code") or "REFUSED"), str(error.get("message") or ""))
    result = answer.get("result")
    if not isinstance(result, dict):
        raise CoordinationError("the hub's answer holds no result")
    return result


class RelayTools:
    """The role's tools on a worker host: checked here, run at the coordinator's hub
    (:class:`~baton.role_tools.server.ToolSurface` for the relay's own server)."""

    def __init__(self, relay: Relay, binding: Binding) -> None:
        self.relay = relay
        self._binding = binding

    @property
    def binding(self) -> Binding:
        return self._binding

    def specs(self) -> list[ToolSpec]:
        return [TOOL_SPECS[name] for name in allowed_tools(self._binding)]

    def call(  # Any: the tool's JSON arguments, checked by checked_call
        self, name: str, arguments: Mapping[str, Any] | None
    ) -> ToolResult:
        return self.relay.call(name, checked_call(self._binding, name, arguments))
