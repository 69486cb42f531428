"""Launch the real OpenCode agent (``opencode acp``) offline, against :mod:`tests.support.llm_stub`.

OpenCode is installed by ``scripts/install-opencode`` into ``<repo>/.cache/opencode``. This module
only finds it and describes an isolated, offline launch as plain data (argv, env, cwd), so the raw
wire tests and baton's adapter tests start it the same way::

    with LLMStub(cwd=ws) as stub:
        launch = opencode_launch(stub.base_url, workspace=ws, private_dir=tmp / "agent")
        client = await RawClient.spawn(launch.argv, env=launch.env, cwd=launch.cwd)

Isolation: a private ``HOME``, ``XDG_CONFIG_HOME``/``XDG_DATA_HOME``/``XDG_CACHE_HOME``/
``XDG_STATE_HOME`` and ``TMPDIR`` under ``private_dir`` (OpenCode keeps its session database in
XDG_DATA_HOME and extracts a shared library into TMPDIR), no model catalogue fetch, no
auto-update, no default plugins, the whole configuration inline in ``OPENCODE_CONFIG_CONTENT``,
and (``offline=True``) npm pointed at a dead loopback registry.
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

__all__ = [
    "INSTALL_HINT",
    "OPENCODE_VERSION",
    "PERMISSION_ASK",
    "REPO_ROOT",
    "OpenCodeLaunch",
    "OpenCodeMissing",
    "find_opencode",
    "opencode_config",
    "opencode_launch",
    "require_opencode",
    "skip_opencode",
]

OPENCODE_VERSION = "1.18.33"
REPO_ROOT = Path(__file__).resolve().parents[2]
INSTALL_HINT = "run scripts/install-opencode (it installs opencode-ai into .cache/opencode)"

#: Edits and shell commands go through ``session/request_permission``, and, once allowed, edits
#: are written through the client's ``fs/write_text_file``.
PERMISSION_ASK: dict[str, str] = {"edit": "ask", "bash": "ask"}

MODEL = "scripted"
#: A loopback port where nothing listens (discard): npm fails fast instead of going online.
OFFLINE_NPM_REGISTRY = "http://127.0.0.1:9/"


class OpenCodeMissing(RuntimeError):
    pass


def skip_opencode() -> bool:
    """True when the environment asks to skip the real-agent tier (``BATON_SKIP_OPENCODE=1``)."""
    return os.environ.get("BATON_SKIP_OPENCODE", "") == "1"


def find_opencode(root: Path = REPO_ROOT) -> Path | None:
    """The installed ``opencode`` launcher, or None."""
    candidate = root / ".cache" / "opencode" / "node_modules" / ".bin" / "opencode"
    if candidate.is_file() and os.access(candidate, os.X_OK):
        return candidate
    return None


def require_opencode(root: Path = REPO_ROOT) -> Path:
    binary = find_opencode(root)
    if binary is None:
        where = root / ".cache" / "opencode"
        raise OpenCodeMissing(
            f"OpenCode {OPENCODE_VERSION} is not installed under {where}: {INSTALL_HINT}"
        )
    return binary


def opencode_config(
    base_url: str,
    *,
    permission: dict[str, Any] | None = None,
    extra: dict[str, Any] | None = None,
) -> dict[str, Any]:
    """The inline OpenCode configuration using the stub at ``base_url`` as its only model.

    ``permission=None`` leaves OpenCode's default (it writes files itself and asks nothing for
    paths inside ``cwd``); :data:`PERMISSION_ASK` makes it ask for edits and shell commands.
    """
    config: dict[str, Any] = {
        "$schema": "https://opencode.ai/config.json",
        "provider": {
            "local": {
                "npm": "@ai-sdk/openai-compatible",
                "name": "Local",
                "options": {"baseURL": base_url, "apiKey": "sk-local"},
                "models": {
                    MODEL: {
                        "name": "Scripted",
                        "tool_call": True,
                        "limit": {"context": 32000, "output": 512},
                    }
                },
            }
        },
        "model": f"local/{MODEL}",
        "small_model": f"local/{MODEL}",
        "autoupdate": False,
        "share": "disabled",
        "compaction": {"auto": False},
    }
    if permission is not None:
        config["permission"] = dict(permission)
    if extra:
        config.update(extra)
    return config


@dataclass(frozen=True)
class OpenCodeLaunch:
    """Everything needed to start ``opencode acp``: plain data, no process yet."""

    argv: list[str]
    env: dict[str, str]
    cwd: Path  # the process's working directory: the workspace
    workspace: Path
    private_dir: Path  # HOME, XDG_* and TMPDIR live under here
    config: dict[str, Any] = field(default_factory=dict)

    def placeholders(self) -> dict[str, str]:
        """Replacements that make recorded traces reproducible: private paths -> placeholders.

        OpenCode also prints the workspace without its leading slash (tool titles such as
        ``tmp/.../workspace/hello.txt``), so that form is mapped too.
        """
        out: dict[str, str] = {}
        for path, name in ((self.workspace, "WORKSPACE"), (self.private_dir, "AGENT_HOME")):
            for form in {str(path), os.path.realpath(path)}:
                out[form] = "/" + name
                out[form.lstrip("/")] = name
        return out


def opencode_launch(
    base_url: str,
    *,
    workspace: Path,
    private_dir: Path,
    permission: dict[str, Any] | None = None,
    binary: Path | None = None,
    extra_config: dict[str, Any] | None = None,
    extra_env: dict[str, str] | None = None,
    offline: bool = True,
) -> OpenCodeLaunch:
    """Describe an isolated offline ``opencode acp`` launch; creates the private directories."""
    exe = binary if binary is not None else require_opencode()
    workspace.mkdir(parents=True, exist_ok=True)
    dirs = {
        "HOME": private_dir / "home",
        "XDG_CONFIG_HOME": private_dir / "config",
        "XDG_DATA_HOME": private_dir / "data",
        "XDG_CACHE_HOME": private_dir / "cache",
        "XDG_STATE_HOME": private_dir / "state",
        "TMPDIR": private_dir / "tmp",
    }
    for d in dirs.values():
        d.mkdir(parents=True, exist_ok=True)
    config = opencode_config(base_url, permission=permission, extra=extra_config)
    env = {
        "PATH": os.environ.get("PATH", "/usr/local/bin:/usr/bin:/bin"),
        "LANG": "C.UTF-8",
        **{k: str(v) for k, v in dirs.items()},
        "OPENCODE_DISABLE_MODELS_FETCH": "1",
        "OPENCODE_DISABLE_AUTOUPDATE": "1",
        "OPENCODE_DISABLE_DEFAULT_PLUGINS": "1",
        "OPENCODE_CONFIG_CONTENT": json.dumps(config),
    }
    if offline:
        # OpenCode runs npm at start-up to install @opencode-ai/plugin and @opentui/* into its
        # private home. It does not need them for ACP: point npm at a closed loopback port so
        # the launch never touches the network (observed: same timings, turn unaffected).
        env["npm_config_registry"] = OFFLINE_NPM_REGISTRY
    if extra_env:
        env.update(extra_env)
    return OpenCodeLaunch(
        argv=[str(exe), "acp"],
        env=env,
        cwd=workspace,
        workspace=workspace,
        private_dir=private_dir,
        config=config,
    )
