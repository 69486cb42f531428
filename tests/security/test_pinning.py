"""Pinned distributions: pin, verify (precise errors), materialize (safe extraction)."""

from __future__ import annotations

import hashlib
import io
import json
import os
import stat
import tarfile
import zipfile
from pathlib import Path

import pytest

from baton.errors import ConfigError, SecurityError
from baton.security.manifest import FORMAT, Manifest, PlatformPin, closure_digest, platform_key
from baton.security.pinning import PinMismatch, materialize, pin_tree, verify_tree

REPO = Path(__file__).resolve().parents[2]
OPENCODE = REPO / ".cache" / "opencode" / "node_modules" / "opencode-ai"

FILES = {
    "bin/agent": (b"#!/bin/sh\nexec node ../lib/index.js\n", 0o755),
    "lib/index.js": (b"require('./chunks/1.js')\n", 0o644),
    "lib/chunks/1.js": (b"module.exports = 1\n", 0o644),
    "lib/native/addon.node": (bytes(range(256)) * 4, 0o644),
    "package.json": (b'{"name": "agent", "version": "1.2.3"}\n', 0o644),
}


def make_tree(root: Path) -> Path:
    for rel, (data, mode) in FILES.items():
        path = root / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(data)
        path.chmod(mode)
    return root


@pytest.fixture
def tree(tmp_path: Path) -> Path:
    return make_tree(tmp_path / "tree")


@pytest.fixture
def manifest(tree: Path) -> Manifest:
    return pin_tree(tree, "bin/agent", agent="agent", version="1.2.3")


def test_pin_lists_every_file(tree: Path, manifest: Manifest) -> None:
    pin = manifest.for_platform()
    assert [f.path for f in pin.files] == sorted(FILES)
    by = pin.by_path()
    for rel, (data, mode) in FILES.items():
        assert by[rel].sha256 == hashlib.sha256(data).hexdigest()
        assert by[rel].size == len(data) and by[rel].mode == mode
    assert pin.closure_sha256 == closure_digest(pin.files)
    assert pin.entrypoint == "bin/agent" and pin.archive_sha256 is None
    verify_tree(tree, manifest)


def test_manifest_json_roundtrip(manifest: Manifest) -> None:
    text = manifest.to_json()
    data = json.loads(text)
    assert data["format"] == FORMAT and data["agent"] == "agent"
    assert data["platforms"][platform_key()]["files"][0]["mode"] in ("0644", "0755")
    assert Manifest.from_json(text) == manifest


@pytest.mark.parametrize(
    ("mutate", "message"),
    [
        (lambda d: d.update(format="baton.pin/v2"), "format"),
        (lambda d: d.update(extra=1), "unknown field"),
        (
            lambda d: next(iter(d["platforms"].values()))["files"][0].update(size=1),
            "closure_sha256 does not match",
        ),
        (lambda d: next(iter(d["platforms"].values()))["files"][0].update(path="../x"), "'..'"),
        (lambda d: next(iter(d["platforms"].values()))["files"][0].update(path="/abs"), "absolute"),
        (
            lambda d: next(iter(d["platforms"].values())).update(entrypoint="nope"),
            "not one of the pinned files",
        ),
        (
            lambda d: next(iter(d["platforms"].values())).update(closure_sha256="X"),
            "64 lowercase hex",
        ),
        (
            lambda d: next(iter(d["platforms"].values()))["files"][0].update(mode="4755"),
            "four octal digits",
        ),
    ],
)
def test_manifest_parsing_is_strict(manifest: Manifest, mutate: object, message: str) -> None:
    data = json.loads(manifest.to_json())
    mutate(data)  # type: ignore[operator]
    with pytest.raises(ConfigError, match=message):
        Manifest.from_json(json.dumps(data))


@pytest.mark.parametrize("rel", sorted(FILES))
def test_one_tampered_byte_anywhere_is_named(tree: Path, manifest: Manifest, rel: str) -> None:
    path = tree / rel
    data = bytearray(path.read_bytes())
    data[len(data) // 2] ^= 0x01
    path.write_bytes(bytes(data))
    with pytest.raises(PinMismatch) as info:
        verify_tree(tree, manifest)
    assert info.value.problems == (
        f"{rel}: sha256 {hashlib.sha256(data).hexdigest()[:16]}…, pinned "
        f"{manifest.for_platform().by_path()[rel].sha256[:16]}… (content modified)",
    )
    assert rel in str(info.value)


def test_size_mode_missing_extra(tree: Path, manifest: Manifest) -> None:
    (tree / "lib/index.js").write_bytes(b"require('./evil')\n// longer now\n")
    (tree / "bin/agent").chmod(0o777)
    (tree / "lib/chunks/1.js").unlink()
    (tree / "lib/chunks/2.js").write_text("loaded dynamically")
    with pytest.raises(PinMismatch) as info:
        verify_tree(tree, manifest)
    problems = set(info.value.problems)
    assert "bin/agent: mode 0777, pinned 0755" in problems
    assert any(p.startswith("lib/index.js: size ") for p in problems)
    assert "lib/chunks/1.js: missing" in problems
    assert "lib/chunks/2.js: unexpected file (not in the pin)" in problems


def test_pinned_closure_mismatch_in_memory(tree: Path, manifest: Manifest) -> None:
    pin = manifest.for_platform()
    forged = PlatformPin(None, "0" * 64, pin.entrypoint, pin.files)
    with pytest.raises(PinMismatch, match="closure digest"):
        verify_tree(tree, forged)


def test_links_and_special_files_refused(tmp_path: Path) -> None:
    for kind in ("symlink", "hardlink", "fifo", "external_hardlink", "setuid"):
        root = make_tree(tmp_path / kind)
        if kind == "symlink":
            (root / "lib" / "link.js").symlink_to(root / "lib" / "index.js")
            expected = "lib/link.js: is a symbolic link"
        elif kind == "hardlink":
            os.link(root / "lib" / "index.js", root / "lib" / "alias.js")
            expected = "hard link to"
        elif kind == "fifo":
            os.mkfifo(root / "lib" / "pipe")
            expected = "lib/pipe: is a FIFO"
        elif kind == "external_hardlink":
            os.link(root / "lib" / "index.js", tmp_path / f"outside-{kind}")
            expected = "lib/index.js: has 2 hard links"
        else:
            (root / "bin" / "agent").chmod(0o4755)
            expected = "set-id or sticky"
        with pytest.raises(PinMismatch, match=expected):
            pin_tree(root, "bin/agent")


def test_external_hardlinks_allowed_when_recorded(tmp_path: Path) -> None:
    root = make_tree(tmp_path / "t")
    os.link(root / "bin" / "agent", tmp_path / "platform-binary")
    manifest = pin_tree(root, "bin/agent", allow_external_hardlinks=True)
    assert manifest.for_platform().allow_external_hardlinks
    verify_tree(root, Manifest.from_json(manifest.to_json()))
    os.link(root / "lib" / "index.js", root / "lib" / "alias.js")
    with pytest.raises(PinMismatch, match=r"lib/alias\.js: unexpected file"):
        verify_tree(root, manifest)


def test_verify_refuses_new_symlink(tree: Path, manifest: Manifest) -> None:
    (tree / "lib" / "index.js").unlink()
    (tree / "lib" / "index.js").symlink_to(tree / "lib" / "chunks" / "1.js")
    with pytest.raises(PinMismatch, match=r"lib/index\.js: is a symbolic link"):
        verify_tree(tree, manifest)


def test_pin_refuses_bad_entrypoint(tree: Path) -> None:
    with pytest.raises(PinMismatch, match="entrypoint"):
        pin_tree(tree, "bin/missing")
    with pytest.raises(SecurityError, match="entrypoint refused"):
        pin_tree(tree, "../x")


# ---------------------------------------------------------------------- archives


def tar_of(
    root: Path, dest: Path, *, extra: list[tarfile.TarInfo] | None = None, mode: str = "w:gz"
) -> Path:
    with tarfile.open(dest, mode) as tf:
        for rel in sorted(FILES):
            tf.add(root / rel, arcname=f"./{rel}", recursive=False)
        for info in extra or []:
            data = b"x" * info.size if info.isreg() else None
            tf.addfile(info, io.BytesIO(data) if data is not None else None)
    return dest


def zip_of(
    root: Path, dest: Path, *, extra: list[tuple[zipfile.ZipInfo, bytes]] | None = None
) -> Path:
    with zipfile.ZipFile(dest, "w") as zf:
        zf.writestr(zipfile.ZipInfo("lib/"), b"")
        for rel in sorted(FILES):
            zf.write(root / rel, arcname=rel)
        for info, data in extra or []:
            zf.writestr(info, data)
    return dest


def archive_pin(manifest: Manifest, archive: Path) -> Manifest:
    pin = manifest.for_platform()
    digest = hashlib.sha256(archive.read_bytes()).hexdigest()
    return manifest.with_platform(
        platform_key(), PlatformPin(digest, pin.closure_sha256, pin.entrypoint, pin.files)
    )


@pytest.mark.parametrize("kind", ["tar.gz", "tar", "zip"])
def test_materialize_installs_and_verifies(
    tree: Path, manifest: Manifest, tmp_path: Path, kind: str
) -> None:
    archive = tmp_path / f"agent.{kind}"
    if kind == "zip":
        zip_of(tree, archive)
    else:
        tar_of(tree, archive, mode="w:gz" if kind == "tar.gz" else "w")
    pinned = archive_pin(manifest, archive)
    store = tmp_path / "store"
    dest = materialize(archive, pinned, store)
    assert dest == store / manifest.for_platform().closure_sha256
    verify_tree(dest, pinned)
    assert stat.S_IMODE((dest / "bin/agent").stat().st_mode) == 0o755
    assert [p.name for p in store.iterdir()] == [dest.name], "no temporary leftovers"
    # Second call: the existing tree is verified, not overwritten.
    assert materialize(archive, pinned, store) == dest


def test_archive_tamper_detected_before_extraction(
    tree: Path, manifest: Manifest, tmp_path: Path
) -> None:
    archive = tar_of(tree, tmp_path / "a.tar.gz")
    pinned = archive_pin(manifest, archive)
    data = bytearray(archive.read_bytes())
    data[-10] ^= 0xFF
    archive.write_bytes(bytes(data))
    store = tmp_path / "store"
    with pytest.raises(PinMismatch, match="nothing was extracted"):
        materialize(archive, pinned, store)
    assert list(store.iterdir()) == []


def test_existing_tampered_tree_is_not_overwritten(
    tree: Path, manifest: Manifest, tmp_path: Path
) -> None:
    archive = tar_of(tree, tmp_path / "a.tar.gz")
    pinned = archive_pin(manifest, archive)
    store = tmp_path / "store"
    dest = materialize(archive, pinned, store)
    (dest / "lib" / "index.js").chmod(0o644)
    (dest / "lib" / "index.js").write_text("tampered")
    with pytest.raises(PinMismatch, match="refusing to overwrite"):
        materialize(archive, pinned, store)
    assert (dest / "lib" / "index.js").read_text() == "tampered"


def _tarinfo(
    name: str, kind: bytes = tarfile.REGTYPE, size: int = 0, linkname: str = ""
) -> tarfile.TarInfo:
    info = tarfile.TarInfo(name)
    info.type = kind
    info.size = size
    info.linkname = linkname
    return info


@pytest.mark.parametrize(
    ("member", "message"),
    [
        (_tarinfo("../escape.js", size=1), "'..'"),
        (_tarinfo("lib/../../escape.js", size=1), "'..'"),
        (_tarinfo("/etc/cron.d/x", size=1), "absolute"),
        (_tarinfo("lib/link.js", tarfile.SYMTYPE, linkname="/etc/passwd"), "symbolic link"),
        (_tarinfo("lib/hard.js", tarfile.LNKTYPE, linkname="lib/index.js"), "hard link"),
        (_tarinfo("lib/dev", tarfile.CHRTYPE), "device or FIFO"),
        (_tarinfo("lib/fifo", tarfile.FIFOTYPE), "device or FIFO"),
        (_tarinfo("lib/extra.js", size=3), "not in the pin"),
        (_tarinfo("lib/index.js", size=len(FILES["lib/index.js"][0])), "appears twice"),
        (_tarinfo("lib/\x1b[2J.js", size=1), "control characters"),
    ],
    ids=lambda v: v if isinstance(v, str) else v.name,
)
def test_unsafe_tar_members_rejected(
    tree: Path, manifest: Manifest, tmp_path: Path, member: tarfile.TarInfo, message: str
) -> None:
    archive = tar_of(tree, tmp_path / "bad.tar.gz", extra=[member])
    pinned = archive_pin(manifest, archive)
    store = tmp_path / "store"
    with pytest.raises(SecurityError, match=message):
        materialize(archive, pinned, store)
    assert list(store.iterdir()) == [], "nothing is left behind"
    assert not (tmp_path / "escape.js").exists()


def test_unsafe_zip_members_rejected(tree: Path, manifest: Manifest, tmp_path: Path) -> None:
    link = zipfile.ZipInfo("lib/link.js")
    link.external_attr = (stat.S_IFLNK | 0o777) << 16
    for extra, message in (
        ((link, b"/etc/passwd"), "symbolic link"),
        ((zipfile.ZipInfo("../up.js"), b"x"), "'..'"),
        ((zipfile.ZipInfo("/abs.js"), b"x"), "absolute"),
    ):
        archive = zip_of(tree, tmp_path / "bad.zip", extra=[extra])
        with pytest.raises(SecurityError, match=message):
            materialize(archive, archive_pin(manifest, archive), tmp_path / "store")
        archive.unlink()


def test_member_content_mismatch_rejected(tree: Path, manifest: Manifest, tmp_path: Path) -> None:
    (tree / "lib/chunks/1.js").write_bytes(b"module.exports = 2\n")  # same size, other bytes
    archive = tar_of(tree, tmp_path / "a.tar.gz")
    with pytest.raises(PinMismatch, match=r"lib/chunks/1\.js does not match its pinned sha256"):
        materialize(archive, archive_pin(manifest, archive), tmp_path / "store")


def test_in_place_pin_cannot_vouch_for_an_archive(
    tree: Path, manifest: Manifest, tmp_path: Path
) -> None:
    archive = tar_of(tree, tmp_path / "a.tar.gz")
    with pytest.raises(SecurityError, match="no archive_sha256"):
        materialize(archive, manifest, tmp_path / "store")


@pytest.mark.skipif(
    not OPENCODE.is_dir(), reason="npm-installed OpenCode not present (scripts/install-opencode)"
)
def test_real_opencode_tree(tmp_path: Path) -> None:
    pkg = json.loads((OPENCODE / "package.json").read_text())
    entry = pkg["bin"]["opencode"].removeprefix("./")
    nlinks = (OPENCODE / entry).stat().st_nlink
    if nlinks > 1:
        # npm's postinstall hard-links the platform binary into bin/: refused by default.
        with pytest.raises(PinMismatch, match="hard links"):
            pin_tree(OPENCODE, entry)
    manifest = pin_tree(
        OPENCODE, entry, agent="opencode", version=pkg["version"], allow_external_hardlinks=True
    )
    pin = manifest.for_platform()
    assert entry in pin.by_path() and pin.by_path()[entry].size > 1_000_000
    verify_tree(OPENCODE, Manifest.from_json(manifest.to_json()))
    # The same check catches a tampered byte in the real binary: copy the tree (the copy
    # has no external links) and flip one byte near the end.
    copy = tmp_path / "opencode-ai"
    for f in pin.files:
        (copy / f.path).parent.mkdir(parents=True, exist_ok=True)
        (copy / f.path).write_bytes((OPENCODE / f.path).read_bytes())
        (copy / f.path).chmod(f.mode)
    verify_tree(copy, manifest)
    with (copy / entry).open("r+b") as fh:
        fh.seek(-100, os.SEEK_END)
        b = fh.read(1)
        fh.seek(-100, os.SEEK_END)
        fh.write(bytes([b[0] ^ 1]))
    with pytest.raises(PinMismatch, match=f"{entry}: sha256"):
        verify_tree(copy, manifest)
