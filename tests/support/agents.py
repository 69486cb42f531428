"""The real npm agents of the test tier: where they are, when to skip, how to point them offline.

``scripts/install-agents`` (run by ``scripts/test``) installs the built-in ``claude``,
``codex``, ``gemini`` and ``qwen`` profiles' pinned packages, and the tier's own ``codex-ts``
(the TypeScript Codex adapter, :data:`TIER_PROFILES`), with ``baton agents install`` into
``<repo>/.cache/agents``.
When npm could not reach its registry it leaves ``.cache/agents/UNREACHABLE`` with the reason:
then, and only then, the real-agent tests skip (saying why). A missing install otherwise fails
the test, naming the script.

The profiles here are the built-in ones with three test changes: the command is the installed
entry point (so no pin is re-hashed at every launch), the model endpoint is a scripted server
on loopback with a dummy key (accepted because the endpoint is loopback), and, for Codex, its
``config.toml`` is a seeded file naming that endpoint. Everything else (mode selection, seeded
settings, private roots) is the built-in profile's, so the tests check what users get.
"""

from __future__ import annotations

import dataclasses
from pathlib import Path
from types import MappingProxyType
from typing import Any

import pytest

from baton.agent_profile import AgentProfile, CredentialBinding, SeedFile
from baton.config import load_config
from baton.providers.catalog import CLAUDE, CODEX, GEMINI, QWEN
from baton.security.agent_installs import InstalledAgent, installed_agent

__all__ = [
    "AGENTS_DIR",
    "DUMMY_KEY",
    "claude_profile",
    "codex_config",
    "codex_profile",
    "codex_ts_profile",
    "gemini_profile",
    "qwen_profile",
    "require_agent",
    "skip_reason",
]

REPO_ROOT = Path(__file__).resolve().parents[2]
AGENTS_DIR = REPO_ROOT / ".cache" / "agents"
TIER_PROFILES = Path(__file__).resolve().parent / "profiles"
"""The ``baton.toml`` of the tier's profiles that baton does not ship (``codex-ts``)."""
DUMMY_KEY = "x"
"""What a local model server needs as an API key: anything (too short to be a secret)."""


def skip_reason(root: Path = AGENTS_DIR) -> str | None:
    """Why the real-agent tier cannot run here (npm was unreachable), or ``None``."""
    marker = root / "UNREACHABLE"
    if marker.is_file():
        text = " ".join(marker.read_text(encoding="utf-8", errors="replace").split())
        return f"npm registry unreachable when scripts/install-agents ran: {text[:300]}"
    return None


def require_agent(profile: AgentProfile, root: Path = AGENTS_DIR) -> InstalledAgent:
    """The installed agent, a skip when npm was unreachable, a failure when it is missing."""
    install = installed_agent(profile, {"BATON_TOOLS_DIR": str(root)})
    if install is not None and install.version == profile.version:
        return install
    reason = skip_reason(root)
    if reason is not None:
        pytest.skip(reason)
    pytest.fail(f"{profile.package_spec} is not installed under {root}: run scripts/install-agents")


def _with_endpoint(
    profile: AgentProfile, install: InstalledAgent, endpoint: str, env: dict[str, str]
) -> AgentProfile:
    return dataclasses.replace(
        profile,
        command=(str(install.executable), *profile.command[1:]),
        env=MappingProxyType({**profile.env, **env}),
        endpoint=endpoint,
        initialize_timeout=120.0,
        session_timeout=120.0,
    )


def claude_profile(origin: str, **changes: Any) -> AgentProfile:
    """The built-in ``claude`` profile against an Anthropic Messages server at ``origin``.

    ``ANTHROPIC_API_KEY`` is bound from baton's environment (pass ``DUMMY_KEY`` there).
    """
    install = require_agent(CLAUDE)
    profile = _with_endpoint(CLAUDE, install, origin, {"ANTHROPIC_BASE_URL": origin})
    profile = dataclasses.replace(profile, credentials=(CredentialBinding("ANTHROPIC_API_KEY"),))
    return dataclasses.replace(profile, **changes)


def codex_config(base_url: str, *, model: str = "scripted") -> str:
    """A ``config.toml`` naming the scripted Responses server as Codex's only provider."""
    return (
        f'model = "{model}"\n'
        'model_provider = "local"\n'
        "[model_providers.local]\n"
        'name = "local"\n'
        f'base_url = "{base_url}"\n'
        'wire_api = "responses"\n'
        'env_key = "OPENAI_API_KEY"\n'
    )


def codex_profile(base_url: str, *, config: str | None = None, **changes: Any) -> AgentProfile:
    """The built-in ``codex`` profile, its ``config.toml`` seeded to use ``base_url``.

    ``OPENAI_API_KEY`` is bound from baton's environment (pass ``DUMMY_KEY`` there).
    """
    install = require_agent(CODEX)
    profile = _with_endpoint(CODEX, install, base_url, {})
    seed = SeedFile("$CODEX_HOME/config.toml", content=config or codex_config(base_url))
    profile = dataclasses.replace(
        profile,
        files=(*profile.files, seed),
        credentials=(CredentialBinding("OPENAI_API_KEY"),),
    )
    return dataclasses.replace(profile, **changes)


def codex_ts_profile(base_url: str, **changes: Any) -> AgentProfile:
    """:func:`codex_profile`, run by the TypeScript adapter (``@agentclientprotocol/codex-acp``,
    which drives ``codex app-server``) from :data:`TIER_PROFILES`."""
    ts = load_config(TIER_PROFILES, environ={}).profile("codex-ts")
    install = require_agent(ts)
    profile = codex_profile(base_url, **changes)
    return dataclasses.replace(
        profile,
        name=ts.name,
        title=ts.title,
        package=ts.package,
        version=ts.version,
        command=(str(install.executable), *profile.command[1:]),
    )


def qwen_profile(base_url: str, **changes: Any) -> AgentProfile:
    """The built-in ``qwen`` profile against a chat-completions server at ``base_url``.

    ``OPENAI_API_KEY`` is bound from baton's environment (pass ``DUMMY_KEY`` there).
    """
    install = require_agent(QWEN)
    profile = _with_endpoint(
        QWEN, install, base_url, {"OPENAI_BASE_URL": base_url, "OPENAI_MODEL": "scripted"}
    )
    profile = dataclasses.replace(profile, credentials=(CredentialBinding("OPENAI_API_KEY"),))
    return dataclasses.replace(profile, **changes)


def gemini_profile(origin: str, **changes: Any) -> AgentProfile:
    """The built-in ``gemini`` profile against a Gemini API server at ``origin``.

    ``GEMINI_API_KEY`` is bound from baton's environment (pass ``DUMMY_KEY`` there).
    """
    install = require_agent(GEMINI)
    profile = _with_endpoint(GEMINI, install, origin, {"GOOGLE_GEMINI_BASE_URL": origin})
    profile = dataclasses.replace(profile, credentials=(CredentialBinding("GEMINI_API_KEY"),))
    return dataclasses.replace(profile, **changes)
