"""What every part of :class:`~baton.fcop_port.port.FcopPort` shares.

The port is assembled from one mixin per concept (reads, T1, evidence,
transitions); each builds on this base: the opened ``fcop.Project``, baton's
O(1) lifecycle writer when the pinned ``fcop`` is installed, who may authorize,
and the two ways of calling Core with its errors mapped (:meth:`PortBase._call`,
:meth:`PortBase._fast`). Recovery takes a ``PortBase``, so it needs no part of
the port above this.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from baton.fcop_errors import WorkspaceNotInitialized
from baton.fcop_port.authority import TrustedAuthority
from baton.fcop_port.calls import fcop_errors, prime_fcop
from baton.fcop_port.lifecycle import Lifecycle, open_writer
from baton.fcop_port.workspace import inspect_workspace_kind, refuse_legacy

__all__ = ["PortBase"]


class PortBase:
    """One opened FCoP 4.0 workspace: ``fcop.Project``, the O(1) writer, the call seams."""

    def __init__(
        self,
        root: Path,
        *,
        authority: TrustedAuthority | None = None,
        human: str = "ADMIN",
        read_attempts: int = 8,
        read_backoff: float = 0.002,
        sleep: Callable[[float], None] = time.sleep,
    ) -> None:
        prime_fcop()
        import fcop

        self.root = Path(root).resolve()
        status = inspect_workspace_kind(self.root)
        refuse_legacy(status)
        if status.kind == "absent":
            raise WorkspaceNotInitialized(f"{self.root}: no FCoP workspace (run `baton init`)")
        self.authority = authority
        self.human = human
        trusted = authority.trusted_profiles if authority else {}
        with fcop_errors():
            self._project: Any = fcop.Project(self.root, trusted_profiles=trusted)
            # T1, T2 and TASK reads in O(1) of history (docs/lifecycle.md); fcop.Project otherwise.
            self._lifecycle: Lifecycle | None = open_writer(self.root, trusted_profiles=trusted)
        self.workspace_id: str = status.workspace_id or ""
        self.profiles = status.profiles
        self._read_attempts = max(1, read_attempts)
        self._read_backoff = read_backoff
        self._sleep = sleep

    # ---------------------------------------------------------------- basics

    @property
    def fcop_dir(self) -> Path:
        return self.root / "fcop"

    def stage_dir(self, stage: str) -> Path:
        return self.root / "fcop" / "_lifecycle" / stage

    @property
    def lifecycle(self) -> Lifecycle | None:
        """baton's O(1) T1/T2 writer (``fcop_port.lifecycle``), None with another fcop."""
        return self._lifecycle

    @property
    def can_authorize(self) -> bool:
        """True when T4–T7 can succeed: Profile adopted and our evaluator registered."""
        return self.authority is not None and self.authority.profile_ref in self.profiles

    def _call(self, name: str, **kwargs: Any) -> Any:
        with fcop_errors():
            return getattr(self._project, name)(**kwargs)

    def _fast(self, name: str, call: Callable[[Any], Any], **fallback: Any) -> Any:
        """``call(lifecycle)`` when the O(1) writer is on, else ``fcop.Project.<name>``."""
        if self._lifecycle is None:
            return self._call(name, **fallback)
        with fcop_errors():
            return call(self._lifecycle)
