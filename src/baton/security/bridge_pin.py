"""The Cursor SDK bridge bundled in the ``cursor-sdk`` wheel: located, verified, launched.

The ``cursor-sdk`` wheel ships a whole runtime under ``cursor_sdk/_vendor/bridge/``: a
Node binary, the bridge's JavaScript, its ``node_modules`` and the ``sdk/v1`` protobuf
contract (2571 files for 1.1.0). Like an npm agent, the unit of trust is that whole tree,
not its launcher (:mod:`baton.security.manifest`). baton pins it *independently of the
install*: :data:`BRIDGE_PINS` holds, per release and platform, the SHA-256 of the tree's
content listing (``path NUL size NUL sha256 LF`` per file, sorted by path: the closure
digest of :mod:`~baton.security.manifest` without the mode bits, which pip leaves to the
umask), computed by baton from the four wheels Cursor published on PyPI. Before every
launch the installed tree is hashed (:func:`~baton.security.pinning.pin_tree`: links,
special files and set-id bits are refused) and its digest compared; a mismatch names the
differing files by the wheel's own ``RECORD`` (a diagnostic only, it proves nothing).

The verified bridge is launched as ``<tree>/bin/node <tree>/dist/bin/cursor-sdk-bridge.js``:
the launcher script is skipped, because it resolves its directory with ``dirname`` from
``PATH``, outside the pin. A profile whose command is another bridge (baton's scripted
one, a build of your own) is launched as given, and ``baton pin`` pins it like any agent.
"""

from __future__ import annotations

import base64
import hashlib
import importlib.util
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from types import MappingProxyType
from typing import Final

from baton.agent_profile import BUNDLED_BRIDGE
from baton.errors import AgentNotInstalled, SecurityError
from baton.security.manifest import FileEntry, Manifest, platform_key
from baton.security.pinning import PinMismatch, pin_tree

__all__ = [
    "BRIDGE_ENTRY",
    "BRIDGE_PINS",
    "BUNDLED_BRIDGE",
    "NODE",
    "BridgeAnchor",
    "BundledBridge",
    "bridge_status",
    "check_user_pin",
    "content_digest",
    "installed_bridge",
    "is_bundled",
    "locate_bundled_bridge",
    "verify_bundled_bridge",
]

NODE: Final = "bin/node"
BRIDGE_ENTRY: Final = "dist/bin/cursor-sdk-bridge.js"


@dataclass(frozen=True, slots=True)
class BridgeAnchor:
    """baton's pin of one release's bridge tree on one platform."""

    files: int
    content_sha256: str
    wheel_sha256: str
    """The SHA-256 of the wheel the digest was computed from (PyPI's published file)."""


BRIDGE_PINS: Mapping[str, Mapping[str, BridgeAnchor]] = MappingProxyType(
    {
        "1.1.0": MappingProxyType(
            {
                "linux-x86_64": BridgeAnchor(
                    2571,
                    "2c2ec389abeef6fba47be8f180e5b8c0a81f13f5e45eae81091b2834822bcd9f",
                    "c8b7296476e6706ef1530f19b822adb89191a49202147331a56a0592e969686c",
                ),
                "linux-arm64": BridgeAnchor(
                    2571,
                    "1521e83ab3736c3ee2f6fe7202387862f346a7796c9a308dd759d9c9d1e08010",
                    "c78342a9f79411dcff1d5ef1396c648edd47f4edc72ddca4165ffdd15ed1a87c",
                ),
                "darwin-x86_64": BridgeAnchor(
                    2571,
                    "9989eafc7f61aaff9930371a1aa6d73aacb48426d0ad8ae5ace15fbb5dfe7519",
                    "49f8bfb882851931ac59b5cf842a546b840d7ad588ec03c12b3e089b49ae020c",
                ),
                "darwin-arm64": BridgeAnchor(
                    2571,
                    "a0af6c07137ee89c1d09ff0e8d78c7849045c398b8985c8354eb8ccd26a65e96",
                    "d0c64423114db76bc9fabd957b0aed9c8c1b06211fe880e66be5898c13fc90d4",
                ),
            }
        )
    }
)
"""Release → platform → anchor (see the module docstring)."""


@dataclass(frozen=True, slots=True)
class BundledBridge:
    """The installed wheel's bridge tree."""

    root: Path
    version: str


def is_bundled(command: Iterable[str]) -> bool:
    """Whether a profile command means the wheel's bundled bridge."""
    return tuple(command)[:1] == (BUNDLED_BRIDGE,)


def content_digest(files: Iterable[FileEntry]) -> str:
    """SHA-256 of ``path NUL size NUL sha256 LF`` per file, sorted by UTF-8 path bytes."""
    h = hashlib.sha256()
    for entry in sorted(files, key=lambda e: e.path.encode("utf-8", "surrogatepass")):
        h.update(f"{entry.path}\0{entry.size}\0{entry.sha256}\n".encode())
    return h.hexdigest()


def locate_bundled_bridge() -> BundledBridge:
    """The bridge tree of the installed ``cursor-sdk``, found without importing it."""
    from importlib.metadata import PackageNotFoundError, version

    hint = "install it with: pip install 'baton[cursor]'"
    try:
        release = version("cursor-sdk")
        spec = importlib.util.find_spec("cursor_sdk")
    except (PackageNotFoundError, ImportError, ValueError):
        raise AgentNotInstalled(f"cursor-sdk is not installed; {hint}") from None
    locations = list(spec.submodule_search_locations or []) if spec is not None else []
    if not locations:
        raise AgentNotInstalled(f"cursor-sdk is not installed; {hint}")
    root = Path(locations[0]) / "_vendor" / "bridge"
    if not (root / BRIDGE_ENTRY).is_file():
        raise AgentNotInstalled(
            f"the cursor-sdk {release} install has no bundled bridge at {root} "
            "(a wheel for another platform, or a source install); reinstall it for this platform"
        )
    return BundledBridge(root=root, version=release)


def _record_problems(bridge: BundledBridge, files: Iterable[FileEntry]) -> list[str]:
    """Files that differ from the wheel's RECORD (naming them is all RECORD is used for)."""
    from importlib.metadata import files as dist_files

    listed: dict[str, tuple[int | None, str | None]] = {}
    prefix = "cursor_sdk/_vendor/bridge/"
    for entry in dist_files("cursor-sdk") or []:
        name = str(entry).replace("\\", "/")
        if not name.startswith(prefix):
            continue
        digest = None
        if entry.hash is not None and entry.hash.mode == "sha256":
            padded = entry.hash.value + "=" * (-len(entry.hash.value) % 4)
            digest = base64.urlsafe_b64decode(padded).hex()
        listed[name[len(prefix) :]] = (entry.size, digest)
    problems: list[str] = []
    seen = set()
    for f in files:
        seen.add(f.path)
        expected = listed.get(f.path)
        if expected is None:
            problems.append(f"{f.path}: not part of the cursor-sdk {bridge.version} wheel")
        elif expected[1] is not None and expected[1] != f.sha256:
            problems.append(f"{f.path}: content differs from the wheel")
    problems += [f"{path}: missing" for path in sorted(set(listed) - seen)]
    return problems


def verify_bundled_bridge() -> tuple[BundledBridge, Manifest]:
    """Hash the installed bridge tree and compare it with baton's pin of that release.

    Raises :class:`AgentNotInstalled` (no ``cursor-sdk``), :class:`SecurityError` (a
    release or platform baton has no pin for, a non-executable node) or
    :class:`~baton.security.pinning.PinMismatch` naming what differs.
    """
    bridge = locate_bundled_bridge()
    key = platform_key()
    anchors = BRIDGE_PINS.get(bridge.version)
    if anchors is None:
        pinned = ", ".join(sorted(BRIDGE_PINS))
        raise SecurityError(
            f"baton has no pin for the bridge of cursor-sdk {bridge.version} (it pins {pinned}); "
            "install the pinned release with: pip install 'baton[cursor]'"
        )
    anchor = anchors.get(key)
    if anchor is None:
        raise SecurityError(
            f"baton has no pin for the cursor-sdk {bridge.version} bridge on {key} "
            f"(pinned: {', '.join(sorted(anchors))})"
        )
    manifest = pin_tree(bridge.root, NODE, agent="cursor-sdk", version=bridge.version)
    pin = manifest.for_platform()
    digest = content_digest(pin.files)
    if digest != anchor.content_sha256:
        problems = _record_problems(bridge, pin.files) or [
            f"{len(pin.files)} files digest to {digest[:16]}…, the pin says "
            f"{anchor.files} files, {anchor.content_sha256[:16]}…"
        ]
        raise PinMismatch(
            f"the cursor-sdk {bridge.version} bridge in {bridge.root} does not match baton's pin: "
            + "; ".join(problems[:8])
            + (f"; and {len(problems) - 8} more" if len(problems) > 8 else ""),
            problems,
        )
    node = pin.by_path()[NODE]
    if not node.mode & 0o100:
        raise SecurityError(f"{bridge.root / NODE} is not executable")
    return bridge, manifest


def check_user_pin(manifest: Manifest) -> None:
    """A ``baton pin`` of the bundled bridge must list baton's pinned tree (no hashing: the
    listing's content digest is compared); :class:`SecurityError` otherwise."""
    anchor = BRIDGE_PINS.get(manifest.version, {}).get(platform_key())
    files = manifest.for_platform().files
    if anchor is None or content_digest(files) != anchor.content_sha256:
        raise SecurityError(
            f"the pin of the bundled bridge lists a tree that is not baton's pin of cursor-sdk "
            f"{manifest.version}; re-pin it after reinstalling: pip install 'baton[cursor]'"
        )


def bridge_status() -> str:
    """One line for ``baton agents``: what baton pins, and what is installed (no hashing)."""
    pinned = ", ".join(f"{v} ({len(p)} platforms)" for v, p in BRIDGE_PINS.items())
    try:
        bridge = locate_bundled_bridge()
    except AgentNotInstalled:
        return f"pinned by baton: cursor-sdk {pinned}; not installed"
    anchor = BRIDGE_PINS.get(bridge.version, {}).get(platform_key())
    if anchor is None:
        return f"installed cursor-sdk {bridge.version} is not one baton pins ({pinned})"
    return (
        f"pinned by baton: cursor-sdk {bridge.version} bridge "
        f"({anchor.files} files, {anchor.content_sha256[:12]}…)"
    )


def installed_bridge() -> BundledBridge | None:
    """The installed wheel's bridge, or ``None`` (for listings: no error)."""
    try:
        return locate_bundled_bridge()
    except AgentNotInstalled:
        return None
