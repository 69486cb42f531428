"""atomic_write: whole replacement, mode, no temp left behind, failure keeps the old bytes."""

from __future__ import annotations

import os
import stat
from pathlib import Path

import pytest

from baton import fsutil


def test_replaces_whole_file_with_mode(tmp_path: Path) -> None:
    target = tmp_path / "state.bin"
    target.write_bytes(b"old contents that are longer")
    fsutil.atomic_write(target, b"new", mode=0o640)
    assert target.read_bytes() == b"new"
    assert stat.S_IMODE(target.stat().st_mode) == 0o640
    assert sorted(p.name for p in tmp_path.iterdir()) == ["state.bin"]


def test_failed_write_keeps_old_bytes_and_cleans_temp(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    target = tmp_path / "state.bin"
    target.write_bytes(b"old")

    def broken_replace(src: object, dst: object) -> None:
        raise OSError("disk on fire")

    monkeypatch.setattr(os, "replace", broken_replace)
    with pytest.raises(OSError, match="disk on fire"):
        fsutil.atomic_write(target, b"new")
    assert target.read_bytes() == b"old"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["state.bin"]


def test_concurrent_writers_use_distinct_temp_names(tmp_path: Path) -> None:
    target = tmp_path / "f"
    seen: list[str] = []
    real_replace = os.replace

    def spy(src: str | os.PathLike[str], dst: str | os.PathLike[str]) -> None:
        seen.append(os.fspath(src))
        real_replace(src, dst)

    os_replace = os.replace
    try:
        os.replace = spy  # type: ignore[assignment]
        fsutil.atomic_write(target, b"a")
        fsutil.atomic_write(target, b"b")
    finally:
        os.replace = os_replace  # type: ignore[assignment]
    assert len(set(seen)) == 2
    assert target.read_bytes() == b"b"
