"""A scriptable fault-injection ACP v1 agent (standard library only, starts in well under 100 ms).

The scenarios are scripts in :mod:`baton.testing.scenarios`; this module runs them as a real
process (threads, blocking pipes), :mod:`baton.testing.memory` runs the same scripts in memory.
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
``silent``
    Sends nothing at all during the prompt until ``session/cancel``; then one chunk and
    ``cancelled`` (a stalled turn that resumes).
``spawn-grandchild``
    At ``session/new`` starts ``sleep 300`` in the agent's process group (stdio on /dev/null,
    unless ``--grandchild-keeps-stdio``, which makes it hold the agent's pipes open) and writes
    ``grandchild-pid=<pid>`` to stderr (and the pid in the answer's
    ``_meta.grandchildPid``), then behaves normally.
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
``usage-growing``
    ``--count`` model calls (default 8): a chunk and a ``usage_update`` whose ``cost`` is the
    session's running total ($0.25 more each call), then a 50 ms wait for a cancel; the
    prompt result has ``usage`` ``{inputTokens: 100×N, outputTokens: 10×N, totalTokens:
    110×N}`` (a budget's meter cancels it between calls).
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

Hostile scenarios (:data:`baton.testing.HOSTILE_SCENARIOS`; scripts in :mod:`baton.testing.hostile`):

``cross-turn`` (two prompts)
    Turn 1 starts tool call ``xt-1`` (in progress), says a chunk of message ``fake-msg-1``
    and answers; turn 2 completes ``xt-1``, says a chunk of its own message ``fake-msg-2``,
    one of ``fake-msg-1``, a plan and a chunk without ids, then another of ``fake-msg-2``.
``lone-surrogate``
    A chunk and a tool call title holding ``"\\ud800"``/``"\\udfff"`` (valid JSON, not encodable
    as UTF-8), between two normal chunks; then ``end_turn``.
``request-order``
    Requests, each followed by notifications in the same write (one read for the client),
    replies not awaited: ``cursor/update_todos`` (todo ``a`` in progress) then the same as
    a notification (``a`` completed); ``session/request_permission`` for tool call
    ``order-1`` then its ``in_progress`` update and a chunk; ``fs/write_text_file``
    (``order.txt``) then a chunk; ``terminal/create`` (``true``) then a thought chunk.
``secrets`` (with ``--texts FILE``, a JSON list of strings)
    Each text as a transcript split across two writes, a stderr line and a tool call (title,
    ``rawInput``, ``rawOutput``, content text, a diff); then all of them in one
    ``session/request_permission``; then ``end_turn``. With ``{"texts": [...], "die": true}``
    in the file, it writes them all to stderr again and exits 3 instead of answering.

Other options: ``--session-id``, ``--max-lifetime SECONDS`` (default 600: the agent exits 124
after that, so a leaked fake agent never outlives a test run by long).

Length: half of it is the documentation of every scenario, which tests read as the contract.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import signal
import sys
import threading
import time
from dataclasses import dataclass, field
from typing import Any, BinaryIO

from baton.jsontypes import JsonObject
from baton.testing import SCENARIOS
from baton.testing.scenarios import (
    Call,
    Cancel,
    Deliver,
    Exit,
    Hang,
    JoinStderrFlood,
    Options,
    Pause,
    Raw,
    ReplayIn,
    ScenarioCore,
    Send,
    SpawnGrandchild,
    StartTurn,
    Stderr,
    TurnScript,
    WaitCancel,
    dumps,
    flood_block,
    login_file,
)
from baton.testing.scripts import run_turn
from baton.testing.trace import TraceReplay

__all__ = ["FakeAgent", "main"]


@dataclass(eq=False)
class _Pending:
    done: threading.Event = field(default_factory=threading.Event)
    reply: dict[str, Any] = field(default_factory=dict)


class FakeAgent:
    """The process driver of :class:`ScenarioCore`; one per process, turns in threads."""

    def __init__(self, args: argparse.Namespace, stdin: BinaryIO, stdout: BinaryIO) -> None:
        self.core = ScenarioCore(
            Options(
                scenario=args.scenario,
                count=args.count,
                nbytes=args.bytes,
                session_id=args.session_id,
                grandchild_keeps_stdio=args.grandchild_keeps_stdio,
                texts=args.texts,
                mode=args.mode,
                mode_values=tuple(v for v in args.mode_values.split(",") if v),
                stuck_mode=args.stuck_mode,
                switch_to=args.switch_to,
                linger=args.linger,
            )
        )
        self.trace: str | None = args.trace
        self.stdin = stdin
        self.stdout = stdout
        self._write_lock = threading.Lock()
        self._state_lock = threading.Lock()
        self._next_id = 0
        self._pending: dict[Any, _Pending] = {}
        self._flood_thread: threading.Thread | None = None
        self._replay: TraceReplay | None = None

    # -- output --------------------------------------------------------------------------------

    def write(self, data: bytes) -> None:
        """Write raw bytes and flush; a vanished client ends the process quietly."""
        with self._write_lock:
            try:
                self.stdout.write(data)
                self.stdout.flush()
            except (BrokenPipeError, ValueError, OSError):
                os._exit(0)

    def call(self, action: Call) -> JsonObject:
        """Send an agent -> client request and block until its response arrives."""
        with self._state_lock:
            rid = self._next_id
            self._next_id += 1
            pending = _Pending()
            self._pending[rid] = pending
        self.write(dumps(action.message(rid)))
        pending.done.wait()
        return pending.reply

    # -- input ---------------------------------------------------------------------------------

    def run(self) -> int:
        core = self.core
        if core.scenario == "ignore-cancel":
            for sig in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP):
                signal.signal(sig, signal.SIG_IGN)
        if core.stderr_flood is not None:
            self._flood_thread = threading.Thread(
                target=_flood_stderr, args=(core.stderr_flood,), daemon=True
            )
            self._flood_thread.start()
        if core.scenario == "replay":
            if not self.trace:
                raise SystemExit("fake_agent: --scenario replay needs --trace FILE")
            try:
                with open(self.trace, encoding="utf-8") as fh:
                    self._replay = TraceReplay.from_ndjson(fh.read())
            except ValueError as exc:
                raise SystemExit(f"fake_agent: {exc}") from exc
            with self._state_lock:
                for data in self._replay.start():
                    self.write(data)
        for line in self.stdin:
            self.receive(line)
        # The client closed stdin.
        if core.survives_eof:
            threading.Event().wait()  # only SIGKILL (or the lifetime cap) ends us
        return 0

    def receive(self, line: bytes) -> None:
        for action in self.core.on_line(line):
            if isinstance(action, Send):
                self.write(dumps(action.message))
            elif isinstance(action, StartTurn):
                action.turn.waker = threading.Event()
                threading.Thread(target=self._run_turn, args=(action.turn,), daemon=True).start()
            elif isinstance(action, Cancel):
                action.turn.waker.set()
            elif isinstance(action, Deliver):
                self._deliver(action)
            elif isinstance(action, ReplayIn) and self._replay is not None:
                with self._state_lock:
                    for data in self._replay.incoming(action.message):
                        self.write(data)
            elif isinstance(action, SpawnGrandchild):
                pid = _spawn_grandchild(action.keep_stdio)
                self.write(dumps(self.core.session_created(action.request_id, pid).message))

    def _deliver(self, action: Deliver) -> None:
        with self._state_lock:
            pending = self._pending.pop(action.request_id, None)
        if pending is not None:
            pending.reply = action.message
            pending.done.set()

    # -- turns ---------------------------------------------------------------------------------

    def _run_turn(self, turn: TurnScript) -> None:
        script = run_turn(self.core, turn)
        reply: Any = None
        while True:
            try:
                action = script.send(reply)
            except StopIteration:
                return
            reply = self._perform(turn, action)

    def _perform(self, turn: TurnScript, action: Any) -> Any:
        if isinstance(action, Send):
            self.write(dumps(action.message))
        elif isinstance(action, Raw):
            self.write(action.data)
        elif isinstance(action, Call):
            return self.call(action)
        elif isinstance(action, Stderr):
            _stderr(action.data)
        elif isinstance(action, WaitCancel):
            turn.waker.wait(action.timeout)
        elif isinstance(action, Hang):
            threading.Event().wait()
        elif isinstance(action, Exit):
            with self._write_lock:
                os._exit(action.code)
        elif isinstance(action, JoinStderrFlood) and self._flood_thread is not None:
            self._flood_thread.join()
        elif isinstance(action, Pause):
            time.sleep(action.seconds)
        return None


# -- side effects ------------------------------------------------------------------------------


def _stderr(data: bytes) -> None:
    with contextlib.suppress(BrokenPipeError, ValueError, OSError):
        sys.stderr.buffer.write(data)
        sys.stderr.buffer.flush()


def _flood_stderr(total: int) -> None:
    block = flood_block()
    fd = sys.stderr.fileno()
    written = 0
    try:
        while written < total:
            piece = block[: total - written]
            written += os.write(fd, piece)
    except OSError:
        pass


def _spawn_grandchild(keep: bool) -> int:
    import subprocess  # only this scenario pays for the import

    proc = subprocess.Popen(
        ["sleep", "300"],
        stdin=None if keep else subprocess.DEVNULL,
        stdout=None if keep else subprocess.DEVNULL,
        stderr=None if keep else subprocess.DEVNULL,
    )
    _stderr(f"grandchild-pid={proc.pid}\n".encode())
    return proc.pid


def _terminal_login() -> int:
    """``--login-terminal``: the agent's own login program (scenario ``terminal-login``)."""
    login_file().write_text(f"logged in via {os.environ.get('FAKE_LOGIN_MODE', '?')}\n")
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
