"""Loading ``baton.toml``: user agent profiles, secrets file, where state lives.

baton looks for ``baton.toml`` from the working directory up to the filesystem
root. With one, state (the SQLite store, pins, private agent roots) lives in
``<project>/.baton/``; without, in ``$XDG_STATE_HOME/baton``. ``BATON_STATE_DIR``
overrides both. Other sections of the same file (the FCoP team) are read by their
own modules; this one only owns ``[profiles.*]`` and ``[secrets]``.

A profile section may ``extend`` a built-in one and override its fields::

    [profiles.local-coder]
    extends = "opencode"
    endpoint = "http://127.0.0.1:8080/v1"   # your own model server
    endpoint_model = "qwen2.5-coder"
    credentials = [{ name = "OPENAI_API_KEY", source = "file" }]

Credentials are bound by name only; their values come from baton's environment
(``source = "env"``) or the secrets file (``source = "file"``), never from the shell
by inheritance. A credential for a loopback ``endpoint`` may be a short dummy key.

``[profiles.NAME.files]`` seeds the agent's own config files into its private root
before launch, each path under a private variable or relative to the root, the value
inline or ``{ source = "FILE" }`` (relative to the project)::

    [profiles.claude.files]
    "$CLAUDE_CONFIG_DIR/settings.json" = '{"permissions": {"defaultMode": "default"}}'
    "$CODEX_HOME/config.toml" = { source = "agents/codex.toml" }

``endpoint`` points a profile at a model server in the agent's own terms: Claude gets
``ANTHROPIC_BASE_URL`` (and ``ANTHROPIC_MODEL``), Codex a seeded ``config.toml`` with a
``responses`` provider, OpenCode an inline provider config, Qwen ``OPENAI_BASE_URL``/
``OPENAI_MODEL`` (``openai_endpoint``/``openai_model`` are the older names).

A command is resolved at launch: a bare name on the agent's ``PATH`` (after baton's
tools dir), ``~`` expanded, and a relative path with a ``/`` against the project
directory. ``mode = ""`` selects no mode (the agent's own; still verified).
``agent_approves = true`` runs a mode in which the agent approves itself, flagged.
``worktree_edits = false`` keeps ``mode`` in a task tree's own worktree too (by default the
family's edit-without-asking mode runs there: :mod:`baton.providers.worktree_modes`).

Length: every ``[profiles.NAME]`` key is parsed and checked here, one rule each, so that
an unknown or malformed key fails with one message naming it.
"""

from __future__ import annotations

import dataclasses
import json
import os
import re
import tomllib
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from types import MappingProxyType
from typing import Any

from baton.agent_profile import TRANSPORTS, AgentProfile, CredentialBinding, SeedFile
from baton.budgets.limits import BudgetConfig
from baton.budgets.pricing import PricingConfig
from baton.errors import ConfigError
from baton.providers.catalog import BUILTIN_PROFILES

__all__ = [
    "CONFIG_NAME",
    "PROFILE_KEYS",
    "SECRETS_KEYS",
    "TOP_LEVEL_TABLES",
    "BatonConfig",
    "agent_roots_dir",
    "default_state_dir",
    "find_project_dir",
    "load_config",
    "parse_profile",
]

CONFIG_NAME = "baton.toml"

_STR_FIELDS = (
    "title",
    "family",
    "mode",
    "model",
    "install_hint",
    "pin",
    "package",
    "version",
    "transport",
)
_FLOAT_FIELDS = ("initialize_timeout", "session_timeout", "turn_timeout", "stall_timeout")
PROFILE_KEYS = frozenset(
    {
        *_STR_FIELDS,
        *_FLOAT_FIELDS,
        "extends",
        "command",
        "env",
        "pass_env",
        "credentials",
        "private_dirs",
        "admission",
        "allow_workspace_config",
        "config_options",
        "openai_endpoint",
        "openai_model",
        "endpoint",
        "endpoint_model",
        "files",
        "agent_approves",
        "worktree_edits",
    }
)
"""The keys of a ``[profiles.NAME]`` table."""

_ENDPOINT_ENV = ("ANTHROPIC_BASE_URL", "OPENAI_BASE_URL", "GOOGLE_GEMINI_BASE_URL")
"""Fixed variables that name the agent's model endpoint (for the loopback key rule)."""

SECRETS_KEYS = frozenset({"file"})
"""The keys of the ``[secrets]`` table."""

TOP_LEVEL_TABLES = frozenset(
    {"profiles", "secrets", "notify", "team", "cluster", "budget", "pricing"}
)
"""Every top-level table ``baton.toml`` may have (each part checks its own keys:
:func:`baton.app.configuration.check_config`); anything else is a mistake, refused."""


@dataclass(frozen=True, slots=True)
class BatonConfig:
    """Everything baton needs to know before launching an agent."""

    project_dir: Path | None
    state_dir: Path
    profiles: Mapping[str, AgentProfile]
    secrets_file: Path | None = None
    raw: Mapping[str, Any] = field(default_factory=lambda: MappingProxyType({}))
    """The whole parsed TOML document, for other sections (team, policy)."""
    budget: BudgetConfig = field(default_factory=BudgetConfig)
    """``[budget]``: limits per run, task tree, role and window (``baton.budgets``)."""
    pricing: PricingConfig = field(default_factory=PricingConfig)
    """``[pricing]``: per-model prices over the price table, or no estimates."""

    @property
    def config_path(self) -> Path | None:
        return self.project_dir / CONFIG_NAME if self.project_dir else None

    @property
    def db_path(self) -> Path:
        return self.state_dir / "baton.db"

    def profile(self, name: str) -> AgentProfile:
        try:
            return self.profiles[name]
        except KeyError:
            known = ", ".join(sorted(self.profiles))
            raise ConfigError(f"unknown agent profile {name!r} (known: {known})") from None


def find_project_dir(start: Path) -> Path | None:
    """The nearest directory at or above ``start`` that holds a ``baton.toml``."""
    here = start.resolve()
    for candidate in (here, *here.parents):
        if (candidate / CONFIG_NAME).is_file():
            return candidate
    return None


def default_state_dir(project_dir: Path | None, environ: Mapping[str, str]) -> Path:
    override = environ.get("BATON_STATE_DIR")
    if override:
        return Path(override).expanduser()
    if project_dir is not None:
        return project_dir / ".baton"
    xdg = environ.get("XDG_STATE_HOME") or str(Path.home() / ".local" / "state")
    return Path(xdg).expanduser() / "baton"


def agent_roots_dir(
    state_dir: Path, workspace: Path, environ: Mapping[str, str] | None = None
) -> Path:
    """Where agents' private roots (HOME, XDG, TMPDIR) live: never inside the workspace.

    A project keeps its store in ``<project>/.baton``, which the agent working on the
    project could read; private roots (which may hold an agent's credentials and
    sessions) go under the user's state directory instead, keyed by project path.
    """
    env = os.environ if environ is None else environ
    ws = workspace.resolve()
    state = state_dir.resolve()
    if state != ws and ws not in state.parents:
        return state_dir / "agents"
    import hashlib

    xdg = env.get("XDG_STATE_HOME") or str(Path.home() / ".local" / "state")
    key = hashlib.sha256(str(ws).encode()).hexdigest()[:16]
    return Path(xdg).expanduser() / "baton" / "projects" / key / "agents"


def load_config(cwd: Path, *, environ: Mapping[str, str] | None = None) -> BatonConfig:
    """Read ``baton.toml`` (if any) above ``cwd`` and merge it over the built-ins."""
    env = os.environ if environ is None else environ
    project_dir = find_project_dir(cwd)
    raw: dict[str, Any] = {}
    if project_dir is not None:
        path = project_dir / CONFIG_NAME
        try:
            raw = tomllib.loads(path.read_text(encoding="utf-8"))
        except (OSError, UnicodeDecodeError, tomllib.TOMLDecodeError) as exc:
            raise ConfigError(f"{path}: {exc}") from exc
        _known_tables(raw, path)
    profiles = dict(BUILTIN_PROFILES)
    for name, section in _table(raw, "profiles").items():
        if not isinstance(section, dict):
            raise ConfigError(f"[profiles.{name}] must be a table")
        profiles[name] = parse_profile(name, section, profiles, project_dir=project_dir)
    secrets_file = None
    secrets = _table(raw, "secrets")
    unknown = sorted(set(secrets) - SECRETS_KEYS)
    if unknown:
        raise ConfigError(f"[secrets]: unknown keys {', '.join(unknown)}")
    if "file" in secrets:
        if not isinstance(secrets["file"], str):
            raise ConfigError("[secrets] file must be a string path")
        secrets_file = _resolve(project_dir, secrets["file"])
    return BatonConfig(
        project_dir=project_dir,
        state_dir=default_state_dir(project_dir, env),
        profiles=MappingProxyType(profiles),
        secrets_file=secrets_file,
        raw=MappingProxyType(raw),
        budget=BudgetConfig.from_table(raw["budget"]) if "budget" in raw else BudgetConfig(),
        pricing=PricingConfig.from_table(raw["pricing"]) if "pricing" in raw else PricingConfig(),
    )


def _known_tables(raw: Mapping[str, Any], path: Path) -> None:
    """Refuse a top-level key or table baton does not know (a typo like ``[teem]``)."""
    unknown = sorted(set(raw) - TOP_LEVEL_TABLES)
    if unknown:
        shown = ", ".join(f"[{name}]" for name in unknown)
        known = ", ".join(f"[{name}]" for name in sorted(TOP_LEVEL_TABLES))
        raise ConfigError(f"{path}: unknown table {shown}; baton.toml knows {known}")
    for name, value in raw.items():
        if not isinstance(value, dict):
            raise ConfigError(f"{path}: {name} must be a table ([{name}])")


def parse_profile(  # Any: ``section`` is a parsed TOML table, checked key by key here
    name: str,
    section: Mapping[str, Any],
    known: Mapping[str, AgentProfile],
    *,
    project_dir: Path | None = None,
) -> AgentProfile:
    """One ``[profiles.NAME]`` table, validated, optionally extending another profile."""
    where = f"[profiles.{name}]"
    unknown = sorted(set(section) - PROFILE_KEYS)
    if unknown:
        raise ConfigError(f"{where}: unknown keys {', '.join(unknown)}")
    base_name = section.get("extends")
    if base_name is not None:
        if not isinstance(base_name, str) or base_name not in known:
            raise ConfigError(f"{where}: extends unknown profile {base_name!r}")
        base = known[base_name]
    elif "command" in section:
        base = AgentProfile(name=name, title=name, command=("true",), family="generic")
    else:
        raise ConfigError(f"{where}: needs `command` or `extends`")
    changes: dict[str, Any] = {"name": name, "source": "baton.toml"}
    if "command" in section:
        command = _str_list(section["command"], f"{where} command")
        if not command:
            raise ConfigError(f"{where}: command must not be empty")
        changes["command"] = (_command_path(command[0], project_dir), *command[1:])
    for key in _STR_FIELDS:
        if key in section:
            changes[key] = _str(section[key], f"{where} {key}")
    if changes.get("mode") == "":
        changes["mode"] = None
    if changes.get("transport", base.transport) not in TRANSPORTS:
        raise ConfigError(f"{where} transport: one of {', '.join(TRANSPORTS)}")
    for key in _FLOAT_FIELDS:
        if key in section:
            value = section[key]
            if not isinstance(value, int | float) or value <= 0:
                raise ConfigError(f"{where} {key}: must be a positive number of seconds")
            changes[key] = float(value)
    if "env" in section:
        env = dict(base.env)
        env.update(_str_map(section["env"], f"{where} env"))
        changes["env"] = MappingProxyType(env)
    if "pass_env" in section:
        changes["pass_env"] = tuple(_str_list(section["pass_env"], f"{where} pass_env"))
    if "private_dirs" in section:
        changes["private_dirs"] = MappingProxyType(
            {**base.private_dirs, **_str_map(section["private_dirs"], f"{where} private_dirs")}
        )
    if "admission" in section:
        changes["admission"] = tuple(_str_list(section["admission"], f"{where} admission"))
    for flag in ("allow_workspace_config", "agent_approves", "worktree_edits"):
        if flag in section:
            if not isinstance(section[flag], bool):
                raise ConfigError(f"{where} {flag}: must be true or false")
            changes[flag] = section[flag]
    if "files" in section:
        changes["files"] = _merge_files(base.files, _files(section["files"], where, project_dir))
    if "config_options" in section:
        changes["config_options"] = MappingProxyType(
            _str_map(section["config_options"], f"{where} config_options")
        )
    if "credentials" in section:
        changes["credentials"] = tuple(_credentials(section["credentials"], where))
    for key in ("endpoint_model", "openai_model"):
        if key in section:
            _str(section[key], f"{where} {key}")
    if "endpoint" in section and "openai_endpoint" in section:
        raise ConfigError(f"{where}: give endpoint or openai_endpoint, not both")
    endpoint_key = "endpoint" if "endpoint" in section else "openai_endpoint"
    if endpoint_key in section:
        endpoint = _str(section[endpoint_key], f"{where} {endpoint_key}")
        if not endpoint.startswith(("http://", "https://")):
            raise ConfigError(f"{where} {endpoint_key}: must be an http(s) URL")
        model_key = "endpoint_model" if "endpoint_model" in section else "openai_model"
        model = _str(section.get(model_key, "default"), f"{where} {model_key}")
        env, seeds = _endpoint_config(endpoint, model, base, where)
        changes["env"] = MappingProxyType({**changes.get("env", base.env), **env})
        if seeds:
            given = {f.path for f in changes.get("files", ())}
            extra = tuple(f for f in seeds if f.path not in given)
            changes["files"] = _merge_files(changes.get("files", base.files), extra)
        changes["endpoint"] = endpoint
    else:
        env_now = changes.get("env", base.env)
        named = next((env_now[k] for k in _ENDPOINT_ENV if k in env_now), None)
        if named is not None:
            changes["endpoint"] = named
    return dataclasses.replace(base, **changes)


def _command_path(exe: str, project_dir: Path | None) -> str:
    """``~`` expanded; a relative path with a ``/`` taken from the project directory."""
    if exe.startswith("~"):
        return str(Path(exe).expanduser())
    if "/" in exe and not exe.startswith("/") and project_dir is not None:
        return str((project_dir / exe).resolve())
    return exe


def _files(value: Any, where: str, project_dir: Path | None) -> tuple[SeedFile, ...]:
    if not isinstance(value, dict):
        raise ConfigError(f"{where} files: must be a table of path = content")
    out = []
    for path, spec in value.items():
        label = f"{where} files {path!r}"
        if isinstance(spec, str):
            out.append(SeedFile(path, content=spec))
            continue
        if not isinstance(spec, dict) or set(spec) - {"content", "source", "mode"}:
            raise ConfigError(f"{label}: must be a string or {{ content | source, mode }}")
        if ("content" in spec) == ("source" in spec):
            raise ConfigError(f"{label}: give exactly one of content or source")
        mode = 0o600
        if "mode" in spec:
            text = _str(spec["mode"], f"{label} mode")
            if not re.fullmatch(r"0?[0-7]{3}", text) or int(text, 8) & 0o077:
                raise ConfigError(f"{label} mode: an octal owner-only mode such as '0600'")
            mode = int(text, 8)
        if "content" in spec:
            out.append(SeedFile(path, content=_str(spec["content"], f"{label} content"), mode=mode))
        else:
            source = _resolve(project_dir, _str(spec["source"], f"{label} source"))
            out.append(SeedFile(path, source=str(source), mode=mode))
    return tuple(out)


def _merge_files(
    base: tuple[SeedFile, ...], override: tuple[SeedFile, ...]
) -> tuple[SeedFile, ...]:
    """The base profile's seeded files, with same-path entries replaced by ``override``."""
    given = {f.path for f in override}
    return (*(f for f in base if f.path not in given), *override)


def _endpoint_config(
    endpoint: str, model: str, base: AgentProfile, where: str
) -> tuple[dict[str, str], tuple[SeedFile, ...]]:
    """Point the agent at the user's own model server, in the agent's own terms."""
    if base.family == "claude":
        env = {"ANTHROPIC_BASE_URL": endpoint.rstrip("/").removesuffix("/v1")}
        if model != "default":
            env["ANTHROPIC_MODEL"] = model
        return env, ()
    if base.family == "codex":
        toml = (
            f"model = {json.dumps(model)}\n"
            'model_provider = "endpoint"\n'
            "[model_providers.endpoint]\n"
            'name = "Configured endpoint"\n'
            f"base_url = {json.dumps(endpoint)}\n"
            'wire_api = "responses"\n'
            'env_key = "OPENAI_API_KEY"\n'
        )
        return {}, (SeedFile("$CODEX_HOME/config.toml", content=toml),)
    return _openai_endpoint_env(endpoint, model, base, where), ()


def _openai_endpoint_env(
    endpoint: str, model: str, base: AgentProfile, where: str
) -> dict[str, str]:
    """Point an OpenAI-compatible agent at the user's own endpoint (e.g. a local server)."""
    if base.family == "opencode":
        config = {
            "provider": {
                "endpoint": {
                    "npm": "@ai-sdk/openai-compatible",
                    "name": "Configured endpoint",
                    "options": {"baseURL": endpoint, "apiKey": "{env:OPENAI_API_KEY}"},
                    "models": {model: {"name": model, "tool_call": True}},
                }
            },
            "model": f"endpoint/{model}",
            "small_model": f"endpoint/{model}",
            "autoupdate": False,
            "share": "disabled",
            "permission": {"edit": "ask", "bash": "ask", "webfetch": "ask"},
        }
        return {"OPENCODE_CONFIG_CONTENT": json.dumps(config, sort_keys=True)}
    if base.family == "qwen":
        return {"OPENAI_BASE_URL": endpoint, "OPENAI_MODEL": model}
    raise ConfigError(
        f"{where}: endpoint is supported for claude, codex, opencode and qwen profiles "
        f"(not {base.family})"
    )


def _credentials(value: Any, where: str) -> list[CredentialBinding]:
    if not isinstance(value, list):
        raise ConfigError(f"{where} credentials: must be a list of tables")
    out = []
    for item in value:
        if isinstance(item, str):
            out.append(CredentialBinding(name=item))
            continue
        if not isinstance(item, dict) or not isinstance(item.get("name"), str):
            raise ConfigError(f"{where} credentials: each entry needs a `name`")
        source = item.get("source", "env")
        if source not in ("env", "file"):
            raise ConfigError(f"{where} credentials: source must be 'env' or 'file'")
        key = item.get("key", "")
        if not isinstance(key, str):
            raise ConfigError(f"{where} credentials: key must be a string")
        out.append(CredentialBinding(name=item["name"], source=source, key=key))
    return out


def _table(raw: Mapping[str, Any], key: str) -> dict[str, Any]:
    value = raw.get(key, {})
    if not isinstance(value, dict):
        raise ConfigError(f"[{key}] must be a table")
    return value


def _str(value: Any, where: str) -> str:
    if not isinstance(value, str):
        raise ConfigError(f"{where}: must be a string")
    return value


def _str_list(value: Any, where: str) -> list[str]:
    if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
        raise ConfigError(f"{where}: must be a list of strings")
    return list(value)


def _str_map(value: Any, where: str) -> dict[str, str]:
    if not isinstance(value, dict) or not all(isinstance(v, str) for v in value.values()):
        raise ConfigError(f"{where}: must be a table of strings")
    return dict(value)


def _resolve(project_dir: Path | None, path: str) -> Path:
    p = Path(path).expanduser()
    if not p.is_absolute() and project_dir is not None:
        p = project_dir / p
    return p
