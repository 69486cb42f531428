"""The private launch environment: allowlist only, 0700 dirs, bound credentials, cleanup."""

from __future__ import annotations

import stat
from pathlib import Path
from types import MappingProxyType

import pytest

from baton.agent_profile import AgentProfile, CredentialBinding
from baton.errors import ConfigError, SecurityError
from baton.providers.catalog import BUILTIN_PROFILES
from baton.security.launch_env import (
    STANDARD_DIRS,
    load_secrets_file,
    plan_launch,
    prepare_launch,
)

SHELL = {
    "PATH": "/usr/bin:/bin",
    "LANG": "C.UTF-8",
    "HOME": "/home/user",
    "ANTHROPIC_API_KEY": "sk-ant-api03-should-never-pass-through",
    "AWS_SECRET_ACCESS_KEY": "wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY",
    "GITHUB_TOKEN": "ghp_shouldneverpassthrough0123456789",
    "SSH_AUTH_SOCK": "/tmp/ssh-agent.sock",
    "CURSOR_API_KEY": "key_cursor_value_0123456789",
}


@pytest.fixture
def dirs(tmp_path: Path) -> tuple[Path, Path]:
    ws = tmp_path / "ws"
    ws.mkdir()
    return ws, tmp_path / "state" / "agents"


def _mode(p: Path) -> int:
    return stat.S_IMODE(p.lstat().st_mode)


def test_nothing_inherited_beyond_the_allowlist(dirs: tuple[Path, Path]) -> None:
    ws, base = dirs
    profile = BUILTIN_PROFILES["claude"]
    with prepare_launch(
        profile, workspace=ws, base_dir=base, environ=SHELL, secrets_file=None
    ) as launch:
        env = dict(launch.env)
        allowed = (
            set(profile.pass_env)
            | set(profile.env)
            | set(STANDARD_DIRS)
            | set(profile.private_dirs)
        )
        assert set(env) <= allowed
        for leaked in (
            "ANTHROPIC_API_KEY",
            "AWS_SECRET_ACCESS_KEY",
            "GITHUB_TOKEN",
            "SSH_AUTH_SOCK",
            "CURSOR_API_KEY",
        ):
            assert leaked not in env
        assert env["PATH"] == SHELL["PATH"]
        assert env["HOME"] == str(launch.root / "home") != SHELL["HOME"]
        assert env["CLAUDE_CONFIG_DIR"] == str(launch.root / "claude" / "config")
        assert launch.bound_secret_values == ()
        assert not any(v in repr(launch) for v in SHELL.values() if "key" in v.lower())


def test_dirs_are_private(dirs: tuple[Path, Path]) -> None:
    ws, base = dirs
    profile = BUILTIN_PROFILES["cursor"]
    launch = prepare_launch(profile, workspace=ws, base_dir=base, environ=SHELL, secrets_file=None)
    try:
        assert _mode(launch.root) == 0o700
        for name in (*STANDARD_DIRS, *profile.private_dirs):
            path = Path(launch.env[name])
            assert path.is_dir() and _mode(path) == 0o700, name
            assert launch.root in path.parents
        assert launch.env["AGENT_CLI_CREDENTIAL_STORE"] == "memory"
        assert launch.env["NO_OPEN_BROWSER"] == "1"
    finally:
        launch.cleanup()


def test_bound_credentials_from_env_and_file(dirs: tuple[Path, Path], tmp_path: Path) -> None:
    ws, base = dirs
    secrets = tmp_path / "secrets.toml"
    secrets.write_text('OPENAI_KEY_IN_FILE = "sk-from-file-0123456789abcdef"\n')
    secrets.chmod(0o600)
    profile = AgentProfile(
        name="t",
        title="t",
        command=("true",),
        family="builtin",
        credentials=(
            CredentialBinding("ANTHROPIC_API_KEY"),
            CredentialBinding("OPENAI_API_KEY", source="file", key="OPENAI_KEY_IN_FILE"),
        ),
    )
    with prepare_launch(
        profile, workspace=ws, base_dir=base, environ=SHELL, secrets_file=secrets
    ) as launch:
        assert launch.env["ANTHROPIC_API_KEY"] == SHELL["ANTHROPIC_API_KEY"]
        assert launch.env["OPENAI_API_KEY"] == "sk-from-file-0123456789abcdef"
        assert "AWS_SECRET_ACCESS_KEY" not in launch.env
        assert set(launch.bound_secret_values) == {
            SHELL["ANTHROPIC_API_KEY"],
            "sk-from-file-0123456789abcdef",
        }
        rows = {r.name: r for r in launch.describe()}
        assert rows["ANTHROPIC_API_KEY"].source == "credential:env:ANTHROPIC_API_KEY"
        assert rows["OPENAI_API_KEY"].source == "credential:file:OPENAI_KEY_IN_FILE"
        assert "sk-" not in rows["OPENAI_API_KEY"].value and "chars" in rows["OPENAI_API_KEY"].value
        assert rows["PATH"].source == "pass_env" and rows["HOME"].source == "private"


def test_missing_credential_names_it_not_the_value(dirs: tuple[Path, Path]) -> None:
    ws, base = dirs
    profile = AgentProfile(
        name="t",
        title="t",
        command=("true",),
        family="builtin",
        credentials=(CredentialBinding("CURSOR_API_KEY", key="MY_CURSOR_KEY"),),
    )
    with pytest.raises(ConfigError, match=r"CURSOR_API_KEY.*MY_CURSOR_KEY.*not set"):
        prepare_launch(profile, workspace=ws, base_dir=base, environ=SHELL, secrets_file=None)
    assert not base.exists() or not any(base.iterdir()), "a refused launch creates nothing"


def test_short_credential_refused(dirs: tuple[Path, Path]) -> None:
    ws, base = dirs
    profile = AgentProfile(
        name="t",
        title="t",
        command=("true",),
        family="builtin",
        credentials=(CredentialBinding("PIN"),),
    )
    with pytest.raises(ConfigError, match="shorter than 8") as info:
        prepare_launch(
            profile, workspace=ws, base_dir=base, environ={"PIN": "1234"}, secrets_file=None
        )
    assert "1234" not in str(info.value)


def test_credential_looking_pass_env_refused(dirs: tuple[Path, Path]) -> None:
    ws, base = dirs
    profile = AgentProfile(
        name="t", title="t", command=("true",), family="builtin", pass_env=("PATH", "GITHUB_TOKEN")
    )
    with pytest.raises(ConfigError, match=r"GITHUB_TOKEN.*bind it"):
        prepare_launch(profile, workspace=ws, base_dir=base, environ=SHELL, secrets_file=None)


def test_profile_env_cannot_override_private_vars(dirs: tuple[Path, Path]) -> None:
    ws, base = dirs
    profile = AgentProfile(
        name="t",
        title="t",
        command=("true",),
        family="builtin",
        env=MappingProxyType({"HOME": "/root"}),
    )
    with pytest.raises(ConfigError, match="HOME"):
        prepare_launch(profile, workspace=ws, base_dir=base, environ=SHELL, secrets_file=None)


@pytest.mark.parametrize("mode", [0o644, 0o640, 0o604, 0o660])
def test_secrets_file_with_wrong_mode_refused(tmp_path: Path, mode: int) -> None:
    f = tmp_path / "secrets.toml"
    f.write_text('K = "value-0123456789"\n')
    f.chmod(mode)
    with pytest.raises(SecurityError, match="chmod 600"):
        load_secrets_file(f)


def test_secrets_file_checks(tmp_path: Path) -> None:
    good = tmp_path / "good.toml"
    good.write_text('K = "value-0123456789"\n')
    good.chmod(0o400)
    assert load_secrets_file(good) == {"K": "value-0123456789"}
    link = tmp_path / "link.toml"
    link.symlink_to(good)
    with pytest.raises(SecurityError, match="symbolic link"):
        load_secrets_file(link)
    with pytest.raises(SecurityError, match="not a regular file"):
        load_secrets_file(tmp_path)
    with pytest.raises(ConfigError, match="does not exist"):
        load_secrets_file(tmp_path / "missing.toml")
    bad = tmp_path / "bad.toml"
    bad.write_text('K = "unterminated sk-live-secret-value\n')
    bad.chmod(0o600)
    with pytest.raises(ConfigError, match="not valid UTF-8 TOML") as info:
        load_secrets_file(bad)
    assert "sk-live" not in str(info.value)
    nested = tmp_path / "nested.toml"
    nested.write_text('[table]\nK = "v"\n')
    nested.chmod(0o600)
    with pytest.raises(ConfigError, match="must be a string"):
        load_secrets_file(nested)


def test_cleanup_removes_everything_and_is_idempotent(dirs: tuple[Path, Path]) -> None:
    ws, base = dirs
    launch = prepare_launch(
        BUILTIN_PROFILES["codex"], workspace=ws, base_dir=base, environ=SHELL, secrets_file=None
    )
    home = Path(launch.env["HOME"])
    (home / ".config").mkdir()
    (home / ".config" / "f").write_text("x")
    locked = home / "locked"
    locked.mkdir()
    (locked / "f").write_text("x")
    locked.chmod(0o500)
    (home / "escape").symlink_to(ws)  # a link out must be removed, not followed
    launch.cleanup()
    assert not launch.root.exists()
    assert ws.exists()
    launch.cleanup()
    assert launch.closed
    assert list(base.iterdir()) == []


def test_persistent_root_survives_cleanup(dirs: tuple[Path, Path], tmp_path: Path) -> None:
    ws, base = dirs
    root = tmp_path / "roles" / "reviewer"
    launch = prepare_launch(
        BUILTIN_PROFILES["opencode"],
        workspace=ws,
        base_dir=base,
        environ=SHELL,
        secrets_file=None,
        persistent_root=root,
    )
    (Path(launch.env["HOME"]) / "state.json").write_text("{}")
    (Path(launch.env["TMPDIR"]) / "scratch").write_text("x")
    launch.cleanup()
    assert (root / "home" / "state.json").exists()
    assert list((root / "tmp").iterdir()) == []
    again = prepare_launch(
        BUILTIN_PROFILES["opencode"],
        workspace=ws,
        base_dir=base,
        environ=SHELL,
        secrets_file=None,
        persistent_root=root,
    )
    assert again.root == root and (root / "home" / "state.json").exists()


def test_root_inside_workspace_refused(dirs: tuple[Path, Path]) -> None:
    ws, _ = dirs
    with pytest.raises(SecurityError, match="inside the workspace"):
        prepare_launch(
            BUILTIN_PROFILES["builtin"],
            workspace=ws,
            base_dir=ws / ".baton",
            environ=SHELL,
            secrets_file=None,
        )


def test_plan_reports_problems_without_creating(tmp_path: Path) -> None:
    profile = AgentProfile(
        name="t",
        title="t",
        command=("true",),
        family="builtin",
        credentials=(CredentialBinding("TOKEN_A"), CredentialBinding("TOKEN_B", source="file")),
    )
    plan = plan_launch(profile, root=tmp_path / "nowhere", environ={}, secrets_file=None)
    assert len(plan.problems) == 2
    assert not (tmp_path / "nowhere").exists()
