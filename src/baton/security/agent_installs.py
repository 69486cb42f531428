"""Agents in baton's tools dir: where they are and what was installed (the read side).

``baton agents install`` (:mod:`baton.security.agent_tools`) writes ``<tools>/<name>/``
with ``install.json`` and ``pin.json``; this module finds and reads them, for the launch
check (:func:`baton.security.distribution.verify_before_launch`) and for ``baton agents``.
Kept apart from the installer so that the launch path does not import npm handling (and
the installer can build on the distribution checks without a cycle).
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Final

from baton.agent_profile import AgentProfile
from baton.jsontypes import JsonObject
from baton.security.paths import sanitize_id

__all__ = [
    "INSTALL_RECORD",
    "PIN_FILE",
    "TOOLS_ENV",
    "InstalledAgent",
    "installed_agent",
    "read_install",
    "tools_dir",
]

TOOLS_ENV: Final = "BATON_TOOLS_DIR"
INSTALL_RECORD: Final = "install.json"
PIN_FILE: Final = "pin.json"


def tools_dir(environ: Mapping[str, str]) -> Path:
    """Where ``baton agents install`` puts agents (see the module docstring)."""
    override = environ.get(TOOLS_ENV)
    if override:
        return Path(override).expanduser().absolute()
    data = environ.get("XDG_DATA_HOME") or str(
        Path(environ.get("HOME") or Path.home()) / ".local" / "share"
    )
    return Path(data).expanduser() / "baton" / "tools"


@dataclass(frozen=True, slots=True)
class InstalledAgent:
    """One agent in the tools dir."""

    name: str
    package: str
    version: str
    root: Path
    entrypoint: str
    """POSIX path of the executable, relative to :attr:`tree`."""

    @property
    def tree(self) -> Path:
        """The pinned tree: ``<root>/node_modules``."""
        return self.root / "node_modules"

    @property
    def executable(self) -> Path:
        return self.tree / self.entrypoint

    @property
    def manifest_path(self) -> Path:
        return self.root / PIN_FILE

    def record(self) -> JsonObject:
        return {
            "profile": self.name,
            "package": self.package,
            "version": self.version,
            "entrypoint": self.entrypoint,
        }


def installed_agent(profile: AgentProfile, environ: Mapping[str, str]) -> InstalledAgent | None:
    """The tools-dir install of ``profile``'s package, or ``None``.

    The install made for the profile's own name comes first; a profile that extends a
    built-in one (``claude-local``) uses the install of the same package and version. An
    install of another package (the profile was changed since) does not count.
    """
    tools = tools_dir(environ)
    own = read_install(tools / sanitize_id(profile.name), profile)
    if own is not None or profile.package is None:
        return own
    try:
        candidates = sorted(p for p in tools.iterdir() if not p.name.startswith("."))
    except OSError:
        return None
    for root in candidates:
        install = read_install(root, profile)
        if install is not None and install.version == profile.version:
            return install
    return None


def read_install(root: Path, profile: AgentProfile) -> InstalledAgent | None:
    """The install recorded in ``root`` for ``profile``'s package, or ``None``."""
    try:
        data = json.loads((root / INSTALL_RECORD).read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, ValueError):
        return None
    if not isinstance(data, dict):
        return None
    fields = {k: data.get(k) for k in ("package", "version", "entrypoint")}
    if not all(isinstance(v, str) and v for v in fields.values()):
        return None
    if profile.package is not None and fields["package"] != profile.package:
        return None
    entry = str(fields["entrypoint"])
    if entry.startswith("/") or ".." in entry.split("/"):
        return None
    return InstalledAgent(
        name=profile.name,
        package=str(fields["package"]),
        version=str(fields["version"]),
        root=root,
        entrypoint=entry,
    )
