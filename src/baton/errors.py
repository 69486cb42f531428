"""baton's error tree, translated once at each boundary.

Every exception baton raises on purpose is a :class:`BatonError`. Who is at fault is
part of the type: ``[local]`` errors (:class:`LocalFault`) are bugs in baton or in the
code calling it, ``[remote]`` errors (:class:`RemoteFault`) mean the peer (an agent, a
client of the API) sent something wrong; the rest come from the environment or the
user's input (configuration, a missing binary, a refusal, a dead process).

    BatonError
    ├── ConfigError                  bad baton.toml, unknown profile, bad flag values
    ├── UsageError          [local]  the calling code misused baton's API (also a RuntimeError):
    │                                a call in the wrong state, on a closed object; a bug, not input
    ├── ControlFlow         [local]  raised and caught inside one component to unwind (a record
    │                                moved under a commit, a breaker tripped, a file vanished
    │                                mid-read); one that escapes its component is a bug
    ├── RpcError                     answer this JSON-RPC request with an error (raised by
    │                                request handlers; baton.acp.jsonrpc)
    ├── AgentError                   the agent process or its session misbehaved
    │   ├── AgentNotInstalled        the profile's command cannot be found
    │   ├── AgentStartError          spawn failed
    │   ├── AgentExited              the process died (exit code, stderr preview attached)
    │   ├── AgentTimeout             initialize / session/new / a turn took too long
    │   ├── AuthRequired             -32000 from the agent; names the advertised auth methods
    │   ├── RemoteCallError [remote] the agent answered a request with a JSON-RPC error
    │   ├── SessionRejected [remote] session/new, load or resume answered with a JSON-RPC error
    │   └── ProtocolError
    │       ├── LocalProtocolError [local]   we misused the protocol (a bug in baton)
    │       │   └── FrameHandlingError           handling one inbound frame raised (a bug
    │       │                                    in baton): that frame's error, the reader
    │       │                                    goes on (baton.acp.connection)
    │       └── RemoteProtocolError [remote] the agent sent something invalid
    │           └── MalformedPayload         a native payload failed an explicit check
    │                                        (baton.events.extension)
    ├── StoreError                   the embedded store failed or is closed
    ├── BudgetRefused                a budget's hard limit refused a turn (baton.budgets;
    │                                ``baton budget raise`` lifts it)
    ├── RequestError                 a human request/answer was invalid, stale or forged
    │                                (subtree in baton.request_model.errors)
    ├── SecurityError                a security control refused (admission, pin, containment)
    │                                (PathRefused in baton.security.paths)
    ├── CoordinationError            FCoP coordination; FCoP's codes mapped once at the port
    │                                (subtree in baton.fcop_errors)
    ├── ApiError            [remote] an HTTP client's request is wrong (baton.web.api)
    └── BuiltinAgentError            baton's own agent (baton.agents.builtin: its client went
                                     away, a turn was interrupted, an MCP server failed)

Errors that carry agent-controlled text keep it bounded and redacted by the raiser.
``tests/test_errors.py`` checks that every exception class in ``src/baton`` is in this tree.
"""

from __future__ import annotations

from collections.abc import Sequence

__all__ = [
    "AgentError",
    "AgentExited",
    "AgentNotInstalled",
    "AgentStartError",
    "AgentTimeout",
    "AuthRequired",
    "BatonError",
    "BudgetRefused",
    "BuiltinAgentError",
    "ConfigError",
    "ControlFlow",
    "FrameHandlingError",
    "LocalFault",
    "LocalProtocolError",
    "ProtocolError",
    "RemoteCallError",
    "RemoteFault",
    "RemoteProtocolError",
    "RequestError",
    "SecurityError",
    "StoreError",
    "UsageError",
]


class BatonError(Exception):
    """Base of every error baton raises on purpose."""


class LocalFault:
    """Marks an error as baton's own fault, or its caller's: a bug to fix, not input."""


class RemoteFault:
    """Marks an error as the peer's fault: an agent or an API client sent something wrong."""


class ConfigError(BatonError):
    """The configuration (baton.toml, flags, profiles) is invalid."""


class UsageError(BatonError, RuntimeError, LocalFault):
    """baton's API was called in a state that does not allow it (a bug in the caller).

    Like httpx's ``StreamConsumed``: never the agent's fault, never a user's input.
    """


class ControlFlow(BatonError, LocalFault):
    """Unwinding inside one component; never meant to reach a caller."""


class AgentError(BatonError):
    """The agent process or its ACP session failed."""


class AgentNotInstalled(AgentError):
    """The profile's command is not installed on this machine."""


class AgentStartError(AgentError):
    """The agent process could not be started."""


class AgentExited(AgentError):
    """The agent process exited while baton still needed it."""

    def __init__(self, message: str, *, returncode: int | None, stderr_preview: str = "") -> None:
        super().__init__(message)
        self.returncode = returncode
        self.stderr_preview = stderr_preview


class AgentTimeout(AgentError):
    """An ACP call or a whole turn exceeded its deadline."""

    def __init__(self, message: str, *, operation: str, seconds: float) -> None:
        super().__init__(message)
        self.operation = operation
        self.seconds = seconds


class AuthRequired(AgentError):
    """The agent needs authentication (-32000) before it can create sessions."""

    def __init__(self, message: str, *, auth_methods: Sequence[str] = ()) -> None:
        super().__init__(message)
        self.auth_methods = tuple(auth_methods)


class SessionRejected(AgentError, RemoteFault):
    """The agent answered ``session/new`` (or ``load``/``resume``) with a JSON-RPC error."""

    def __init__(self, message: str, *, code: int, method: str) -> None:
        super().__init__(message)
        self.code = code
        self.method = method


class ProtocolError(AgentError):
    """The JSON-RPC/ACP exchange broke its contract."""


class LocalProtocolError(ProtocolError, LocalFault):
    """baton misused the protocol: a bug on our side."""


class FrameHandlingError(LocalProtocolError):
    """Handling one inbound frame raised: a bug in baton, never the agent's doing.

    The connection reports it for that frame (its method and its position on the
    connection, never the frame's text) and reads on; the turn is not ended by it.
    """

    def __init__(self, method: str | None, frame: int, cause: BaseException) -> None:
        what = method or "a frame"
        super().__init__(f"internal error handling {what} (frame {frame}): {type(cause).__name__}")
        self.method = method
        self.frame = frame
        self.cause = cause


class RemoteProtocolError(ProtocolError, RemoteFault):
    """The agent sent bytes or messages that violate JSON-RPC or ACP."""


class RemoteCallError(AgentError, RemoteFault):
    """The agent answered one of our requests with a JSON-RPC error object."""

    def __init__(self, method: str, code: int, message: str, data: object = None) -> None:
        super().__init__(f"{method} failed: {message} (code {code})")
        self.method = method
        self.code = code
        self.remote_message = message
        self.data = data


class StoreError(BatonError):
    """The embedded store failed, or was used after close."""


class BudgetRefused(BatonError):
    """A budget's hard limit is reached: the turn was not started (or was cancelled)."""

    def __init__(self, message: str, *, breach: object = None, hint: str | None = None) -> None:
        super().__init__(message)
        self.breach = breach
        self.hint = hint
        """What lifts it (``baton budget raise …``)."""
        """The :class:`baton.budgets.rules.Breach` (typed loosely: errors sit below budgets)."""


class RequestError(BatonError):
    """A human request or its answer is invalid, stale, forged or not pending."""


class SecurityError(BatonError):
    """A security control refused an action; the refusal is also an event."""


class BuiltinAgentError(BatonError):
    """Raised inside baton's own ACP agent (a separate process); never crosses the wire."""
