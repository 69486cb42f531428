"""Every bound intake applies, in one value object (the worker receives it as JSON).

The defaults are sized from real FCoP 4.0 envelopes: a TASK written by Core is
about 1 KB of front matter plus ~300 bytes per lifecycle transition, nests four
collections deep (mapping → ``transitions`` → transition → ``evidence_ref``) and
uses no YAML anchors. PyYAML's pure-Python parser, which Core uses, needs ~10 s
for 700 KB of front matter on this class of machine, so the front matter is
capped well below the file cap (32 KiB ≈ 100 transitions).
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, fields
from typing import Any

__all__ = ["DEFAULT_LIMITS", "IntakeLimits"]

KiB = 1024
MiB = 1024 * KiB


@dataclass(frozen=True, slots=True, kw_only=True)
class IntakeLimits:
    """Bounds for reading one untrusted FCoP file."""

    max_file_bytes: int = 1 * MiB
    """A TASK (or REPORT, REVIEW, ISSUE) larger than this is refused unread."""
    max_json_bytes: int = 256 * KiB
    """An operation fact or receipt (``fcop/operations/*.json``, ``fcop.json``)."""
    max_frontmatter_bytes: int = 32 * KiB
    max_depth: int = 32
    """Nested collections (Core's own TASKs need 4)."""
    max_anchors: int = 32
    max_aliases: int = 64
    max_nodes: int = 20_000
    """YAML nodes after alias expansion (what a consumer walking the value sees)."""
    max_expanded_chars: int = 2 * MiB
    """Scalar characters after alias expansion."""
    parse_deadline_s: float = 1.5
    """CPU seconds the worker may spend on one file; past them it is killed. CPU, not wall
    time, so a loaded machine does not refuse a good file (a Core TASK takes ~2 ms)."""
    parse_wall_s: float = 20.0
    """Wall-clock cap of one screen (a starved or stopped worker); past it, killed too."""
    worker_address_space: int = 384 * MiB
    """``RLIMIT_AS`` of the worker process once it has imported its parsers."""
    settle_s: float = 1.0
    """A file not proven complete is read only once unchanged (ctime) for this long."""
    max_settle_s: float = 30.0
    """A file still changing after this long is refused (``unstable``)."""

    def to_json(self) -> dict[str, Any]:  # JSON out: the parse worker's argument
        return asdict(self)

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> IntakeLimits:  # JSON in: the worker's argument
        names = {f.name for f in fields(cls)}
        return cls(**{k: v for k, v in data.items() if k in names})


DEFAULT_LIMITS = IntakeLimits()
