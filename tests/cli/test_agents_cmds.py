"""``baton agents``, ``agents install`` and ``agents login`` as a user runs them."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from baton.agent_profile import AgentProfile
from baton.providers.catalog import CODEX
from baton.security.agent_installs import installed_agent
from baton.security.agent_tools import AgentInstallError, RegistryUnreachable, install_agent
from baton.security.distribution import verify_before_launch
from baton.security.pinning import PinMismatch
from tests.support.agents import AGENTS_DIR, require_agent
from tests.support.project import baton_in


def _project(tmp_path: Path, toml: str = "") -> Path:
    repo = tmp_path / "repo"
    repo.mkdir()
    (repo / "baton.toml").write_text(toml)
    return repo


def _rows(result: subprocess.CompletedProcess[str]) -> dict[str, dict[str, Any]]:
    assert result.returncode == 0, result.stderr
    rows = [json.loads(line) for line in result.stdout.splitlines()]
    return {r["name"]: r for r in rows}


def test_agents_lists_version_pin_mode_and_credentials(tmp_path: Path) -> None:
    require_agent(CODEX)
    repo = _project(
        tmp_path,
        '[profiles.mine]\nextends = "claude"\ncredentials = ["ANTHROPIC_API_KEY"]\n',
    )
    env = {"BATON_TOOLS_DIR": str(AGENTS_DIR)}
    rows = _rows(baton_in(repo, "agents", "--json", extra_env=env))
    codex = rows["codex"]
    assert codex["installed"] and codex["version"] == CODEX.version and codex["version_matches"]
    assert codex["pin"] == "pinned (tools dir)" and codex["mode"] == "read-only"
    assert rows["cursor"]["installed"] is False and rows["cursor"]["mode"] == "plan"
    assert rows["mine"]["credentials"] == "ANTHROPIC_API_KEY (missing)"
    bound = _rows(
        baton_in(repo, "agents", "--json", extra_env={**env, "ANTHROPIC_API_KEY": "sk-" + "a" * 30})
    )
    assert bound["mine"]["credentials"] == "ANTHROPIC_API_KEY (env)"


def test_an_installed_agent_launches_from_its_verified_pin(tmp_path: Path) -> None:
    """The tools-dir install of codex is what the built-in profile runs, verified first."""
    install = require_agent(CODEX)
    verified = verify_before_launch(CODEX, tmp_path / "state", {"BATON_TOOLS_DIR": str(AGENTS_DIR)})
    assert verified is not None and verified.executable == install.executable
    assert verified.manifest.version == CODEX.version


def _fake_npm(tmp_path: Path, script: str) -> dict[str, str]:
    bindir = tmp_path / "fakebin"
    bindir.mkdir(exist_ok=True)
    npm = bindir / "npm"
    npm.write_text(f"#!{sys.executable}\n{script}")
    npm.chmod(0o755)
    return {"PATH": f"{bindir}{os.pathsep}{os.environ['PATH']}", "HOME": str(tmp_path)}


_NPM_INSTALLS = """
import json, os, sys
prefix = sys.argv[sys.argv.index("--prefix") + 1]
spec = sys.argv[3]
name, version = spec.rsplit("@", 1)
pkg = os.path.join(prefix, "node_modules", *name.split("/"))
os.makedirs(os.path.join(pkg, "bin"), exist_ok=True)
version = os.environ.get("FAKE_NPM_VERSION", version)
json.dump({"name": name, "version": version, "bin": {"tiny-agent": "bin/agent.js"}},
          open(os.path.join(pkg, "package.json"), "w"))
open(os.path.join(pkg, "bin", "agent.js"), "w").write("#!/usr/bin/env node\\n")
"""

TINY = AgentProfile(
    name="tiny",
    title="tiny",
    command=("tiny-agent",),
    family="generic",
    package="@example/tiny-agent",
    version="1.2.3",
)


def test_install_pins_exactly_and_is_idempotent(tmp_path: Path) -> None:
    environ = _fake_npm(tmp_path, _NPM_INSTALLS)
    tools = tmp_path / "tools"
    first = install_agent(TINY, environ, tools=tools)
    assert first.version == "1.2.3" and first.executable.is_file()
    assert os.access(first.executable, os.X_OK), "bin targets are made executable"
    assert first.entrypoint == "@example/tiny-agent/bin/agent.js"
    again = install_agent(TINY, environ, tools=tools)
    assert again.root == first.root
    found = installed_agent(TINY, {"BATON_TOOLS_DIR": str(tools)})
    assert found is not None and found.version == "1.2.3"
    verified = verify_before_launch(TINY, tmp_path / "state", {"BATON_TOOLS_DIR": str(tools)})
    assert verified is not None and verified.executable == first.executable
    first.executable.write_text("#!/usr/bin/env node\n// tampered\n")
    with pytest.raises(PinMismatch):
        verify_before_launch(TINY, tmp_path / "state", {"BATON_TOOLS_DIR": str(tools)})


def test_a_version_npm_did_not_pin_is_refused(tmp_path: Path) -> None:
    environ = {**_fake_npm(tmp_path, _NPM_INSTALLS), "FAKE_NPM_VERSION": "1.2.0"}
    with pytest.raises(AgentInstallError, match=r"1\.2\.0, not the pinned 1\.2\.3"):
        install_agent(TINY, environ, tools=tmp_path / "tools")
    assert installed_agent(TINY, {"BATON_TOOLS_DIR": str(tmp_path / "tools")}) is None


def test_an_unreachable_registry_is_its_own_error(tmp_path: Path) -> None:
    script = "import sys\nsys.stderr.write('npm error code ENOTFOUND\\nnpm error network request to https://registry.npmjs.org failed\\n')\nsys.exit(1)\n"
    environ = _fake_npm(tmp_path, script)
    with pytest.raises(RegistryUnreachable, match="could not reach its registry"):
        install_agent(TINY, environ, tools=tmp_path / "tools")
    broken = _fake_npm(tmp_path, "import sys\nsys.stderr.write('npm error E404\\n')\nsys.exit(1)\n")
    with pytest.raises(AgentInstallError) as info:
        install_agent(TINY, broken, tools=tmp_path / "tools")
    assert not isinstance(info.value, RegistryUnreachable)


def test_install_refuses_a_profile_without_a_package(tmp_path: Path) -> None:
    repo = _project(tmp_path)
    result = baton_in(repo, "agents", "install", "cursor")
    assert result.returncode == 2 and "names no npm package" in result.stderr


def test_login_runs_the_agents_terminal_login_in_its_login_root(tmp_path: Path) -> None:
    command = [sys.executable, "-m", "baton.testing.fake_agent", "--scenario", "terminal-login"]
    repo = _project(
        tmp_path, f'[profiles.fault]\ncommand = {json.dumps(command)}\nfamily = "builtin"\n'
    )
    before = baton_in(repo, "run", "hi", "--agent", "fault")
    assert before.returncode == 3 and "requires authentication" in before.stderr
    listed = baton_in(repo, "agents", "login", "fault", "--list")
    assert listed.returncode == 0 and "fake-terminal  terminal" in listed.stdout
    done = baton_in(repo, "agents", "login", "fault")
    assert done.returncode == 0, done.stderr
    assert "fake agent: logged in" in done.stdout
    root = tmp_path / "xdg" / "baton" / "logins" / "fault"
    assert (root / "home" / ".fake-login").read_text() == "logged in via terminal\n"
    rows = _rows(baton_in(repo, "agents", "--json"))
    assert rows["fault"]["credentials"] == "login (fake-terminal)"
    after = baton_in(repo, "run", "hi", "--agent", "fault")
    assert after.returncode == 0, after.stderr
    assert not list((root / "tmp").iterdir()), "each launch's TMPDIR is removed after it"


def test_builtin_profiles_pin_exact_versions() -> None:
    from baton.providers.catalog import BUILTIN_PROFILES

    for profile in BUILTIN_PROFILES.values():
        if profile.package is not None:
            assert profile.version and all(p.isdigit() for p in profile.version.split("."))
            assert profile.install_hint == f"baton agents install {profile.name}"
