"""Agents baton installs itself: the tools dir, ``npm install -E``, the pin, the lookup.

``baton agents install NAME`` installs the npm package a built-in profile names
(``profile.package`` at exactly ``profile.version``) into ``<tools>/<name>/``::

    <tools>/<name>/
        install.json      what was installed: profile, package, version, entry point
        pin.json          the baton.pin/v1 manifest of node_modules (every file's SHA-256)
        node_modules/     npm --prefix <tools>/<name> --no-bin-links

``<tools>`` is ``$BATON_TOOLS_DIR``, else ``$XDG_DATA_HOME/baton/tools`` (by default
``~/.local/share/baton/tools``). The install is staged in a sibling directory and swapped in
by rename, so a failed install leaves the previous one working. The whole ``node_modules``
tree is pinned, not only the launcher: claude-agent-acp runs a native binary from another
package, and a pin of the launcher alone would leave it unchecked. npm is run with
``--no-bin-links`` (pins refuse symbolic links) and hard links inside the tree (OpenCode's
postinstall links its binary) are replaced by private copies (pins refuse those too).

At launch, a profile with a tools install runs that install's verified entry point
(:func:`baton.security.distribution.verify_before_launch`), ahead of anything on ``PATH``.

Decisions: exact versions only (npm on Node 20 otherwise silently picks older releases
whose ``engines`` allow it); a version mismatch after ``npm install`` is an error, not a
warning; an unreachable registry is its own error (:class:`RegistryUnreachable`) so that
callers (the test tier's ``scripts/install-agents``) can tell "offline" from "broken".
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import re
import shutil
import stat
import subprocess
import tempfile
from collections.abc import Callable, Iterator, Mapping
from pathlib import Path
from typing import Any, Final

from baton.agent_profile import AgentProfile
from baton.errors import AgentError, AgentNotInstalled, ConfigError
from baton.fsutil import atomic_write
from baton.security.agent_installs import (
    INSTALL_RECORD,
    PIN_FILE,
    InstalledAgent,
    read_install,
    tools_dir,
)
from baton.security.distribution import load_manifest, save_manifest
from baton.security.paths import sanitize_id
from baton.security.pinning import pin_tree

__all__ = [
    "AgentInstallError",
    "RegistryUnreachable",
    "install_agent",
    "node_version",
]

NPM_TIMEOUT_SECONDS: Final = 900.0

_UNREACHABLE = re.compile(
    r"ENOTFOUND|EAI_AGAIN|ECONNREFUSED|ECONNRESET|ETIMEDOUT|ENETUNREACH|EHOSTUNREACH|"
    r"network request to .* failed|getaddrinfo|request to .* failed, reason",
    re.IGNORECASE,
)

Runner = Callable[..., subprocess.CompletedProcess[str]]


class AgentInstallError(AgentError):
    """``baton agents install`` could not install or pin the agent."""


class RegistryUnreachable(AgentInstallError):
    """npm could not reach its registry (offline, proxy, DNS)."""


def node_version(environ: Mapping[str, str], run: Runner = subprocess.run) -> str | None:
    """``node --version`` on ``PATH`` (``v20.20.2``), or ``None`` without node."""
    node = shutil.which("node", path=environ.get("PATH", os.defpath))
    if node is None:
        return None
    try:
        done = run([node, "--version"], capture_output=True, text=True, timeout=30, check=False)
    except (OSError, subprocess.TimeoutExpired):
        return None
    return done.stdout.strip() or None


@contextlib.contextmanager
def _locked(tools: Path) -> Iterator[None]:
    tools.mkdir(parents=True, exist_ok=True)
    with open(tools / ".lock", "a+") as fh:
        fcntl.flock(fh.fileno(), fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(fh.fileno(), fcntl.LOCK_UN)


def install_agent(
    profile: AgentProfile,
    environ: Mapping[str, str],
    *,
    tools: Path | None = None,
    run: Runner = subprocess.run,
    log: Callable[[str], None] = lambda _line: None,
) -> InstalledAgent:
    """Install and pin ``profile``'s package (idempotent: a verified install is kept).

    Raises :class:`ConfigError` for a profile without a package, :class:`AgentNotInstalled`
    without npm, :class:`RegistryUnreachable` offline and :class:`AgentInstallError` for
    any other failure (npm's error, a version mismatch, an unpinnable tree).
    """
    spec = profile.package_spec
    if spec is None or profile.package is None or profile.version is None:
        raise ConfigError(
            f"profile {profile.name!r} names no npm package and version; install it yourself "
            + (f"({profile.install_hint})" if profile.install_hint else "and put it on PATH")
        )
    npm = shutil.which("npm", path=environ.get("PATH", os.defpath))
    if npm is None:
        raise AgentNotInstalled("npm is not on PATH: install Node.js (20 or newer) first")
    base = tools if tools is not None else tools_dir(environ)
    name = sanitize_id(profile.name)
    with _locked(base):
        current = read_install(base / name, profile)
        if current is not None and current.version == profile.version and _pinned(current):
            log(f"{profile.name}: {spec} is already installed and pinned in {current.root}")
            return current
        staging = Path(tempfile.mkdtemp(prefix=f".staging-{name}-", dir=base))
        try:
            installed = _install_into(staging, profile, npm, environ, run, log)
            _swap(base / name, staging)
        except BaseException:
            shutil.rmtree(staging, ignore_errors=True)
            raise
    return InstalledAgent(
        name=profile.name,
        package=installed.package,
        version=installed.version,
        root=base / name,
        entrypoint=installed.entrypoint,
    )


def _pinned(install: InstalledAgent) -> bool:
    try:
        return load_manifest(install.manifest_path) is not None and install.executable.is_file()
    except ConfigError:
        return False


def _install_into(
    staging: Path,
    profile: AgentProfile,
    npm: str,
    environ: Mapping[str, str],
    run: Runner,
    log: Callable[[str], None],
) -> InstalledAgent:
    assert profile.package is not None and profile.version is not None
    spec = f"{profile.package}@{profile.version}"
    # A package.json of our own keeps npm from walking up into an enclosing project.
    (staging / "package.json").write_text(
        json.dumps({"name": f"baton-tools-{sanitize_id(profile.name)}", "private": True}) + "\n"
    )
    argv = [
        npm,
        "install",
        "-E",
        spec,
        "--prefix",
        str(staging),
        "--no-bin-links",
        "--no-audit",
        "--no-fund",
        "--include=optional",
        "--loglevel=error",
    ]
    log(f"{profile.name}: npm install -E {spec}")
    try:
        done = run(
            argv,
            capture_output=True,
            text=True,
            timeout=NPM_TIMEOUT_SECONDS,
            check=False,
            env=dict(environ),
            cwd=str(staging),
        )
    except subprocess.TimeoutExpired:
        raise AgentInstallError(
            f"npm install {spec} did not finish within {NPM_TIMEOUT_SECONDS:g}s"
        ) from None
    except OSError as exc:
        raise AgentInstallError(f"npm could not be started: {exc}") from None
    if done.returncode != 0:
        text = (done.stderr or "") + (done.stdout or "")
        tail = " ".join(text.strip().splitlines()[-6:])[:800]
        if _UNREACHABLE.search(text):
            raise RegistryUnreachable(f"npm could not reach its registry for {spec}: {tail}")
        raise AgentInstallError(f"npm install {spec} failed (exit {done.returncode}): {tail}")
    package_dir = staging / "node_modules" / profile.package
    meta = _package_json(package_dir)
    version = meta.get("version")
    if version != profile.version:
        raise AgentInstallError(
            f"npm installed {profile.package}@{version}, not the pinned {profile.version}"
        )
    entry = _entrypoint(meta, profile)
    executable = package_dir / entry
    if not executable.is_file():
        raise AgentInstallError(f"{profile.package} has no entry point {entry}")
    _make_bins_executable(staging / "node_modules")
    _break_hard_links(staging / "node_modules")
    rel = f"{profile.package}/{Path(entry).as_posix()}".replace("/./", "/")
    manifest = pin_tree(staging / "node_modules", rel, agent=profile.name, version=profile.version)
    save_manifest(staging / PIN_FILE, manifest)
    installed = InstalledAgent(
        name=profile.name,
        package=profile.package,
        version=profile.version,
        root=staging,
        entrypoint=rel,
    )
    atomic_write(
        staging / INSTALL_RECORD,
        (json.dumps(installed.record(), indent=2) + "\n").encode(),
        mode=0o644,
    )
    log(f"{profile.name}: pinned {len(manifest.for_platform().files)} files")
    return installed


def _package_json(package_dir: Path) -> dict[str, Any]:
    try:
        data = json.loads((package_dir / "package.json").read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, ValueError) as exc:
        raise AgentInstallError(f"{package_dir} has no readable package.json: {exc}") from None
    if not isinstance(data, dict):
        raise AgentInstallError(f"{package_dir}/package.json is not an object")
    return data


def _entrypoint(meta: Mapping[str, Any], profile: AgentProfile) -> str:
    """The package's executable for the profile's command (``bin`` of package.json)."""
    bins = meta.get("bin")
    command = Path(profile.command[0]).name if profile.command else ""
    if isinstance(bins, str):
        return bins.removeprefix("./")
    if isinstance(bins, Mapping):
        chosen = bins.get(command)
        if chosen is None and len(bins) == 1:
            chosen = next(iter(bins.values()))
        if isinstance(chosen, str):
            return chosen.removeprefix("./")
    raise AgentInstallError(
        f"{profile.package} declares no executable named {command!r} in its package.json bin"
    )


def _packages(node_modules: Path) -> Iterator[Path]:
    """Every package directory under ``node_modules`` (scoped and nested ones too)."""
    if not node_modules.is_dir():
        return
    for entry in sorted(node_modules.iterdir()):
        if entry.name.startswith(".") or entry.is_symlink() or not entry.is_dir():
            continue
        candidates = sorted(entry.iterdir()) if entry.name.startswith("@") else [entry]
        for package in candidates:
            if package.is_dir() and not package.is_symlink():
                yield package
                yield from _packages(package / "node_modules")


def _make_bins_executable(node_modules: Path) -> None:
    """npm makes ``bin`` targets executable when it links them; ``--no-bin-links`` does not."""
    for package in _packages(node_modules):
        try:
            bins = json.loads((package / "package.json").read_text(encoding="utf-8")).get("bin")
        except (OSError, UnicodeDecodeError, ValueError, AttributeError):
            continue
        targets = (
            [bins]
            if isinstance(bins, str)
            else list(bins.values())
            if isinstance(bins, dict)
            else []
        )
        for target in targets:
            if not isinstance(target, str):
                continue
            path = (package / target).resolve()
            if path.is_file() and path.is_relative_to(package.resolve()):
                path.chmod(stat.S_IMODE(path.stat().st_mode) | 0o111)


def _break_hard_links(tree: Path) -> None:
    """Replace every file that has other hard links with a private copy (pins refuse links)."""
    for dirpath, _dirs, files in os.walk(tree):
        for name in files:
            path = Path(dirpath) / name
            st = path.lstat()
            if stat.S_ISREG(st.st_mode) and st.st_nlink > 1:
                copy = path.with_name(f".{name}.baton-copy")
                shutil.copy2(path, copy)
                os.replace(copy, path)


def _swap(target: Path, staging: Path) -> None:
    """Put ``staging`` in place of ``target`` by renames (the old tree goes last)."""
    old: Path | None = None
    if target.exists():
        old = target.with_name(f".old-{target.name}-{os.getpid()}")
        shutil.rmtree(old, ignore_errors=True)
        os.replace(target, old)
    os.replace(staging, target)
    if old is not None:
        shutil.rmtree(old, ignore_errors=True)
