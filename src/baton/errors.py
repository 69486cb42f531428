"""baton's error tree, translated once at each boundary.

    BatonError
    ├── ConfigError                  bad baton.toml, unknown profile, bad flag values
    ├── AgentError                   the agent process or its session misbehaved
    │   ├── AgentNotInstalled        the profile's command cannot be found
    │   ├── AgentStartError          spawn failed
    │   ├── AgentExited              the process died (exit code, stderr preview attached)
    │   ├── AgentTimeout             initialize / session/new / a turn took too long
    │   ├── AuthRequired             -32000 from the agent; names the advertised auth methods
    │   ├── SessionRejected          session/new, load or resume answered with a JSON-RPC error
    │   └── ProtocolError
    │       ├── LocalProtocolError   we misused the protocol (a bug in baton)
    │       └── RemoteProtocolError  the agent sent something invalid
    ├── RemoteCallError              the agent answered a request with a JSON-RPC error
    ├── StoreError                   the embedded store failed or is closed
    ├── RequestError                 a human request/answer was invalid, stale or forged
    │                                (subtree in baton.requests.errors)
    ├── SecurityError                a security control refused (admission, pin, containment)
    └── CoordinationError            FCoP coordination; FCoP's codes mapped once at the port
                                     (subtree in baton.coordination.errors)

Errors that carry agent-controlled text keep it bounded and redacted by the raiser.
"""

from __future__ import annotations

from collections.abc import Sequence


class BatonError(Exception):
    """Base of every error baton raises on purpose."""


class ConfigError(BatonError):
    """The configuration (baton.toml, flags, profiles) is invalid."""


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


class SessionRejected(AgentError):
    """The agent answered ``session/new`` (or ``load``/``resume``) with a JSON-RPC error."""

    def __init__(self, message: str, *, code: int, method: str) -> None:
        super().__init__(message)
        self.code = code
        self.method = method


class ProtocolError(AgentError):
    """The JSON-RPC/ACP exchange broke its contract."""


class LocalProtocolError(ProtocolError):
    """baton misused the protocol: a bug on our side."""


class RemoteProtocolError(ProtocolError):
    """The agent sent bytes or messages that violate JSON-RPC or ACP."""


class RemoteCallError(BatonError):
    """The agent answered one of our requests with a JSON-RPC error object."""

    def __init__(self, method: str, code: int, message: str, data: object = None) -> None:
        super().__init__(f"{method} failed: {message} (code {code})")
        self.method = method
        self.code = code
        self.remote_message = message
        self.data = data


class StoreError(BatonError):
    """The embedded store failed, or was used after close."""


class RequestError(BatonError):
    """A human request or its answer is invalid, stale, forged or not pending."""


class SecurityError(BatonError):
    """A security control refused an action; the refusal is also an event."""
