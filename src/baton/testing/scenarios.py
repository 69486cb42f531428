"""The fake agent's behaviour without I/O: one script, driven by a process or in memory.

:class:`ScenarioCore` decides what the agent answers; each turn is a generator
that *yields* what it wants done (send a message, call the client and receive the
reply, wait for a cancel, exit …) and *returns* the prompt's answer, as httpx's
``Auth.auth_flow`` is shared by its sync and async clients. Two drivers run the
same scripts: :mod:`baton.testing.fake_agent` (a real process, threads, blocking
pipes) and :mod:`baton.testing.memory` (asyncio, no process), so a scenario means
the same thing on both transports. Standard library only: the process driver starts
in well under 100 ms. The scenarios are documented in :mod:`baton.testing.fake_agent`.

Length: the protocol side of every scenario (initialize, auth, sessions, modes) is one
reader, so the two drivers cannot disagree about it.
"""

from __future__ import annotations

import json
import os
import threading
from collections.abc import Generator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from baton.jsontypes import JsonObject, JsonValue

__all__ = [
    "DEFAULT_STDERR_BYTES",
    "NO_ANSWER",
    "Action",
    "Call",
    "Cancel",
    "Deliver",
    "Exit",
    "Hang",
    "JoinStderrFlood",
    "Options",
    "Pause",
    "Raw",
    "ReplayIn",
    "ScenarioCore",
    "Send",
    "SpawnGrandchild",
    "StartTurn",
    "Stderr",
    "TurnScript",
    "WaitCancel",
    "dumps",
    "flood_block",
    "login_file",
]

Message = JsonObject

DEFAULT_STDERR_BYTES = 50_000_000
_FLOOD_LINE = b"stderr-flood: the quick brown fox jumps over the lazy dog 0123456789\n"


def flood_block() -> bytes:
    """About a MiB of the ``stderr-flood`` scenario's text: what both drivers write in turn."""
    return _FLOOD_LINE * max(1, (1 << 20) // len(_FLOOD_LINE))


def dumps(msg: JsonValue) -> bytes:
    """One compact NDJSON line."""
    return json.dumps(msg, separators=(",", ":"), ensure_ascii=False).encode() + b"\n"


# ---------------------------------------------------------------- what a script asks


@dataclass(frozen=True, slots=True)
class Send:
    """Write one message."""

    message: Message


@dataclass(frozen=True, slots=True)
class Raw:
    """Write these bytes as they are (not necessarily JSON)."""

    data: bytes


@dataclass(frozen=True, slots=True)
class Call:
    """Send an agent → client request; the driver sends back the reply message."""

    method: str
    params: Message

    def message(self, request_id: int) -> Message:
        """The request as the driver sends it, under the id it chose."""
        return {"jsonrpc": "2.0", "id": request_id, "method": self.method, "params": self.params}


@dataclass(frozen=True, slots=True)
class Stderr:
    """Write to the agent's stderr."""

    data: bytes


@dataclass(frozen=True, slots=True)
class WaitCancel:
    """Block until the client cancels this turn (or ``timeout`` seconds passed)."""

    timeout: float | None = None


@dataclass(frozen=True, slots=True)
class Hang:
    """Block forever: only a kill ends it."""


@dataclass(frozen=True, slots=True)
class Exit:
    """End the agent now with this status, answering nothing more."""

    code: int


@dataclass(frozen=True, slots=True)
class Pause:
    """Let the client read what was written so far (as a model streams between tokens)."""

    seconds: float


@dataclass(frozen=True, slots=True)
class JoinStderrFlood:
    """Wait until the start-up stderr flood was written (process driver)."""


@dataclass(frozen=True, slots=True)
class SpawnGrandchild:
    """Start ``sleep 300`` in the agent's group, then answer ``session/new`` with
    :meth:`ScenarioCore.session_created` (process driver only)."""

    keep_stdio: bool
    request_id: Any


Action = Send | Raw | Call | Stderr | WaitCancel | Hang | Exit | Pause | JoinStderrFlood

# ------------------------------------------------- what the reader loop must do


@dataclass(frozen=True, slots=True)
class StartTurn:
    """Run ``turn`` concurrently with the reader (its script is ``core.run_turn(turn)``)."""

    turn: TurnScript


@dataclass(frozen=True, slots=True)
class Cancel:
    """The client cancelled ``turn`` (already flagged): wake its waiter."""

    turn: TurnScript


@dataclass(frozen=True, slots=True)
class ReplayIn:
    """Scenario ``replay``: hand this client message to the trace player."""

    message: Message


@dataclass(frozen=True, slots=True)
class Deliver:
    """A reply to one of the agent's own calls."""

    request_id: Any
    message: Message


ReaderStep = Send | StartTurn | Cancel | ReplayIn | Deliver | SpawnGrandchild
"""What the reader loop does for one inbound line (:meth:`ScenarioCore.on_line`)."""


class _NoAnswer:
    """Marker: the turn answered (or will never answer) the prompt itself."""


NO_ANSWER = _NoAnswer()


@dataclass(frozen=True, slots=True)
class Options:
    scenario: str = "ok"
    count: int | None = None
    nbytes: int | None = None
    session_id: str = "fake-1"
    grandchild_keeps_stdio: bool = False
    texts: str | None = None
    """``secrets``: a JSON file with the texts to send."""
    mode: str | None = None
    """Advertise ``modes`` and a ``mode`` config option, currently this one."""
    mode_values: tuple[str, ...] = ("default", "acceptEdits", "plan", "auto")
    stuck_mode: bool = False
    """``session/set_mode`` and ``set_config_option`` answer but keep the mode."""
    switch_to: str = "acceptEdits"
    """``switch-mode``: the mode the agent switches itself to."""
    linger: float = 0.0
    """``skip-permission``: seconds to wait (for a cancel) after the write."""


@dataclass(slots=True)
class TurnScript:
    request_id: Any
    session_id: str
    message_id: str
    cancelled: bool = False
    waker: Any = None
    """The driver's handle to wake a :class:`WaitCancel` (a threading or asyncio event)."""


TurnBody = Generator[Any, Any, Any]


@dataclass
class ScenarioCore:
    """One fake agent's state and answers; drivers perform what it yields and run
    each turn with :func:`baton.testing.scripts.run_turn`."""

    options: Options
    cwd: str = field(default_factory=lambda: str(Path.cwd()))
    authenticated: bool = False
    turn_count: int = 0
    turns: dict[str, TurnScript] = field(default_factory=dict)
    lock: threading.Lock = field(default_factory=threading.Lock)
    mode: str | None = None

    def __post_init__(self) -> None:
        self.mode = self.options.mode

    @property
    def scenario(self) -> str:
        return self.options.scenario

    @property
    def survives_eof(self) -> bool:
        """``ignore-cancel`` does not end when the client closes its input."""
        return self.scenario == "ignore-cancel"

    @property
    def stderr_flood(self) -> int | None:
        if self.scenario != "stderr-flood":
            return None
        return self.options.nbytes if self.options.nbytes is not None else DEFAULT_STDERR_BYTES

    # ------------------------------------------------------------ the reader

    def on_line(self, line: bytes) -> list[ReaderStep]:
        """Everything one inbound line asks for, in order."""
        if not line.strip():
            return []
        try:
            msg = json.loads(line)
        except ValueError:
            return (
                []
                if self.scenario == "no-initialize"
                else [Send(_error(None, -32700, "Parse error"))]
            )
        if not isinstance(msg, dict):
            if self.scenario == "no-initialize":
                return []
            return [Send(_error(None, -32600, "Invalid Request"))]
        return self.on_message(msg)

    def on_message(self, msg: Message) -> list[ReaderStep]:
        method = msg.get("method")
        replay: list[ReaderStep] = [ReplayIn(msg)] if self.scenario == "replay" else []
        if not isinstance(method, str):
            if "id" in msg:  # a response to one of our requests
                return [Deliver(msg["id"], msg), *replay]
            return replay
        if self.scenario == "no-initialize":
            return []
        if replay:
            return replay
        params = msg.get("params")
        if not isinstance(params, dict):
            params = {}
        if "id" not in msg:
            if method == "session/cancel":
                return self._cancel(params)
            return []
        rid = msg["id"]
        if method == "session/prompt":
            return [StartTurn(self._turn(rid, params))]
        handler = {
            "initialize": self.initialize,
            "authenticate": self.authenticate,
            "session/new": self.new_session,
            "session/set_mode": self.set_mode,
            "session/set_config_option": self.set_config_option,
        }.get(method)
        if handler is None:
            return [Send(_error(rid, -32601, f"Method not found: {method}"))]
        return handler(rid, params)

    def initialize(self, rid: JsonValue, params: Message) -> list[ReaderStep]:
        auth_methods: list[Message] = []
        if self.scenario == "auth-required":
            auth_methods = [{"id": "fake-login", "name": "Log in"}]
        if self.scenario == "terminal-login":
            auth_methods = [
                {
                    "id": "fake-terminal",
                    "name": "Log in at the terminal",
                    "type": "terminal",
                    "args": ["--login-terminal"],
                    "env": {"FAKE_LOGIN_MODE": "terminal"},
                }
            ]
        return [
            Send(
                _result(
                    rid,
                    {
                        "protocolVersion": 1,
                        "agentCapabilities": {
                            "loadSession": False,
                            "promptCapabilities": {
                                "image": False,
                                "audio": False,
                                "embeddedContext": False,
                            },
                            "mcpCapabilities": {"http": False, "sse": False},
                        },
                        "authMethods": auth_methods,
                        "agentInfo": {
                            "name": "baton-fake-agent",
                            "title": f"baton fake agent ({self.scenario})",
                            "version": "0",
                        },
                    },
                )
            )
        ]

    def authenticate(self, rid: JsonValue, params: Message) -> list[ReaderStep]:
        if self.scenario == "auth-required" and params.get("methodId") == "fake-login":
            self.authenticated = True
            return [Send(_result(rid, {}))]
        return [Send(_error(rid, -32602, f"unknown auth method {params.get('methodId')!r}"))]

    def new_session(self, rid: JsonValue, params: Message) -> list[ReaderStep]:
        if self.scenario == "auth-required" and not self.authenticated:
            return [Send(_error(rid, -32000, "Authentication required"))]
        if self.scenario == "session-new-error":
            return [Send(_error(rid, -32603, "session store unavailable"))]
        if self.scenario == "terminal-login" and not login_file().exists():
            return [Send(_error(rid, -32000, "Authentication required: run the terminal login"))]
        cwd = params.get("cwd")
        if isinstance(cwd, str) and cwd:
            self.cwd = cwd
        if self.scenario == "spawn-grandchild" or self.options.grandchild_keeps_stdio:
            return [SpawnGrandchild(self.options.grandchild_keeps_stdio, rid)]
        return [self.session_created(rid)]

    def session_created(self, rid: JsonValue, grandchild_pid: int | None = None) -> Send:
        result: Message = {"sessionId": self.options.session_id, **self.mode_state()}
        if grandchild_pid is not None:
            result["_meta"] = {"grandchildPid": grandchild_pid}
        return Send(_result(rid, result))

    # ------------------------------------------------------------- the modes

    def mode_state(self) -> Message:
        """``modes`` and ``configOptions`` of a session (nothing without ``--mode``)."""
        if self.mode is None:
            return {}
        values = self.options.mode_values
        return {
            "modes": {
                "currentModeId": self.mode,
                "availableModes": [{"id": v, "name": v} for v in values],
            },
            "configOptions": self.config_options(),
        }

    def config_options(self) -> list[Message]:
        return [
            {
                "id": "mode",
                "name": "Mode",
                "category": "mode",
                "type": "select",
                "currentValue": self.mode,
                "options": [{"value": v, "name": v} for v in self.options.mode_values],
            }
        ]

    def _mode_refused(self, rid: JsonValue, value: JsonValue) -> list[ReaderStep] | None:
        """The error for an unknown mode, else ``None`` (and the mode changes, unless stuck)."""
        if self.mode is None or value not in self.options.mode_values:
            return [Send(_error(rid, -32602, f"unknown mode {value!r}"))]
        if not self.options.stuck_mode:
            self.mode = str(value)
        return None

    def set_mode(self, rid: JsonValue, params: Message) -> list[ReaderStep]:
        return self._mode_refused(rid, params.get("modeId")) or [Send(_result(rid, {}))]

    def set_config_option(self, rid: JsonValue, params: Message) -> list[ReaderStep]:
        if params.get("configId") != "mode":
            return [Send(_error(rid, -32602, f"unknown config option {params.get('configId')!r}"))]
        refused = self._mode_refused(rid, params.get("value"))
        return refused or [Send(_result(rid, {"configOptions": self.config_options()}))]

    def _turn(self, rid: JsonValue, params: Message) -> TurnScript:
        session_id = str(params.get("sessionId") or self.options.session_id)
        with self.lock:
            self.turn_count += 1
            turn = TurnScript(rid, session_id, f"fake-msg-{self.turn_count}")
            self.turns[session_id] = turn
        return turn

    def _cancel(self, params: Message) -> list[ReaderStep]:
        if self.scenario == "ignore-cancel":
            return []
        with self.lock:
            turn = self.turns.get(str(params.get("sessionId") or self.options.session_id))
        if turn is None:
            return []
        turn.cancelled = True
        return [Cancel(turn)]

    def finish(self, turn: TurnScript) -> None:
        """The turn answered: a later cancel no longer concerns it."""
        with self.lock:
            if self.turns.get(turn.session_id) is turn:
                del self.turns[turn.session_id]

    def answer(self, turn: TurnScript, result: Message) -> Send:
        """The prompt's answer; the turn is finished (it may go on sending late updates)."""
        self.finish(turn)
        return Send(_result(turn.request_id, result))

    # ------------------------------------------------------------- the turns

    def update(self, update: Message, session_id: str | None = None) -> Send:
        return Send(
            {
                "jsonrpc": "2.0",
                "method": "session/update",
                "params": {"sessionId": session_id or self.options.session_id, "update": update},
            }
        )

    def chunk(self, text: str, message_id: str) -> Send:
        return self.update(
            {
                "sessionUpdate": "agent_message_chunk",
                "messageId": message_id,
                "content": {"type": "text", "text": text},
            }
        )


def login_file() -> Path:
    """Scenario ``terminal-login``: the file its login program writes (``$HOME/.fake-login``)."""
    return Path(os.environ.get("HOME", "/nonexistent")) / ".fake-login"


def _result(rid: JsonValue, result: JsonValue) -> Message:
    return {"jsonrpc": "2.0", "id": rid, "result": result}


def _error(rid: JsonValue, code: int, message: str) -> Message:
    return {"jsonrpc": "2.0", "id": rid, "error": {"code": code, "message": message}}
