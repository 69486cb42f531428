"""The agent's settings, read once from its environment (the only configuration channel)."""

import logging
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

__all__ = ["DEFAULT_STEP_TIMEOUT", "MCP_HTTP_ENV", "AgentConfig"]

log = logging.getLogger(__name__)

DEFAULT_STEP_TIMEOUT = 600.0
MCP_HTTP_ENV = "BATON_BUILTIN_MCP_HTTP"


@dataclass(frozen=True, slots=True)
class AgentConfig:
    """Where sessions persist, how long a step may run, whether it speaks HTTP MCP."""

    state_dir: Path
    step_timeout: float = DEFAULT_STEP_TIMEOUT
    kill_grace: float = 2.0
    mcp_http: bool = False
    """Advertise ``mcpCapabilities.http`` and connect to ``http`` MCP entries. Off by default,
    so one machine keeps the stdio shim; a cluster worker turns it on
    (``BATON_BUILTIN_MCP_HTTP=1``) to reach the coordinator's hub across hosts."""

    @classmethod
    def from_env(cls, env: Mapping[str, str]) -> "AgentConfig":
        """Read ``BATON_AGENT_STATE_DIR`` (else XDG data dir), ``BATON_BUILTIN_STEP_TIMEOUT``
        and ``BATON_BUILTIN_MCP_HTTP`` (``1``: HTTP MCP on)."""
        return cls(
            state_dir=_state_dir(env),
            step_timeout=_step_timeout(env),
            mcp_http=env.get(MCP_HTTP_ENV) == "1",
        )


def _state_dir(env: Mapping[str, str]) -> Path:
    if explicit := env.get("BATON_AGENT_STATE_DIR"):
        return Path(explicit)
    if data_home := env.get("XDG_DATA_HOME"):
        return Path(data_home) / "baton-builtin"
    home = Path(env["HOME"]) if env.get("HOME") else Path.home()
    return home / ".local" / "share" / "baton-builtin"


def _step_timeout(env: Mapping[str, str]) -> float:
    raw = env.get("BATON_BUILTIN_STEP_TIMEOUT")
    if not raw:
        return DEFAULT_STEP_TIMEOUT
    try:
        value = float(raw)
    except ValueError:
        value = 0.0
    if not 0 < value < float("inf"):
        log.warning("ignoring BATON_BUILTIN_STEP_TIMEOUT=%r (want seconds > 0)", raw)
        return DEFAULT_STEP_TIMEOUT
    return value
