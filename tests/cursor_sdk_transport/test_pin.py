"""The bundled bridge's pin, the ``cursor-sdk`` profile in ``baton agents``, the config key."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from baton.config import parse_profile
from baton.errors import ConfigError, SecurityError
from baton.providers.catalog import BUILTIN_PROFILES
from baton.security import bridge_pin
from baton.security.bridge_pin import (
    BRIDGE_ENTRY,
    NODE,
    BridgeAnchor,
    BundledBridge,
    content_digest,
    verify_bundled_bridge,
)
from baton.security.distribution import verify_before_launch
from baton.security.pinning import PinMismatch, pin_tree
from tests.support.project import baton_in, git_repo


def fake_bridge(root: Path) -> Path:
    (root / "bin").mkdir(parents=True)
    (root / "dist" / "bin").mkdir(parents=True)
    (root / NODE).write_text("#!/bin/sh\n")
    (root / NODE).chmod(0o755)
    (root / BRIDGE_ENTRY).write_text("console.log('ready')\n")
    return root


def pin_fake(root: Path, monkeypatch: pytest.MonkeyPatch, version: str = "9.9.9") -> None:
    files = pin_tree(root, NODE).for_platform().files
    anchor = BridgeAnchor(len(files), content_digest(files), "0" * 64)
    from baton.security.manifest import platform_key

    monkeypatch.setattr(bridge_pin, "BRIDGE_PINS", {version: {platform_key(): anchor}})
    monkeypatch.setattr(
        bridge_pin, "locate_bundled_bridge", lambda: BundledBridge(root=root, version=version)
    )
    monkeypatch.setattr(bridge_pin, "_record_problems", lambda bridge, files: [])


def test_the_installed_wheel_matches_batons_pin() -> None:
    bridge, manifest = verify_bundled_bridge()
    assert bridge.version == "1.1.0"
    assert len(manifest.for_platform().files) == 2571


def test_a_tampered_byte_anywhere_in_the_tree_blocks_the_launch(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    root = fake_bridge(tmp_path / "bridge")
    pin_fake(root, monkeypatch)
    bridge, _ = verify_bundled_bridge()
    assert bridge.root == root
    (root / BRIDGE_ENTRY).write_text("console.log('owned')\n")
    with pytest.raises(PinMismatch, match=r"does not match baton.s pin"):
        verify_bundled_bridge()


def test_links_in_the_tree_and_unpinned_releases_are_refused(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    root = fake_bridge(tmp_path / "bridge")
    pin_fake(root, monkeypatch)
    (root / "dist" / "extra.js").symlink_to("/etc/passwd")
    with pytest.raises(PinMismatch):
        verify_bundled_bridge()
    (root / "dist" / "extra.js").unlink()
    pin_fake(root, monkeypatch, version="9.9.9")
    monkeypatch.setattr(
        bridge_pin, "locate_bundled_bridge", lambda: BundledBridge(root=root, version="0.0.1")
    )
    with pytest.raises(SecurityError, match=r"no pin for the bridge of cursor-sdk 0\.0\.1"):
        verify_bundled_bridge()


def test_the_builtin_profile_launches_node_on_the_verified_script(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    root = fake_bridge(tmp_path / "bridge")
    pin_fake(root, monkeypatch)
    verified = verify_before_launch(BUILTIN_PROFILES["cursor-sdk"], tmp_path / "state", {})
    assert verified is not None
    assert verified.executable == root / NODE
    assert verified.launch_args == (str(root / BRIDGE_ENTRY),)


def test_baton_agents_lists_cursor_sdk_with_its_pin_and_mode(tmp_path: Path) -> None:
    repo = git_repo(tmp_path)
    (repo / "baton.toml").write_text("")
    done = baton_in(repo, "agents", "--json")
    assert done.returncode == 0, done.stderr
    (row,) = [r for r in map(json.loads, done.stdout.splitlines()) if r["name"] == "cursor-sdk"]
    assert row["mode"] == "ask"
    assert row["installed"] is True and row["version"] == "1.1.0"
    assert row["pin"].startswith("pinned by baton: cursor-sdk 1.1.0 bridge (2571 files")


def test_the_transport_key_is_checked() -> None:
    known = dict(BUILTIN_PROFILES)
    profile = parse_profile("mine", {"extends": "cursor-sdk", "model": "gpt-5"}, known)
    assert (profile.transport, profile.model) == ("cursor-sdk", "gpt-5")
    with pytest.raises(ConfigError, match="transport: one of acp, cursor-sdk"):
        parse_profile("bad", {"extends": "claude", "transport": "grpc"}, known)


def test_the_cursor_section_of_the_agents_page_shows_the_current_matrix() -> None:
    from baton.providers.capabilities import render_columns

    page = (Path(__file__).resolve().parents[2] / "docs" / "agents.md").read_text()
    shown = page.split("render_columns -->\n", 1)[1].split("<!-- /cursor-columns -->", 1)[0]
    assert shown == render_columns(("cursor", "cursor-sdk")), "regenerate it: see the marker"


def test_a_user_pin_of_the_bundled_bridge_must_list_batons_tree(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    root = fake_bridge(tmp_path / "bridge")
    pin_fake(root, monkeypatch)
    good = pin_tree(root, NODE, agent="cursor-sdk", version="9.9.9")
    bridge_pin.check_user_pin(good)  # the same tree: accepted without hashing it again
    (root / BRIDGE_ENTRY).write_text("tampered, then pinned by hand\n")
    bad = pin_tree(root, NODE, agent="cursor-sdk", version="9.9.9")
    with pytest.raises(SecurityError, match=r"not baton.s pin"):
        bridge_pin.check_user_pin(bad)
