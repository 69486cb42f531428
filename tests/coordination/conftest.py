"""Fixtures: real FCoP 4.0 workspaces (through the real ``fcop`` library) in temp dirs."""

from __future__ import annotations

from pathlib import Path

import pytest

from baton.fcop_port.authority import TrustedAuthority
from baton.fcop_port.port import FcopPort
from baton.fcop_port.workspace import init_workspace

KEY = bytes(range(32))


@pytest.fixture
def authority() -> TrustedAuthority:
    return TrustedAuthority(KEY)


@pytest.fixture
def root(tmp_path: Path, authority: TrustedAuthority) -> Path:
    project = tmp_path / "project"
    project.mkdir()
    init_workspace(project, authority)
    return project


@pytest.fixture
def port(root: Path, authority: TrustedAuthority) -> FcopPort:
    return FcopPort(root, authority=authority)


@pytest.fixture
def state_dir(root: Path) -> Path:
    return root / ".baton"
