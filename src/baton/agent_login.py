"""Logins made with ``baton agents login``: where they live and who uses them.

An agent that logs in (Claude's ``/login``, Codex's ChatGPT login, Cursor's ``agent login``)
keeps its tokens under its own HOME/config dir. baton gives every launch a private root, so
a login made in the user's shell is invisible to it, and one made in an ephemeral root is
gone after the run. ``baton agents login NAME`` therefore logs in inside the profile's
*login root*, ``$XDG_STATE_HOME/baton/logins/<profile>`` (by default
``~/.local/state/baton/logins/<profile>``), a persistent private root with the same layout
as any launch root; afterwards every launch of that profile that asks for no persistent
root of its own uses the login root, so the agent finds (and refreshes) its own tokens.

The login itself is the agent's: ACP terminal authentication (``authMethods`` entries of
``type: "terminal"``: baton re-runs the agent's command with the method's ``args``/``env``
on the user's terminal, exit 0 meaning success), else an agent-driven ``authenticate``.
``login.json`` in the root records which method was used and when.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from pathlib import Path
from typing import Any, Final

from baton.providers.profile import AgentProfile
from baton.security.paths import sanitize_id

__all__ = ["LOGIN_RECORD", "login_record", "login_root", "logins_dir"]

LOGIN_RECORD: Final = "login.json"


def logins_dir(environ: Mapping[str, str]) -> Path:
    state = environ.get("XDG_STATE_HOME") or str(
        Path(environ.get("HOME") or Path.home()) / ".local" / "state"
    )
    return Path(state).expanduser() / "baton" / "logins"


def login_root(profile: AgentProfile, environ: Mapping[str, str]) -> Path:
    """The profile's login root (it may not exist yet)."""
    return logins_dir(environ) / sanitize_id(profile.name)


def login_record(profile: AgentProfile, environ: Mapping[str, str]) -> dict[str, Any] | None:
    """What ``baton agents login`` recorded for the profile, or ``None`` (never logged in)."""
    try:
        data = json.loads((login_root(profile, environ) / LOGIN_RECORD).read_text("utf-8"))
    except (OSError, UnicodeDecodeError, ValueError):
        return None
    return data if isinstance(data, dict) else None
