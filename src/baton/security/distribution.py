"""Where a profile's pin lives, which installed tree it covers, verify-before-launch.

The glue between :class:`~baton.agent_profile.AgentProfile` and
:mod:`baton.security.pinning`, used by ``baton pin``/``verify``/``doctor`` and by the
runner before a launch:

* a profile's manifest is ``profile.pin`` when set, else ``<state_dir>/pins/<name>.json``;
* its installed tree is found from the command: ``argv[0]`` is looked up on ``PATH``,
  resolved through links (npm's ``.bin`` shims), and the tree root is the nearest
  ancestor holding ``package.json`` (the npm package), else the executable's directory;
* a profile is *pinned* when ``profile.pin`` is set (then a missing manifest refuses
  the launch) or when a manifest exists at the default place (the user ran ``baton
  pin``). :func:`verify_before_launch` verifies a pinned profile's tree and returns
  the absolute entry point to launch, so the process started is the file verified;
* otherwise a profile installed by ``baton agents install`` (:mod:`baton.security.agent_tools`)
  is pinned by the install's own manifest, and its verified entry point runs ahead of
  anything on ``PATH``;
* a ``cursor-sdk`` profile whose command is the bundled bridge (``cursor-sdk-bridge``)
  runs the bridge of the installed ``cursor-sdk`` wheel, verified against baton's own
  pin of that release (:mod:`baton.security.bridge_pin`), or against the user's manifest
  when ``baton pin`` made one.
"""

from __future__ import annotations

import json
import shutil
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Final

from baton.agent_profile import PYTHON_PLACEHOLDER, AgentProfile
from baton.errors import AgentNotInstalled, ConfigError, SecurityError
from baton.fsutil import atomic_write
from baton.security.bridge_pin import (
    BRIDGE_ENTRY,
    NODE,
    bridge_status,
    check_user_pin,
    is_bundled,
    locate_bundled_bridge,
    verify_bundled_bridge,
)
from baton.security.manifest import Manifest, platform_key
from baton.security.paths import sanitize_id
from baton.security.pinning import verify_tree

__all__ = [
    "Install",
    "VerifiedInstall",
    "load_manifest",
    "locate_install",
    "manifest_path",
    "pin_status",
    "save_manifest",
    "verify_before_launch",
]

_PACKAGE_ROOT_DEPTH: Final = 4
"""How many directories above the executable to look for ``package.json``."""
_MAX_MANIFEST_BYTES: Final = 64 << 20


def manifest_path(profile: AgentProfile, state_dir: Path) -> Path:
    """``profile.pin`` when set, else ``<state_dir>/pins/<profile>.json``."""
    if profile.pin:
        return Path(profile.pin).expanduser()
    return state_dir / "pins" / f"{sanitize_id(profile.name)}.json"


def load_manifest(path: Path) -> Manifest | None:
    """The manifest at ``path``, ``None`` when there is none; :class:`ConfigError` if bad."""
    try:
        if path.stat().st_size > _MAX_MANIFEST_BYTES:
            raise ConfigError(f"pin manifest {path} is implausibly large")
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        return None
    except (OSError, UnicodeDecodeError) as exc:
        raise ConfigError(f"pin manifest {path} cannot be read: {exc}") from None
    try:
        return Manifest.from_json(text)
    except ConfigError as exc:
        raise ConfigError(f"{path}: {exc}") from None


def save_manifest(path: Path, manifest: Manifest) -> None:
    """Write atomically (temp file + rename), so a reader never sees half a manifest."""
    path.parent.mkdir(parents=True, exist_ok=True)
    atomic_write(path, manifest.to_json().encode("utf-8"), mode=0o644)


@dataclass(frozen=True, slots=True)
class Install:
    """An installed agent tree as found from the profile's command."""

    root: Path
    entrypoint: str
    """POSIX path of the executable relative to ``root``."""
    version: str


def locate_install(profile: AgentProfile, environ: Mapping[str, str]) -> Install:
    """Find the tree the profile's command runs from (see the module docstring)."""
    if profile.command and profile.command[0] == PYTHON_PLACEHOLDER:
        raise ConfigError(f"profile {profile.name!r} runs inside baton's own Python; pin baton")
    if not profile.command:
        raise ConfigError(f"profile {profile.name!r} has no command")
    if is_bundled(profile.command):
        bridge = locate_bundled_bridge()
        return Install(root=bridge.root, entrypoint=NODE, version=bridge.version)
    found = shutil.which(profile.command[0], path=environ.get("PATH", ""))
    if found is None:
        raise AgentNotInstalled(
            f"{profile.command[0]} is not on PATH"
            + (f" (install: {profile.install_hint})" if profile.install_hint else "")
        )
    exe = Path(found).resolve()
    root = exe.parent
    for candidate in list(exe.parents)[:_PACKAGE_ROOT_DEPTH]:
        if (candidate / "package.json").is_file():
            root = candidate
            break
    version = "unknown"
    pkg = root / "package.json"
    if pkg.is_file():
        try:
            data = json.loads(pkg.read_text(encoding="utf-8"))
        except (OSError, UnicodeDecodeError, ValueError):
            data = None
        if isinstance(data, dict) and isinstance(data.get("version"), str):
            version = data["version"]
    return Install(root=root, entrypoint=exe.relative_to(root).as_posix(), version=version)


def pin_status(profile: AgentProfile, state_dir: Path) -> str:
    """One line for ``baton doctor`` (does not hash anything)."""
    path = manifest_path(profile, state_dir)
    if is_bundled(profile.command) and not path.exists():
        return bridge_status()
    try:
        manifest = load_manifest(path)
    except ConfigError as exc:
        return f"manifest invalid: {exc}"
    if manifest is None:
        return "required but manifest missing" if profile.pin else "not pinned"
    pin = manifest.platforms.get(platform_key())
    if pin is None:
        return f"pinned {manifest.version}, but not for {platform_key()}"
    return (
        f"pinned {manifest.version}: {len(pin.files)} files, closure {pin.closure_sha256[:12]}…, "
        f"entrypoint {pin.entrypoint} (run `baton verify {profile.name}`)"
    )


@dataclass(frozen=True, slots=True)
class VerifiedInstall:
    """A pinned tree that just verified: launch ``executable``, not a PATH lookup."""

    root: Path
    executable: Path
    manifest: Manifest
    launch_args: tuple[str, ...] = ()
    """Arguments that come before the profile's own (the bundled bridge's script)."""


def verify_before_launch(
    profile: AgentProfile,
    state_dir: Path,
    environ: Mapping[str, str],
    *,
    root: Path | None = None,
) -> VerifiedInstall | None:
    """Verify a pinned profile's installed tree; ``None`` when the profile is not pinned.

    Raises :class:`~baton.security.pinning.PinMismatch` (a ``SecurityError``) naming
    each difference, or :class:`SecurityError` when the pin is required but missing or
    the command no longer resolves to the pinned entry point.
    """
    path = manifest_path(profile, state_dir)
    manifest = load_manifest(path)
    if manifest is None:
        if profile.pin:
            raise SecurityError(
                f"profile {profile.name!r} requires the pin {path}, which does not exist"
            )
        if root is None and is_bundled(profile.command):
            bridge, pinned = verify_bundled_bridge()
            return VerifiedInstall(
                root=bridge.root,
                executable=bridge.root / NODE,
                manifest=pinned,
                launch_args=(str(bridge.root / BRIDGE_ENTRY),),
            )
        if root is None:
            return _verify_tools_install(profile, environ)
        return None
    pin = manifest.for_platform()
    if root is None:
        install = locate_install(profile, environ)
        if install.entrypoint != pin.entrypoint:
            raise SecurityError(
                f"{profile.command[0]} resolves to {install.entrypoint} in its tree, but the pin's "
                f"entrypoint is {pin.entrypoint}"
            )
        root = install.root
    if is_bundled(profile.command):
        check_user_pin(manifest)
    verify_tree(root, manifest)
    extra = (str(root / BRIDGE_ENTRY),) if is_bundled(profile.command) else ()
    return VerifiedInstall(
        root=root, executable=root / pin.entrypoint, manifest=manifest, launch_args=extra
    )


def _verify_tools_install(
    profile: AgentProfile, environ: Mapping[str, str]
) -> VerifiedInstall | None:
    """A ``baton agents install`` of the profile, verified against its own pin."""
    from baton.security.agent_installs import installed_agent

    install = installed_agent(profile, environ)
    if install is None:
        return None
    manifest = load_manifest(install.manifest_path)
    if manifest is None:
        raise SecurityError(
            f"{profile.name} in {install.root} has no pin {install.manifest_path}; "
            f"reinstall it with `baton agents install {profile.name}`"
        )
    pin = manifest.for_platform()
    if pin.entrypoint != install.entrypoint:
        raise SecurityError(
            f"{install.root}: the install record names {install.entrypoint}, but its pin's "
            f"entrypoint is {pin.entrypoint}"
        )
    verify_tree(install.tree, manifest)
    return VerifiedInstall(root=install.tree, executable=install.executable, manifest=manifest)
