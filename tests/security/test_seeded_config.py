"""Agent configuration, declared: seeded files, reserved variables, endpoints, commands."""

from __future__ import annotations

import os
import stat
import sys
from pathlib import Path

import pytest

from baton.config import load_config
from baton.errors import ConfigError
from baton.security.launch_env import is_loopback_url, plan_launch, prepare_launch
from tests.support.harness import Harness


def _config(tmp_path: Path, toml: str) -> Path:
    project = tmp_path / "project"
    project.mkdir(exist_ok=True)
    (project / "baton.toml").write_text(toml)
    return project


def _launch(tmp_path: Path, project: Path, name: str, environ: dict[str, str] | None = None):
    profile = load_config(project, environ={}).profile(name)
    ws = tmp_path / "ws"
    ws.mkdir(exist_ok=True)
    return prepare_launch(
        profile,
        workspace=ws,
        base_dir=tmp_path / "roots",
        environ=environ or {"PATH": "/usr/bin"},
        secrets_file=None,
    )


def test_files_are_seeded_into_the_private_root(tmp_path: Path) -> None:
    (tmp_path / "project").mkdir()
    (tmp_path / "project" / "codex.toml").write_text('model = "from-file"\n')
    project = _config(
        tmp_path,
        """
[profiles.codex-local]
extends = "codex"
[profiles.codex-local.files]
"$CODEX_HOME/config.toml" = { source = "codex.toml" }
"home/.config/notes.txt" = "inline note\\n"

[profiles.claude-mine]
extends = "claude"
[profiles.claude-mine.files]
"$CLAUDE_CONFIG_DIR/settings.json" = '{"permissions": {"defaultMode": "plan"}}'
""",
    )
    with _launch(tmp_path, project, "codex-local") as launch:
        config = Path(launch.env["CODEX_HOME"]) / "config.toml"
        assert config.read_text() == 'model = "from-file"\n'
        assert stat.S_IMODE(config.stat().st_mode) == 0o600
        assert (launch.root / "home/.config/notes.txt").read_text() == "inline note\n"
        assert {f.origin for f in launch.plan.files} == {"inline", str(project / "codex.toml")}
    with _launch(tmp_path, project, "claude-mine") as launch:
        settings = Path(launch.env["CLAUDE_CONFIG_DIR"]) / "settings.json"
        assert "plan" in settings.read_text(), "the user's file replaces the built-in one"


def test_the_builtin_claude_profile_seeds_a_mode_that_asks(tmp_path: Path) -> None:
    project = _config(tmp_path, "")
    with _launch(tmp_path, project, "claude") as launch:
        text = (Path(launch.env["CLAUDE_CONFIG_DIR"]) / "settings.json").read_text()
        assert '"defaultMode": "default"' in text


@pytest.mark.parametrize(
    "path",
    ["../escape", "/etc/passwd", "$HOME/../../escape", "$NOT_PRIVATE/x", "tmp/x", "$PATH/x"],
)
def test_seeded_paths_stay_inside_the_root(tmp_path: Path, path: str) -> None:
    project = _config(
        tmp_path, f'[profiles.x]\nextends = "claude"\n[profiles.x.files]\n"{path}" = "x"\n'
    )
    profile = load_config(project, environ={}).profile("x")
    plan = plan_launch(profile, root=tmp_path / "root", environ={}, secrets_file=None)
    assert any("seeded file" in p for p in plan.problems), plan.problems
    with pytest.raises(ConfigError, match="seeded file"):
        _launch(tmp_path, project, "x")


def test_reserved_variables_stay_reserved(tmp_path: Path) -> None:
    project = _config(
        tmp_path, '[profiles.x]\nextends = "codex"\nenv = { CODEX_HOME = "/tmp/mine" }\n'
    )
    with pytest.raises(ConfigError, match=r"CODEX_HOME.*reserved.*files"):
        _launch(tmp_path, project, "x")


def test_a_dummy_key_is_accepted_only_for_a_loopback_endpoint(tmp_path: Path) -> None:
    project = _config(
        tmp_path,
        """
[profiles.local]
extends = "claude"
endpoint = "http://127.0.0.1:8080"
credentials = ["ANTHROPIC_API_KEY"]

[profiles.remote]
extends = "claude"
endpoint = "https://llm.example.com"
credentials = ["ANTHROPIC_API_KEY"]
""",
    )
    environ = {"PATH": "/usr/bin", "ANTHROPIC_API_KEY": "x"}
    with _launch(tmp_path, project, "local", environ) as launch:
        assert launch.env["ANTHROPIC_API_KEY"] == "x"
        assert launch.env["ANTHROPIC_BASE_URL"] == "http://127.0.0.1:8080"
        assert launch.bound_secret_values == (), "a dummy key is not a secret to redact"
    with pytest.raises(ConfigError, match="shorter than"):
        _launch(tmp_path, project, "remote", environ)
    assert is_loopback_url("http://localhost:1/v1") and is_loopback_url("http://[::1]:9")
    assert not is_loopback_url("http://127.0.0.1.example.com") and not is_loopback_url(None)


def test_endpoints_in_each_agents_terms(tmp_path: Path) -> None:
    project = _config(
        tmp_path,
        """
[profiles.c]
extends = "codex"
endpoint = "http://127.0.0.1:9000/v1"
endpoint_model = "qwen3"

[profiles.q]
extends = "qwen"
endpoint = "http://127.0.0.1:9000/v1"
endpoint_model = "qwen3"

[profiles.a]
extends = "claude"
endpoint = "http://127.0.0.1:9000/v1"
endpoint_model = "local-sonnet"
""",
    )
    config = load_config(project, environ={})
    [seed] = [f for f in config.profile("c").files if f.path == "$CODEX_HOME/config.toml"]
    assert seed.content is not None and 'base_url = "http://127.0.0.1:9000/v1"' in seed.content
    assert 'wire_api = "responses"' in seed.content and 'model = "qwen3"' in seed.content
    assert config.profile("q").env["OPENAI_BASE_URL"] == "http://127.0.0.1:9000/v1"
    claude = config.profile("a")
    assert claude.env["ANTHROPIC_BASE_URL"] == "http://127.0.0.1:9000"
    assert claude.env["ANTHROPIC_MODEL"] == "local-sonnet"
    assert claude.endpoint == "http://127.0.0.1:9000/v1"
    gemini = _config(
        tmp_path, '[profiles.g]\nextends = "gemini"\nendpoint = "http://127.0.0.1:1"\n'
    )
    with pytest.raises(ConfigError, match="not gemini"):
        load_config(gemini, environ={})


def test_flags_and_modes(tmp_path: Path) -> None:
    project = _config(
        tmp_path, '[profiles.x]\nextends = "claude"\nmode = ""\nagent_approves = true\n'
    )
    profile = load_config(project, environ={}).profile("x")
    assert profile.mode is None and profile.agent_approves
    bad = _config(tmp_path, '[profiles.y]\nextends = "claude"\nagent_approves = "yes"\n')
    with pytest.raises(ConfigError, match="agent_approves"):
        load_config(bad, environ={})


def test_commands_resolve_from_home_the_project_and_path(tmp_path: Path) -> None:
    project = _config(
        tmp_path,
        '[profiles.a]\ncommand = ["~/bin/agent"]\n[profiles.b]\ncommand = ["bin/agent", "acp"]\n'
        '[profiles.c]\ncommand = ["agent-on-path"]\n',
    )
    config = load_config(project, environ={})
    assert config.profile("a").command[0] == str(Path("~/bin/agent").expanduser())
    assert config.profile("b").command == (str(project / "bin" / "agent"), "acp")
    assert config.profile("c").command == ("agent-on-path",)


async def test_a_bare_command_runs_from_the_agents_path(harness: Harness) -> None:
    bindir = harness.tmp / "bin"
    bindir.mkdir()
    script = bindir / "my-fake-agent"
    script.write_text(f'#!/bin/sh\nexec {sys.executable} -m baton.testing.fake_agent "$@"\n')
    script.chmod(0o755)
    path = f"{bindir}{os.pathsep}{os.environ['PATH']}"
    session = await harness.open(["my-fake-agent", "--scenario", "ok"], environ={"PATH": path})
    outcome = await session.prompt("hi")
    assert outcome.status == "completed"
