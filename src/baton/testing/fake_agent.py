"""A scriptable fault-injection ACP v1 agent (standard library only, starts in well under 100 ms).

Run it as the agent process of a test::

    python -m baton.testing.fake_agent --scenario NAME [--count N] [--bytes N] [--trace FILE]

Normal behaviour (scenario ``ok``, and every other scenario except where it says otherwise):

* ``initialize`` -> ``{protocolVersion: 1, agentCapabilities: {loadSession: false, ...},
  authMethods: [], agentInfo: {name: "baton-fake-agent"}}``;
* ``session/new`` -> ``{sessionId: "fake-1"}`` (``--session-id`` changes it);
* ``session/prompt`` streams two ``agent_message_chunk`` updates (with ``messageId``) and answers
  ``{stopReason: "end_turn"}``;
* ``session/cancel`` makes a pending prompt answer ``{stopReason: "cancelled"}``;
* other requests get -32601; notifications and stray responses are ignored; a line that is not
  JSON gets a -32700 error; when the client closes stdin the agent exits 0 (except
  ``ignore-cancel``); a closed stdout (EPIPE) also exits 0.

Scenarios (``--scenario``):

``ok``
    The normal behaviour above.
``malformed-json``
    During the prompt writes ``{"jsonrpc":"2.0",`` (not JSON) and ``[1,2]`` (JSON, not
    JSON-RPC) as lines, then continues normally and ends the turn.
``huge-line``
    During the prompt writes one valid ``agent_message_chunk`` line of exactly ``--bytes`` bytes
    including the newline (default 60 MB), then a normal chunk, then ends the turn.
``invalid-utf8``
    During the prompt writes an ``agent_message_chunk`` line whose text holds the bytes
    ``\\xff\\xfe``, then continues normally.
``die-mid-turn``
    Sends one chunk, then exits with status 3 without answering the prompt.
``no-initialize``
    Reads everything and never answers anything (exits 0 on EOF).
``stderr-flood``
    From start-up writes ``--bytes`` (default 50 MB) of log lines to stderr as fast as it can;
    the prompt's chunks go out at once but ``end_turn`` only after the whole flood was written,
    so a client that does not drain stderr never sees the turn end.
``ignore-cancel``
    The prompt sends one chunk and never finishes; ``session/cancel`` is ignored; SIGTERM, SIGINT
    and SIGHUP are ignored and closing stdin does not end it: only SIGKILL does (or
    ``--max-lifetime``).
``hang-prompt``
    Sends one chunk and never answers the prompt, until ``session/cancel`` (then ``cancelled``).
``spawn-grandchild``
    At ``session/new`` starts ``sleep 300`` in the agent's process group (stdio on /dev/null,
    unless ``--grandchild-keeps-stdio``, which makes it hold the agent's pipes open) and writes
    ``grandchild-pid=<pid>`` to stderr, then behaves normally.
``flood``
    The prompt sends a ``tool_call`` for ``t1`` then ``--count`` (default 200000) notifications
    alternating ``agent_message_chunk`` (messageId ``flood-msg``, text ``flood chunk NNNNNNN …``,
    ~40 bytes) and ``tool_call_update`` (``t1``, ``in_progress``, content text ``flood output
    NNNNNNN …``, ~40 bytes), ``NNNNNNN`` being the notification's 0-based index, written in
    multi-megabyte batches; then ``end_turn``.
``late-chunks``
    Answers ``end_turn`` after one chunk, then sends two more ``agent_message_chunk``s.
``repeat-tool-call``
    Sends ``tool_call`` ``t1`` twice (the second with more fields), then ``tool_call_update``s
    with partial fields (status only; content only), then ``completed`` with ``rawOutput``.
``unknown-variant``
    Sends a ``session/update`` with ``sessionUpdate: "future_variant_xyz"`` and an unstable
    ``notice`` update, then a normal chunk, then ``end_turn``.
``cursor-ext``
    Sends Cursor's vendor requests, each with an id, one after the other:
    ``cursor/update_todos``, ``cursor/task``, ``cursor/generate_image``, ``cursor/ask_question``,
    ``cursor/create_plan``; after each reply writes ``cursor-reply=<json>`` (``{method, result}``
    or ``{method, error}``) as one stderr line; ends the turn after the last reply.
``auth-required``
    ``initialize`` advertises ``authMethods: [{id: "fake-login", name: "Log in"}]``;
    ``session/new`` answers ``{code: -32000, message: "Authentication required"}`` until the
    client called ``authenticate {methodId: "fake-login"}``.
``permission``
    The prompt sends ``tool_call`` ``perm-1`` (kind ``execute``), then
    ``session/request_permission`` with options ``allow-once``/``allow-always``/``reject-once``,
    waits for the answer, reports the chosen ``optionId`` in a ``tool_call_update``
    (``completed`` if allowed, ``failed`` if rejected or cancelled) and an agent_message_chunk,
    then ends the turn (``cancelled`` if the client cancelled meanwhile).
``usage``
    Sends a ``usage_update`` ``{used, size, cost: {amount, currency}}`` and answers
    ``{stopReason: "end_turn", usage: {inputTokens: 10, outputTokens: 5, totalTokens: 15}}``.
``fs``
    Calls ``fs/write_text_file`` for ``<cwd>/fake-fs.txt``, then for ``<cwd>/../escape.txt``
    (normalized, so outside cwd), then ``fs/read_text_file`` of ``/etc/passwd``, reporting each
    answer (``result`` or ``error``) as one agent_message_chunk of JSON; ends the turn.
``replay`` (with ``--trace FILE``)
    Replays a recorded NDJSON trace, each line ``{"dir": "client"|"agent", "msg": {...}}``.
    Agent messages before the first client message are sent at start. For each client message
    of the trace it waits for the matching live message (same method for requests and
    notifications; a response to the same id for responses to our requests), then sends the
    agent messages that follow it, with the ids of responses rewritten to the live request ids,
    and the trace's ``cwd`` (from the client's matched ``session/new``/``session/load``) replaced
    by the live one. Requests must come in the trace's order; replies and notifications may
    come earlier than recorded (a permission reply before a cancel, say): they are matched
    ahead, and the agent messages still wait for every client message recorded before them.
    A live request that is not the next one of the trace gets a -32601 error; unmatched
    notifications and replies are ignored.

``skip-permission``
    The fault the permission audit exists for: the prompt announces ``tool_call`` ``skip-1``
    (kind ``edit``, ``pending``, location ``<cwd>/skipped.txt``), writes that file *itself*
    without asking anything, then reports the call ``completed``.
``write-unasked``
    Calls ``fs/write_text_file`` for ``<cwd>/unasked.txt`` without a permission request.
``terminal-unasked``
    Calls ``terminal/create`` (``echo unasked``) without a permission request, waits for it to
    exit and releases it.
``ignore-denial``
    Asks permission for ``tool_call`` ``deny-1`` (kind ``edit``, ``<cwd>/denied.txt``); whatever
    the answer, writes the file itself and reports the call ``completed``.
``switch-mode``
    During the prompt switches its own mode to ``--switch-to`` (default ``acceptEdits``) and
    says so with ``current_mode_update``, then waits for a cancel (answering ``cancelled``) or
    ends the turn after two seconds.

``terminal-login``
    ACP terminal authentication: ``initialize`` advertises ``authMethods`` ``[{id:
    "fake-terminal", type: "terminal", args: ["--login-terminal"], env: {FAKE_LOGIN_MODE:
    "terminal"}}]``; ``session/new`` answers -32000 until ``$HOME/.fake-login`` exists. Run
    with ``--login-terminal`` the agent is its own login program instead: it writes that file
    (its content names ``$FAKE_LOGIN_MODE``), prints ``fake agent: logged in`` and exits 0.

``session-new-error``
    ``session/new`` answers the JSON-RPC error ``{code: -32603, message: "session store
    unavailable"}``.
``permission-unannounced``
    Asks ``session/request_permission`` for ``toolCall`` ``u-1`` (kind ``execute``, title
    ``rm -rf build``) it never announced with ``tool_call``; allowed, it sends only
    ``tool_call_update``s (``in_progress``, then ``completed``), as Codex does.

``usage-meta``
    Usage where Qwen Code puts it: two ``agent_message_chunk``s (one per model call) each
    carrying ``_meta.usage`` ``{inputTokens: 10, outputTokens: 5, totalTokens: 15,
    thoughtTokens: 1, cachedReadTokens: 2}``; the prompt result has no usage.
``usage-context``
    Only a ``usage_update`` ``{used: 500, size: 258400}`` (context window), as Zed codex-acp
    reports; no token counts anywhere.
``usage-result-meta``
    The prompt result carries its usage in ``_meta.usage`` (``{inputTokens: 7, outputTokens:
    3, totalTokens: 10}``) instead of ``usage``.

``agent-terminal``
    A tool call ``at-1`` (kind ``execute``) whose content names terminal ``agent-term-1``,
    one the agent runs itself (never created through ``terminal/create``), completed with
    ``rawOutput`` ``{output: "built ok\\n", exit_code: 0}``.
``client-terminal-tool``
    Runs ``printf 'from the client terminal\\n'`` through ``terminal/create``, reports tool call
    ``ct-1`` (kind ``execute``) naming that terminal, waits for exit, releases it, then
    completes the tool call with content naming only the terminal.

Modes (any scenario): with ``--mode ID`` the agent advertises ``modes`` and a ``mode``
config option over ``--mode-values`` (comma-separated; default
``default,acceptEdits,plan,auto``), currently ``ID``; ``session/set_mode`` and
``session/set_config_option`` change it (``--stuck-mode`` answers them but keeps the mode).

Hostile scenarios (:data:`baton.testing.HOSTILE_SCENARIOS`; bodies in :mod:`baton.testing.hostile`):

``lone-surrogate``
    A chunk and a tool call title holding ``"\\ud800"``/``"\\udfff"`` (valid JSON, not encodable
    as UTF-8), between two normal chunks; then ``end_turn``.
``secrets`` (with ``--texts FILE``, a JSON list of strings)
    Each text as a transcript split across two writes, a stderr line and a tool call (title,
    ``rawInput``, ``rawOutput``, content text, a diff); then all of them in one
    ``session/request_permission``; then ``end_turn``. With ``{"texts": [...], "die": true}``
    in the file, it writes them all to stderr again and exits 3 instead of answering.

Other options: ``--session-id``, ``--max-lifetime SECONDS`` (default 600: the agent exits 124
after that, so a leaked fake agent never outlives a test run by long).
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import signal
import sys
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any, BinaryIO

from baton.testing import SCENARIOS
from baton.testing.hostile import HostileScenarios

__all__ = ["FakeAgent", "main"]

Message = dict[str, Any]

DEFAULT_HUGE_BYTES = 60_000_000
DEFAULT_STDERR_BYTES = 50_000_000
DEFAULT_FLOOD_COUNT = 200_000


def _dumps(msg: Any) -> bytes:
    return json.dumps(msg, separators=(",", ":"), ensure_ascii=False).encode() + b"\n"


class _Turn:
    def __init__(self, request_id: Any, session_id: str) -> None:
        self.request_id = request_id
        self.session_id = session_id
        self.cancelled = threading.Event()


class _Pending:
    def __init__(self) -> None:
        self.done = threading.Event()
        self.reply: Message = {}


class FakeAgent(HostileScenarios):
    """The agent; one instance per process. Reads ``stdin``, writes ``stdout`` (both binary)."""

    def __init__(self, args: argparse.Namespace, stdin: BinaryIO, stdout: BinaryIO) -> None:
        self.args = args
        self.scenario: str = args.scenario
        self.session_id: str = args.session_id
        self.stdin = stdin
        self.stdout = stdout
        self._write_lock = threading.Lock()
        self._state_lock = threading.Lock()
        self._next_id = 0
        self._pending: dict[Any, _Pending] = {}
        self._turns: dict[str, _Turn] = {}
        self._turn_count = 0
        self.cwd = str(Path.cwd())
        self.authenticated = False
        self._flood_thread: threading.Thread | None = None
        self._replay: _Replay | None = None
        self.mode: str | None = args.mode

    # -- output --------------------------------------------------------------------------------

    def write(self, data: bytes) -> None:
        """Write raw bytes and flush; a vanished client ends the process quietly."""
        with self._write_lock:
            try:
                self.stdout.write(data)
                self.stdout.flush()
            except (BrokenPipeError, ValueError, OSError):
                os._exit(0)

    def send(self, msg: Message) -> None:
        self.write(_dumps(msg))

    def respond(self, request_id: Any, result: Any) -> None:
        self.send({"jsonrpc": "2.0", "id": request_id, "result": result})

    def respond_error(self, request_id: Any, code: int, message: str) -> None:
        self.send({"jsonrpc": "2.0", "id": request_id, "error": {"code": code, "message": message}})

    def update(self, update: Message, session_id: str | None = None) -> None:
        self.send(
            {
                "jsonrpc": "2.0",
                "method": "session/update",
                "params": {"sessionId": session_id or self.session_id, "update": update},
            }
        )

    def chunk(self, text: str, message_id: str) -> None:
        self.update(
            {
                "sessionUpdate": "agent_message_chunk",
                "messageId": message_id,
                "content": {"type": "text", "text": text},
            }
        )

    def call(self, method: str, params: Any) -> Message:
        """Send an agent -> client request and block until its response arrives."""
        with self._state_lock:
            rid = self._next_id
            self._next_id += 1
            pending = _Pending()
            self._pending[rid] = pending
        self.send({"jsonrpc": "2.0", "id": rid, "method": method, "params": params})
        pending.done.wait()
        return pending.reply

    # -- input ---------------------------------------------------------------------------------

    def run(self) -> int:
        if self.scenario == "ignore-cancel":
            for sig in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP):
                signal.signal(sig, signal.SIG_IGN)
        if self.scenario == "stderr-flood":
            self._flood_thread = threading.Thread(target=self._flood_stderr, daemon=True)
            self._flood_thread.start()
        if self.scenario == "replay":
            self._replay = _Replay(self, self.args.trace)
            self._replay.start()
        for line in self.stdin:
            if not line.strip():
                continue
            try:
                msg = json.loads(line)
            except ValueError:
                if self.scenario != "no-initialize":
                    self.send(
                        {
                            "jsonrpc": "2.0",
                            "id": None,
                            "error": {"code": -32700, "message": "Parse error"},
                        }
                    )
                continue
            if isinstance(msg, dict):
                self.dispatch(msg)
            elif self.scenario != "no-initialize":
                self.send(
                    {
                        "jsonrpc": "2.0",
                        "id": None,
                        "error": {"code": -32600, "message": "Invalid Request"},
                    }
                )
        # The client closed stdin.
        if self.scenario == "ignore-cancel":
            threading.Event().wait()  # only SIGKILL (or the lifetime cap) ends us
        return 0

    def dispatch(self, msg: Message) -> None:
        method = msg.get("method")
        if not isinstance(method, str):
            if "id" in msg:  # a response to one of our requests
                with self._state_lock:
                    pending = self._pending.pop(msg["id"], None)
                if pending is not None:
                    pending.reply = msg
                    pending.done.set()
            if self._replay is not None:
                self._replay.incoming(msg)
            return
        if self.scenario == "no-initialize":
            return
        if self._replay is not None:
            self._replay.incoming(msg)
            return
        params = msg.get("params")
        if not isinstance(params, dict):
            params = {}
        if "id" not in msg:
            if method == "session/cancel":
                self.on_cancel(params)
            return
        rid = msg["id"]
        handler = self._request_handlers().get(method)
        if handler is None:
            self.respond_error(rid, -32601, f"Method not found: {method}")
            return
        handler(rid, params)

    def _request_handlers(self) -> dict[str, Callable[[Any, Message], None]]:
        return {
            "initialize": self.on_initialize,
            "authenticate": self.on_authenticate,
            "session/new": self.on_new_session,
            "session/prompt": self.on_prompt,
            "session/set_mode": self.on_set_mode,
            "session/set_config_option": self.on_set_config_option,
        }

    # -- handlers ------------------------------------------------------------------------------

    def on_initialize(self, rid: Any, params: Message) -> None:
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
        self.respond(
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

    def on_authenticate(self, rid: Any, params: Message) -> None:
        if self.scenario == "auth-required" and params.get("methodId") == "fake-login":
            self.authenticated = True
            self.respond(rid, {})
        else:
            self.respond_error(rid, -32602, f"unknown auth method {params.get('methodId')!r}")

    def on_new_session(self, rid: Any, params: Message) -> None:
        if self.scenario == "auth-required" and not self.authenticated:
            self.respond_error(rid, -32000, "Authentication required")
            return
        if self.scenario == "session-new-error":
            self.respond_error(rid, -32603, "session store unavailable")
            return
        if self.scenario == "terminal-login" and not _login_file().exists():
            self.respond_error(rid, -32000, "Authentication required: run the terminal login")
            return
        cwd = params.get("cwd")
        if isinstance(cwd, str) and cwd:
            self.cwd = cwd
        if self.scenario == "spawn-grandchild" or self.args.grandchild_keeps_stdio:
            self._spawn_grandchild()
        self.respond(rid, {"sessionId": self.session_id, **self._mode_state()})

    # -- modes ---------------------------------------------------------------------------------

    def _mode_values(self) -> list[str]:
        return [v for v in self.args.mode_values.split(",") if v]

    def _mode_state(self) -> Message:
        if self.mode is None:
            return {}
        values = self._mode_values()
        return {
            "modes": {
                "currentModeId": self.mode,
                "availableModes": [{"id": v, "name": v} for v in values],
            },
            "configOptions": self._config_options(),
        }

    def _config_options(self) -> list[Message]:
        return [
            {
                "id": "mode",
                "name": "Mode",
                "category": "mode",
                "type": "select",
                "currentValue": self.mode,
                "options": [{"value": v, "name": v} for v in self._mode_values()],
            }
        ]

    def _set_mode(self, rid: Any, value: Any) -> bool:
        if self.mode is None or value not in self._mode_values():
            self.respond_error(rid, -32602, f"unknown mode {value!r}")
            return False
        if not self.args.stuck_mode:
            self.mode = str(value)
        return True

    def on_set_mode(self, rid: Any, params: Message) -> None:
        if self._set_mode(rid, params.get("modeId")):
            self.respond(rid, {})

    def on_set_config_option(self, rid: Any, params: Message) -> None:
        if params.get("configId") != "mode":
            self.respond_error(rid, -32602, f"unknown config option {params.get('configId')!r}")
            return
        if self._set_mode(rid, params.get("value")):
            self.respond(rid, {"configOptions": self._config_options()})

    def on_prompt(self, rid: Any, params: Message) -> None:
        session_id = str(params.get("sessionId") or self.session_id)
        turn = _Turn(rid, session_id)
        with self._state_lock:
            self._turns[session_id] = turn
            self._turn_count += 1
        threading.Thread(target=self._run_turn, args=(turn,), daemon=True).start()

    def on_cancel(self, params: Message) -> None:
        if self.scenario == "ignore-cancel":
            return
        session_id = str(params.get("sessionId") or self.session_id)
        with self._state_lock:
            turn = self._turns.get(session_id)
        if turn is not None:
            turn.cancelled.set()

    # -- turns ---------------------------------------------------------------------------------

    def _run_turn(self, turn: _Turn) -> None:
        name = "turn_" + self.scenario.replace("-", "_")
        body: Callable[[_Turn, str], Any] = getattr(self, name, self.turn_ok)
        message_id = f"fake-msg-{self._turn_count}"
        outcome = body(turn, message_id)
        if outcome is _NO_ANSWER:
            return
        with self._state_lock:
            if self._turns.get(turn.session_id) is turn:
                del self._turns[turn.session_id]
        if isinstance(outcome, dict):
            result = outcome
        else:
            stop = "cancelled" if turn.cancelled.is_set() else "end_turn"
            result = {"stopReason": stop}
        self.respond(turn.request_id, result)

    def turn_ok(self, turn: _Turn, mid: str) -> Any:
        self.chunk("Hello from the fake agent. ", mid)
        self.chunk("The turn is done.", mid)
        return None

    def turn_malformed_json(self, turn: _Turn, mid: str) -> Any:
        self.chunk("Before the garbage. ", mid)
        self.write(b'{"jsonrpc":"2.0",\n')
        self.write(b"[1,2]\n")
        self.chunk("After the garbage.", mid)
        return None

    def turn_huge_line(self, turn: _Turn, mid: str) -> Any:
        total: int = self.args.bytes if self.args.bytes is not None else DEFAULT_HUGE_BYTES
        head = _dumps(
            {
                "jsonrpc": "2.0",
                "method": "session/update",
                "params": {
                    "sessionId": self.session_id,
                    "update": {
                        "sessionUpdate": "agent_message_chunk",
                        "messageId": mid,
                        "content": {"type": "text", "text": "@"},
                    },
                },
            }
        )
        prefix, _, suffix = head.partition(b"@")
        fill = max(0, total - len(prefix) - len(suffix))
        self.write(prefix + b"x" * fill + suffix)
        self.chunk("After the huge line.", mid)
        return None

    def turn_invalid_utf8(self, turn: _Turn, mid: str) -> Any:
        line = _dumps(
            {
                "jsonrpc": "2.0",
                "method": "session/update",
                "params": {
                    "sessionId": self.session_id,
                    "update": {
                        "sessionUpdate": "agent_message_chunk",
                        "messageId": mid,
                        "content": {"type": "text", "text": "bad bytes: @ end"},
                    },
                },
            }
        )
        self.write(line.replace(b"@", b"\xff\xfe"))
        self.chunk("After the invalid bytes.", mid)
        return None

    def turn_die_mid_turn(self, turn: _Turn, mid: str) -> Any:
        self.chunk("About to die. ", mid)
        with self._write_lock:
            os._exit(3)

    def turn_ignore_cancel(self, turn: _Turn, mid: str) -> Any:
        self.chunk("I will never finish. ", mid)
        threading.Event().wait()
        return _NO_ANSWER

    def turn_hang_prompt(self, turn: _Turn, mid: str) -> Any:
        self.chunk("Waiting for a cancel. ", mid)
        turn.cancelled.wait()
        return None

    def turn_stderr_flood(self, turn: _Turn, mid: str) -> Any:
        self.turn_ok(turn, mid)
        if self._flood_thread is not None:
            self._flood_thread.join()
        return None

    def turn_flood(self, turn: _Turn, mid: str) -> Any:
        count: int = self.args.count if self.args.count is not None else DEFAULT_FLOOD_COUNT
        sid = json.dumps(self.session_id)
        self.update(
            {
                "sessionUpdate": "tool_call",
                "toolCallId": "t1",
                "title": "flood tool",
                "kind": "other",
                "status": "in_progress",
            }
        )
        chunk_tmpl = (
            '{"jsonrpc":"2.0","method":"session/update","params":{"sessionId":' + sid + ","
            '"update":{"sessionUpdate":"agent_message_chunk","messageId":"flood-msg",'
            '"content":{"type":"text","text":"flood chunk %07d of the benchmark load."}}}}\n'
        ).encode()
        tool_tmpl = (
            '{"jsonrpc":"2.0","method":"session/update","params":{"sessionId":' + sid + ","
            '"update":{"sessionUpdate":"tool_call_update","toolCallId":"t1",'
            '"status":"in_progress","content":[{"type":"content","content":{"type":"text",'
            '"text":"flood output %07d of the benchmark load"}}]}}}\n'
        ).encode()
        batch = 16384  # ~4 MB per write
        for start in range(0, count, batch):
            stop = min(count, start + batch)
            self.write(
                b"".join([(tool_tmpl if i & 1 else chunk_tmpl) % i for i in range(start, stop)])
            )
        return None

    def turn_late_chunks(self, turn: _Turn, mid: str) -> Any:
        self.chunk("Before the end. ", mid)
        self.respond(turn.request_id, {"stopReason": "end_turn"})
        self.chunk("Late chunk one. ", mid)
        self.chunk("Late chunk two.", mid)
        with self._state_lock:
            self._turns.pop(turn.session_id, None)
        return _NO_ANSWER

    def turn_repeat_tool_call(self, turn: _Turn, mid: str) -> Any:
        path = str(Path(self.cwd) / "repeat.txt")
        self.update(
            {
                "sessionUpdate": "tool_call",
                "toolCallId": "t1",
                "title": "write",
                "kind": "edit",
                "status": "pending",
                "rawInput": {},
            }
        )
        self.update(
            {
                "sessionUpdate": "tool_call",
                "toolCallId": "t1",
                "title": "Write repeat.txt",
                "kind": "edit",
                "status": "pending",
                "locations": [{"path": path}],
                "rawInput": {"filePath": path, "content": "again\n"},
            }
        )
        self.update(
            {"sessionUpdate": "tool_call_update", "toolCallId": "t1", "status": "in_progress"}
        )
        self.update(
            {
                "sessionUpdate": "tool_call_update",
                "toolCallId": "t1",
                "content": [
                    {"type": "diff", "path": path, "oldText": None, "newText": "again\n"},
                ],
            }
        )
        self.update(
            {
                "sessionUpdate": "tool_call_update",
                "toolCallId": "t1",
                "status": "completed",
                "rawOutput": {"output": "Wrote file successfully."},
            }
        )
        self.chunk("Wrote repeat.txt.", mid)
        return None

    def turn_unknown_variant(self, turn: _Turn, mid: str) -> Any:
        self.update(
            {
                "sessionUpdate": "future_variant_xyz",
                "someField": 42,
                "nested": {"a": [1, 2, 3]},
                "_meta": {"fake": True},
            }
        )
        self.update(
            {
                "sessionUpdate": "notice",
                "level": "warning",
                "message": "This is an unstable notice update.",
            }
        )
        self.chunk("After the unknown variants.", mid)
        return None

    def turn_cursor_ext(self, turn: _Turn, mid: str) -> Any:
        image = str(Path(self.cwd) / "baton.png")
        calls: list[tuple[str, Message]] = [
            (
                "cursor/update_todos",
                {
                    "toolCallId": "todo-1",
                    "todos": [
                        {"id": "1", "content": "Write the tests", "status": "in_progress"},
                        {"id": "2", "content": "Ship it", "status": "pending"},
                    ],
                    "merge": False,
                },
            ),
            (
                "cursor/task",
                {
                    "toolCallId": "task-1",
                    "description": "Explore the repository",
                    "prompt": "List the Python files",
                    "subagentType": "explore",
                    "model": "default[]",
                },
            ),
            (
                "cursor/generate_image",
                {"toolCallId": "img-1", "description": "A relay baton", "filePath": image},
            ),
            (
                "cursor/ask_question",
                {
                    "toolCallId": "q-1",
                    "title": "Pick a colour",
                    "questions": [
                        {
                            "id": "q1",
                            "prompt": "Which colour?",
                            "options": [{"id": "a", "label": "Red"}, {"id": "b", "label": "Blue"}],
                            "allowMultiple": False,
                        }
                    ],
                },
            ),
            (
                "cursor/create_plan",
                {
                    "toolCallId": "plan-1",
                    "name": "Fake plan",
                    "overview": "Two steps",
                    "plan": "# Plan\n\n1. Write\n2. Ship\n",
                    "todos": [
                        {"id": "1", "content": "Write", "status": "pending"},
                        {"id": "2", "content": "Ship", "status": "pending"},
                    ],
                    "isProject": False,
                },
            ),
        ]
        for method, params in calls:
            reply = self.call(method, {"sessionId": turn.session_id, **params})
            echo: Message = {"method": method}
            if "error" in reply:
                echo["error"] = reply["error"]
            else:
                echo["result"] = reply.get("result")
            self._stderr(b"cursor-reply=" + _dumps(echo))
        self.chunk("All cursor replies arrived.", mid)
        return None

    def turn_permission(self, turn: _Turn, mid: str) -> Any:
        tool_call = {
            "toolCallId": "perm-1",
            "title": "rm -rf build",
            "kind": "execute",
            "rawInput": {"command": "rm -rf build"},
        }
        self.update({"sessionUpdate": "tool_call", "status": "pending", **tool_call})
        reply = self.call(
            "session/request_permission",
            {
                "sessionId": turn.session_id,
                "toolCall": tool_call,
                "options": [
                    {"optionId": "allow-once", "name": "Allow", "kind": "allow_once"},
                    {"optionId": "allow-always", "name": "Always allow", "kind": "allow_always"},
                    {"optionId": "reject-once", "name": "Reject", "kind": "reject_once"},
                ],
            },
        )
        outcome = (reply.get("result") or {}).get("outcome") or {}
        if "error" in reply:
            chosen = "error"
        elif outcome.get("outcome") == "selected":
            chosen = str(outcome.get("optionId"))
        else:
            chosen = str(outcome.get("outcome") or "none")
        allowed = chosen in ("allow-once", "allow-always")
        self.update(
            {
                "sessionUpdate": "tool_call_update",
                "toolCallId": "perm-1",
                "status": "completed" if allowed else "failed",
                "content": [
                    {"type": "content", "content": {"type": "text", "text": f"optionId={chosen}"}}
                ],
            }
        )
        self.chunk(f"permission outcome: {chosen}", mid)
        return None

    def turn_usage(self, turn: _Turn, mid: str) -> Any:
        self.chunk("Counting tokens.", mid)
        self.update(
            {
                "sessionUpdate": "usage_update",
                "used": 1234,
                "size": 200000,
                "cost": {"amount": 0.0123, "currency": "USD"},
            }
        )
        return {
            "stopReason": "end_turn",
            "usage": {"inputTokens": 10, "outputTokens": 5, "totalTokens": 15},
        }

    def turn_fs(self, turn: _Turn, mid: str) -> Any:
        inside = str(Path(self.cwd) / "fake-fs.txt")
        # "<cwd>/../escape.txt", normalized: a path outside the session's cwd.
        outside = str(Path(self.cwd).parent / "escape.txt")
        calls: list[tuple[str, Message]] = [
            ("fs/write_text_file", {"path": inside, "content": "written by the fake agent\n"}),
            ("fs/write_text_file", {"path": outside, "content": "this must not escape\n"}),
            ("fs/read_text_file", {"path": "/etc/passwd"}),
        ]
        for method, params in calls:
            reply = self.call(method, {"sessionId": turn.session_id, **params})
            report: Message = {"method": method, "path": params["path"]}
            if "error" in reply:
                report["error"] = reply["error"]
            else:
                report["result"] = reply.get("result")
            self.chunk(json.dumps(report), mid)
        return None

    def _ask(self, turn: _Turn, tool_call: Message, allow: str, reject: str) -> str:
        """``session/request_permission`` with one allow and one reject option; the answer."""
        reply = self.call(
            "session/request_permission",
            {
                "sessionId": turn.session_id,
                "toolCall": tool_call,
                "options": [
                    {"optionId": allow, "name": "Allow", "kind": "allow_once"},
                    {"optionId": reject, "name": "Reject", "kind": "reject_once"},
                ],
            },
        )
        outcome = (reply.get("result") or {}).get("outcome") or {}
        return str(outcome.get("optionId") or outcome.get("outcome") or "error")

    def _unasked_tool(self, turn: _Turn, tool_call_id: str, name: str, *, ask: bool) -> str:
        """An edit of ``<cwd>/name`` the agent makes itself (optionally after asking)."""
        path = str(Path(self.cwd) / name)
        tool_call = {
            "toolCallId": tool_call_id,
            "title": f"Write {name}",
            "kind": "edit",
            "locations": [{"path": path}],
            "rawInput": {"file_path": path, "content": "written without asking\n"},
        }
        self.update({"sessionUpdate": "tool_call", "status": "pending", **tool_call})
        chosen = self._ask(turn, tool_call, "allow-once", "reject-once") if ask else "not asked"
        Path(path).write_text("written without asking\n")
        self.update(
            {
                "sessionUpdate": "tool_call_update",
                "toolCallId": tool_call_id,
                "status": "completed",
                "rawOutput": {"output": f"wrote {name} (answer: {chosen})"},
            }
        )
        return chosen

    def turn_agent_terminal(self, turn: _Turn, mid: str) -> Any:
        terminal = [{"type": "terminal", "terminalId": "agent-term-1"}]
        self.update(
            {
                "sessionUpdate": "tool_call",
                "toolCallId": "at-1",
                "title": "make build",
                "kind": "execute",
                "status": "in_progress",
                "content": terminal,
            }
        )
        self.update(
            {
                "sessionUpdate": "tool_call_update",
                "toolCallId": "at-1",
                "status": "completed",
                "content": terminal,
                "rawOutput": {"output": "built ok\n", "exit_code": 0},
            }
        )
        self.chunk("Built.", mid)
        return None

    def turn_client_terminal_tool(self, turn: _Turn, mid: str) -> Any:
        created = self.call(
            "terminal/create",
            {
                "sessionId": turn.session_id,
                "command": "printf",
                "args": ["from the client terminal\n"],
            },
        )
        terminal_id = (created.get("result") or {}).get("terminalId")
        content = [{"type": "terminal", "terminalId": terminal_id}]
        self.update(
            {
                "sessionUpdate": "tool_call",
                "toolCallId": "ct-1",
                "title": "printf",
                "kind": "execute",
                "status": "in_progress",
                "content": content,
            }
        )
        ids = {"sessionId": turn.session_id, "terminalId": terminal_id}
        self.call("terminal/wait_for_exit", ids)
        self.call("terminal/release", ids)
        self.update(
            {
                "sessionUpdate": "tool_call_update",
                "toolCallId": "ct-1",
                "status": "completed",
                "content": content,
            }
        )
        self.chunk("Printed.", mid)
        return None

    def turn_usage_meta(self, turn: _Turn, mid: str) -> Any:
        usage = {
            "inputTokens": 10,
            "outputTokens": 5,
            "totalTokens": 15,
            "thoughtTokens": 1,
            "cachedReadTokens": 2,
        }
        for text in ("First call. ", "Second call."):
            self.update(
                {
                    "sessionUpdate": "agent_message_chunk",
                    "messageId": mid,
                    "content": {"type": "text", "text": text},
                    "_meta": {"usage": usage, "durationMs": 12},
                }
            )
        return None

    def turn_usage_context(self, turn: _Turn, mid: str) -> Any:
        self.chunk("Working.", mid)
        self.update({"sessionUpdate": "usage_update", "used": 500, "size": 258400})
        return None

    def turn_usage_result_meta(self, turn: _Turn, mid: str) -> Any:
        self.chunk("Done.", mid)
        usage = {"inputTokens": 7, "outputTokens": 3, "totalTokens": 10}
        return {"stopReason": "end_turn", "_meta": {"usage": usage}}

    def turn_permission_unannounced(self, turn: _Turn, mid: str) -> Any:
        tool_call = {
            "toolCallId": "u-1",
            "title": "rm -rf build",
            "kind": "execute",
            "status": "pending",
            "rawInput": {"command": ["rm", "-rf", "build"]},
        }
        if self._ask(turn, tool_call, "approved", "abort") == "approved":
            for status in ("in_progress", "completed"):
                self.update(
                    {"sessionUpdate": "tool_call_update", "toolCallId": "u-1", "status": status}
                )
        self.chunk("Done.", mid)
        return None

    def turn_skip_permission(self, turn: _Turn, mid: str) -> Any:
        self._unasked_tool(turn, "skip-1", "skipped.txt", ask=False)
        self.chunk("Wrote skipped.txt without asking.", mid)
        if self.args.linger:
            turn.cancelled.wait(self.args.linger)
        return None

    def turn_ignore_denial(self, turn: _Turn, mid: str) -> Any:
        chosen = self._unasked_tool(turn, "deny-1", "denied.txt", ask=True)
        self.chunk(f"Wrote denied.txt although the answer was {chosen}.", mid)
        return None

    def turn_write_unasked(self, turn: _Turn, mid: str) -> Any:
        path = str(Path(self.cwd) / "unasked.txt")
        reply = self.call(
            "fs/write_text_file",
            {"sessionId": turn.session_id, "path": path, "content": "written unasked\n"},
        )
        self.chunk(json.dumps({"method": "fs/write_text_file", "reply": reply}), mid)
        return None

    def turn_terminal_unasked(self, turn: _Turn, mid: str) -> Any:
        created = self.call(
            "terminal/create",
            {"sessionId": turn.session_id, "command": "echo", "args": ["unasked"]},
        )
        terminal_id = (created.get("result") or {}).get("terminalId")
        if terminal_id is not None:
            ids = {"sessionId": turn.session_id, "terminalId": terminal_id}
            self.call("terminal/wait_for_exit", ids)
            self.call("terminal/release", ids)
        self.chunk(json.dumps({"method": "terminal/create", "reply": created}), mid)
        return None

    def turn_switch_mode(self, turn: _Turn, mid: str) -> Any:
        self.mode = str(self.args.switch_to)
        self.update({"sessionUpdate": "current_mode_update", "currentModeId": self.mode})
        self.chunk(f"Switched myself to {self.mode}.", mid)
        turn.cancelled.wait(2.0)
        return None

    # -- side effects --------------------------------------------------------------------------

    def _stderr(self, data: bytes) -> None:
        with contextlib.suppress(BrokenPipeError, ValueError, OSError):
            sys.stderr.buffer.write(data)
            sys.stderr.buffer.flush()

    def _flood_stderr(self) -> None:
        total: int = self.args.bytes if self.args.bytes is not None else DEFAULT_STDERR_BYTES
        line = b"stderr-flood: the quick brown fox jumps over the lazy dog 0123456789\n"
        block = line * max(1, (1 << 20) // len(line))
        fd = sys.stderr.fileno()
        written = 0
        try:
            while written < total:
                piece = block[: total - written]
                written += os.write(fd, piece)
        except OSError:
            pass

    def _spawn_grandchild(self) -> None:
        import subprocess  # only this scenario pays for the import

        keep = bool(self.args.grandchild_keeps_stdio)
        proc = subprocess.Popen(
            ["sleep", "300"],
            stdin=None if keep else subprocess.DEVNULL,
            stdout=None if keep else subprocess.DEVNULL,
            stderr=None if keep else subprocess.DEVNULL,
        )
        self._stderr(f"grandchild-pid={proc.pid}\n".encode())


class _NoAnswer:
    """Marker: the turn body answered (or will never answer) the prompt itself."""


_NO_ANSWER = _NoAnswer()


class _Replay:
    """Replays a recorded trace against the live client (scenario ``replay``)."""

    def __init__(self, agent: FakeAgent, path: str | None) -> None:
        if not path:
            raise SystemExit("fake_agent: --scenario replay needs --trace FILE")
        self.agent = agent
        self.records: list[Message] = []
        with open(path, encoding="utf-8") as fh:
            for raw in fh:
                if raw.strip():
                    rec = json.loads(raw)
                    if rec.get("dir") not in ("client", "agent") or not isinstance(
                        rec.get("msg"), dict
                    ):
                        raise SystemExit(f"fake_agent: bad trace record {raw[:200]!r}")
                    self.records.append(rec)
        self.pos = 0  # the next record not yet sent (agent) or matched (client)
        self.consumed: set[int] = set()  # client records matched ahead of ``pos``
        self.id_map: dict[str, Any] = {}  # json of trace request id -> live id
        self.replacements: list[tuple[str, str]] = []
        self.lock = threading.Lock()

    def start(self) -> None:
        with self.lock:
            self._advance()

    def _advance(self) -> None:
        """Send agent records up to the next client record that has not arrived yet."""
        while self.pos < len(self.records):
            rec = self.records[self.pos]
            if rec["dir"] == "client":
                if self.pos not in self.consumed:
                    return
                self.pos += 1
                continue
            self.pos += 1
            msg = rec["msg"]
            if "method" not in msg and "id" in msg:
                key = json.dumps(msg["id"])
                if key in self.id_map:
                    msg = {**msg, "id": self.id_map[key]}
            data = _dumps(msg)
            if self.replacements:
                text = data.decode()
                for old, new in self.replacements:
                    text = text.replace(old, new)
                data = text.encode()
            self.agent.write(data)

    def _find(self, live: Message) -> int | None:
        """The trace record the live client message stands for, if any.

        Requests are causal steps: a live request matches only the first pending client
        request of the trace. Replies and notifications may come earlier than recorded (say a
        permission reply before a cancel), so they match the first pending record like them.
        """
        is_request = "method" in live and "id" in live
        for i in range(self.pos, len(self.records)):
            rec = self.records[i]
            if rec["dir"] != "client" or i in self.consumed:
                continue
            expected = rec["msg"]
            if is_request:
                if "method" in expected and "id" in expected:
                    return i if expected["method"] == live["method"] else None
            elif "method" in live:
                if "id" not in expected and expected.get("method") == live["method"]:
                    return i
            elif "method" not in expected and expected.get("id") == live.get("id"):
                return i
        return None

    def incoming(self, live: Message) -> None:
        with self.lock:
            index = self._find(live)
            if index is None:
                if "method" in live and "id" in live:
                    self.agent.respond_error(
                        live["id"],
                        -32601,
                        f"replay: unexpected {live['method']} at record {self.pos}",
                    )
                return
            self.consumed.add(index)
            expected = self.records[index]["msg"]
            if "method" in expected and "id" in expected:
                self.id_map[json.dumps(expected["id"])] = live["id"]
            self._learn_cwd(expected, live)
            self._advance()

    def _learn_cwd(self, expected: Message, live: Message) -> None:
        old = (expected.get("params") or {}).get("cwd")
        live_params = live.get("params")
        new = live_params.get("cwd") if isinstance(live_params, dict) else None
        if isinstance(old, str) and isinstance(new, str) and old and old != new:
            pair = (json.dumps(old)[1:-1], json.dumps(new)[1:-1])
            if pair not in self.replacements:
                self.replacements.append(pair)
                self.replacements.sort(key=lambda p: len(p[0]), reverse=True)


def _login_file() -> Path:
    return Path(os.environ.get("HOME", "/nonexistent")) / ".fake-login"


def _terminal_login() -> int:
    """``--login-terminal``: the agent's own login program (scenario ``terminal-login``)."""
    _login_file().write_text(f"logged in via {os.environ.get('FAKE_LOGIN_MODE', '?')}\n")
    sys.stdout.write("fake agent: logged in\n")
    sys.stdout.flush()
    return 0


def _parse_args(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        prog="python -m baton.testing.fake_agent",
        description="A scriptable fault-injection ACP agent for tests.",
    )
    parser.add_argument("--scenario", default="ok", choices=SCENARIOS)
    parser.add_argument("--count", type=int, default=None, help="flood: notifications to send")
    parser.add_argument(
        "--bytes", type=int, default=None, help="huge-line / stderr-flood: size in bytes"
    )
    parser.add_argument("--trace", default=None, help="replay: the NDJSON trace to replay")
    parser.add_argument("--texts", default=None, help="secrets: a JSON list of texts to send")
    parser.add_argument("--session-id", default="fake-1")
    parser.add_argument("--max-lifetime", type=float, default=600.0)
    parser.add_argument("--grandchild-keeps-stdio", action="store_true")
    parser.add_argument("--mode", default=None, help="advertise modes, currently this one")
    parser.add_argument("--mode-values", default="default,acceptEdits,plan,auto")
    parser.add_argument("--stuck-mode", action="store_true", help="never really change mode")
    parser.add_argument("--switch-to", default="acceptEdits", help="switch-mode: the new mode")
    parser.add_argument("--linger", type=float, default=0.0, help="skip-permission: then wait")
    parser.add_argument("--login-terminal", action="store_true", help="run the terminal login")
    return parser.parse_args(argv)


def main(argv: list[str] | None = None) -> int:
    args = _parse_args(argv)
    if args.login_terminal:
        os._exit(_terminal_login())
    if args.max_lifetime > 0:
        timer = threading.Timer(args.max_lifetime, os._exit, args=(124,))
        timer.daemon = True
        timer.start()
    agent = FakeAgent(args, sys.stdin.buffer, sys.stdout.buffer)
    code = agent.run()
    with contextlib.suppress(BrokenPipeError, ValueError, OSError):
        sys.stdout.flush()
    # Skip interpreter teardown: turn threads may still be blocked waiting for replies.
    os._exit(code)


if __name__ == "__main__":
    main()
