"""The pinned-distribution manifest format, ``baton.pin/v1``.

A manifest pins an agent's whole execution closure, not its launcher: an npm package
or a vendor archive is a runtime (bundled node, an entry script, dynamically loaded
chunks, native addons, workers), and pinning one executable leaves everything it loads
unpinned. So a manifest lists, per platform, *every* file of the installed tree::

    {
      "format": "baton.pin/v1",
      "agent": "opencode",
      "version": "1.18.33",
      "platforms": {
        "linux-x86_64": {
          "archive_sha256": null,
          "closure_sha256": "…",
          "entrypoint": "bin/opencode.exe",
          "allow_external_hardlinks": true,
          "files": [{"path": "bin/opencode.exe", "mode": "0755", "size": 185354368,
                     "sha256": "…"}, …]
        }
      }
    }

``mode`` holds the permission bits as four octal digits. ``archive_sha256`` is the
digest of the distribution archive when the pin came from one (``null`` when the tree
was pinned in place). ``closure_sha256`` is :func:`closure_digest` of ``files``: the
SHA-256 of the canonical listing (one line ``path NUL mode NUL size NUL sha256 LF`` per
file, sorted by the UTF-8 bytes of the path); it names the content-addressed store
directory. ``allow_external_hardlinks`` records that the tree was pinned in place
although some files have other links outside it (npm's ``opencode-ai`` postinstall
hard-links the platform binary into ``bin/``); it is ``false`` unless pinned that way.

Parsing is strict: unknown fields, bad digests, unsafe paths, duplicates, an entry
point that is not a listed file, or a closure digest that does not match the listing
are refused with :class:`~baton.errors.ConfigError`.
"""

from __future__ import annotations

import hashlib
import json
import platform as _platform
import re
import sys
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import PurePosixPath
from types import MappingProxyType
from typing import Any, Final

from baton.errors import ConfigError
from baton.jsontypes import JsonObject

__all__ = [
    "FORMAT",
    "FileEntry",
    "Manifest",
    "PlatformPin",
    "check_member_path",
    "closure_digest",
    "platform_key",
]

FORMAT: Final = "baton.pin/v1"

_SHA256 = re.compile(r"[0-9a-f]{64}")
_MODE = re.compile(r"0[0-7]{3}")
_UNSAFE_CHARS = re.compile(r"[\x00-\x1f\x7f\\]")


def platform_key() -> str:
    """This machine's platform key: ``linux-x86_64``, ``darwin-arm64`` …"""
    machine = _platform.machine().lower()
    machine = {"amd64": "x86_64", "x64": "x86_64", "aarch64": "arm64"}.get(machine, machine)
    system = "windows" if sys.platform.startswith("win") else sys.platform.rstrip("0123456789")
    return f"{system}-{machine}"


def check_member_path(path: str) -> str:
    """Validate a tree-relative POSIX path; return it unchanged or raise ``ValueError``.

    Refused: empty, absolute, ``.``/``..``/empty components, backslashes, control
    characters. Used for manifest entries and for archive members alike.
    """
    if not path:
        raise ValueError("empty path")
    if _UNSAFE_CHARS.search(path):
        raise ValueError(f"path {path!r} contains control characters or a backslash")
    if path.startswith("/"):
        raise ValueError(f"path {path!r} is absolute")
    parts = path.split("/")
    if any(p in ("", ".", "..") for p in parts):
        raise ValueError(f"path {path!r} has an empty, '.' or '..' component")
    return path


@dataclass(frozen=True, slots=True)
class FileEntry:
    """One regular file of a pinned tree."""

    path: str
    mode: int
    """Permission bits only (``0o755``); set-id and sticky bits are never pinned."""
    size: int
    sha256: str

    def canonical_line(self) -> bytes:
        return f"{self.path}\0{self.mode:04o}\0{self.size}\0{self.sha256}\n".encode()

    def to_json(self) -> JsonObject:
        return {
            "path": self.path,
            "mode": f"{self.mode:04o}",
            "size": self.size,
            "sha256": self.sha256,
        }


def closure_digest(files: Iterable[FileEntry]) -> str:
    """SHA-256 over the canonical listing of ``files`` (sorted by UTF-8 path bytes)."""
    h = hashlib.sha256()
    for entry in sorted(files, key=lambda e: e.path.encode("utf-8", "surrogatepass")):
        h.update(entry.canonical_line())
    return h.hexdigest()


@dataclass(frozen=True, slots=True)
class PlatformPin:
    """The pinned closure of one platform."""

    archive_sha256: str | None
    closure_sha256: str
    entrypoint: str
    files: tuple[FileEntry, ...]
    allow_external_hardlinks: bool = False

    def by_path(self) -> dict[str, FileEntry]:
        return {f.path: f for f in self.files}

    def to_json(self) -> JsonObject:
        ordered = sorted(self.files, key=lambda e: e.path.encode("utf-8", "surrogatepass"))
        return {
            "archive_sha256": self.archive_sha256,
            "closure_sha256": self.closure_sha256,
            "entrypoint": self.entrypoint,
            "allow_external_hardlinks": self.allow_external_hardlinks,
            "files": [f.to_json() for f in ordered],
        }


@dataclass(frozen=True, slots=True)
class Manifest:
    """A versioned pin of one agent's distribution, per platform."""

    agent: str
    version: str
    platforms: Mapping[str, PlatformPin]

    def for_platform(self, key: str | None = None) -> PlatformPin:
        """The pin for ``key`` (default: this machine), or :class:`ConfigError`."""
        key = key or platform_key()
        pin = self.platforms.get(key)
        if pin is None:
            known = ", ".join(sorted(self.platforms)) or "none"
            raise ConfigError(
                f"pin manifest for {self.agent!r} has no entry for platform {key} (has: {known})"
            )
        return pin

    def with_platform(self, key: str, pin: PlatformPin) -> Manifest:
        merged = dict(self.platforms)
        merged[key] = pin
        return Manifest(self.agent, self.version, MappingProxyType(merged))

    def to_dict(self) -> JsonObject:
        return {
            "format": FORMAT,
            "agent": self.agent,
            "version": self.version,
            "platforms": {k: self.platforms[k].to_json() for k in sorted(self.platforms)},
        }

    def to_json(self) -> str:
        return json.dumps(self.to_dict(), indent=2, ensure_ascii=False) + "\n"

    @classmethod
    def from_json(cls, text: str) -> Manifest:
        """Parse and validate a manifest; :class:`ConfigError` says what is wrong."""
        try:
            data = json.loads(text)
        except json.JSONDecodeError as exc:
            raise ConfigError(f"pin manifest is not valid JSON (line {exc.lineno})") from None
        try:
            return _parse_manifest(data)
        except (TypeError, ValueError, KeyError) as exc:
            raise ConfigError(f"invalid pin manifest: {exc}") from None


def _fields(
    obj: Any, where: str, required: set[str], optional: tuple[str, ...] = ()
) -> dict[str, Any]:
    if not isinstance(obj, dict):
        raise TypeError(f"{where} must be an object")
    missing = required - obj.keys()
    if missing:
        raise KeyError(f"{where} lacks {', '.join(sorted(missing))}")
    unknown = obj.keys() - required - set(optional)
    if unknown:
        raise ValueError(f"{where} has unknown field(s) {', '.join(sorted(unknown))}")
    return obj


def _str(v: Any, where: str) -> str:
    if not isinstance(v, str):
        raise TypeError(f"{where} must be a string")
    return v


def _digest(v: Any, where: str) -> str:
    if not isinstance(v, str) or not _SHA256.fullmatch(v):
        raise ValueError(f"{where} must be 64 lowercase hex digits")
    return v


def _parse_manifest(data: Any) -> Manifest:
    top = _fields(data, "manifest", {"format", "agent", "version", "platforms"})
    if top["format"] != FORMAT:
        raise ValueError(f"format is {top['format']!r}, expected {FORMAT!r}")
    agent = _str(top["agent"], "agent")
    version = _str(top["version"], "version")
    platforms_raw = top["platforms"]
    if not isinstance(platforms_raw, dict) or not platforms_raw:
        raise ValueError("platforms must be a non-empty object")
    platforms: dict[str, PlatformPin] = {}
    for key, raw in platforms_raw.items():
        where = f"platforms.{key}"
        p = _fields(
            raw,
            where,
            {"archive_sha256", "closure_sha256", "entrypoint", "files"},
            ("allow_external_hardlinks",),
        )
        archive = (
            None
            if p["archive_sha256"] is None
            else _digest(p["archive_sha256"], f"{where}.archive_sha256")
        )
        closure = _digest(p["closure_sha256"], f"{where}.closure_sha256")
        entry = check_member_path(_str(p["entrypoint"], f"{where}.entrypoint"))
        allow_links = p.get("allow_external_hardlinks", False)
        if not isinstance(allow_links, bool):
            raise TypeError(f"{where}.allow_external_hardlinks must be a boolean")
        if not isinstance(p["files"], list) or not p["files"]:
            raise ValueError(f"{where}.files must be a non-empty list")
        files: list[FileEntry] = []
        seen: set[str] = set()
        for i, f in enumerate(p["files"]):
            fw = f"{where}.files[{i}]"
            fe = _fields(f, fw, {"path", "mode", "size", "sha256"})
            path = check_member_path(_str(fe["path"], f"{fw}.path"))
            if path in seen:
                raise ValueError(f"{fw}.path {path!r} is listed twice")
            seen.add(path)
            mode = _str(fe["mode"], f"{fw}.mode")
            if not _MODE.fullmatch(mode):
                raise ValueError(f"{fw}.mode must be four octal digits like '0644'")
            size = fe["size"]
            if not isinstance(size, int) or isinstance(size, bool) or size < 0:
                raise ValueError(f"{fw}.size must be a non-negative integer")
            files.append(FileEntry(path, int(mode, 8), size, _digest(fe["sha256"], f"{fw}.sha256")))
        _check_no_file_dir_clash(seen, where)
        if entry not in seen:
            raise ValueError(f"{where}.entrypoint {entry!r} is not one of the pinned files")
        expected = closure_digest(files)
        if expected != closure:
            raise ValueError(
                f"{where}.closure_sha256 does not match its file listing "
                f"(listing digests to {expected})"
            )
        platforms[key] = PlatformPin(archive, closure, entry, tuple(files), allow_links)
    return Manifest(agent, version, MappingProxyType(platforms))


def _check_no_file_dir_clash(paths: set[str], where: str) -> None:
    for path in paths:
        for parent in PurePosixPath(path).parents:
            if str(parent) in paths:
                raise ValueError(f"{where}: {parent} is listed as a file and as a directory")
