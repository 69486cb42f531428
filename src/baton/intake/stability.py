"""When a file may be read: stable, or proven complete (pure decisions over stat facts).

An editor or ``cat > TASK-x.md`` writes a file in place, in chunks; read between
two chunks, the file is half a task (a truncated ``sh`` block once ran that way).
Core never does this: it fsyncs a temporary and hard-links it into place, then
records a create-operation fact holding the published bytes' digest. So a file
is read when one of these holds:

* **proven**: its bytes' digest equals Core's create fact for its operation id
  (the fact is written after the link, so the doorbell usually looks a few
  milliseconds too early; the fact's arrival re-checks it, with
  :func:`recheck_delay` as the fallback);
* **settled**: its inode has not changed (``st_ctime``, which no user call can
  set back, unlike ``st_mtime``) for ``settle_s``, *and* it kept the same facts
  over the read (the worker ``fstat``\\ s after reading);
* or, when the wall clock and ctime disagree (a clock step), it was seen with the
  same facts for ``settle_s`` of monotonic time.

A file that is neither is *settling*: looked at again later, never refused for
being invalid while it may still be changing (the second chunk may fix it).
One still changing after ``max_settle_s`` is refused as ``unstable``.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from typing import Literal

from baton.intake.limits import IntakeLimits

__all__ = ["FileFacts", "Settling", "Stable", "Unstable", "assess", "recheck_delay"]


@dataclass(frozen=True, slots=True)
class FileFacts:
    """What ``lstat``/``fstat`` says about one file; equal facts mean an untouched inode."""

    size: int
    mtime_ns: int
    ctime_ns: int
    ino: int
    dev: int

    @classmethod
    def of(cls, st: os.stat_result) -> FileFacts:
        return cls(st.st_size, st.st_mtime_ns, st.st_ctime_ns, st.st_ino, st.st_dev)

    def same_bytes(self, other: FileFacts) -> bool:
        """The same inode with the same size and mtime: what a writer moves.

        ctime is left out: it also moves when *another name* of the file goes away,
        and Core's publish unlinks its temporary's name just after linking the TASK,
        so a look at a TASK Core is publishing sees its ctime move once. Only used
        with a proof (the screened bytes' digest is Core's), never to settle a file.
        """
        return (self.ino, self.dev, self.size, self.mtime_ns) == (
            other.ino,
            other.dev,
            other.size,
            other.mtime_ns,
        )


@dataclass(frozen=True, slots=True)
class Stable:
    how: Literal["proven", "settled", "observed"]


@dataclass(frozen=True, slots=True)
class Settling:
    """Not yet: look again in ``after`` seconds."""

    after: float


@dataclass(frozen=True, slots=True)
class Unstable:
    """Still changing after ``max_settle_s``: refuse it."""

    seconds: float


Assessment = Stable | Settling | Unstable

_CLOCK_SLACK_S = 0.02
"""ctime comes from the kernel's coarse clock (a jiffy behind ``time.time()``)."""


def assess(
    facts: FileFacts,
    *,
    now_wall: float,
    limits: IntakeLimits,
    proven: bool = False,
    first_seen: tuple[FileFacts, float] | None = None,
    now_mono: float | None = None,
) -> Stable | Settling | Unstable:
    """Decide whether ``facts`` describe a file that may be read now.

    ``first_seen`` is (facts, monotonic time) of the first observation of this
    name, for the clock-step fallback and the ``max_settle_s`` bound.
    """
    if proven:
        return Stable("proven")
    age = now_wall - facts.ctime_ns / 1e9 + _CLOCK_SLACK_S
    if age >= limits.settle_s:
        return Stable("settled")
    if first_seen is not None and now_mono is not None:
        seen_facts, seen_at = first_seen
        watched = now_mono - seen_at
        if seen_facts == facts and watched >= limits.settle_s:
            return Stable("observed")
        if watched >= limits.max_settle_s:
            return Unstable(watched)
    remaining = limits.settle_s - age if age >= 0 else limits.settle_s
    return Settling(min(max(remaining, 0.001), limits.settle_s))


def recheck_delay(attempt: int, settle: Settling, *, can_be_proven: bool) -> float:
    """How long to wait before looking again.

    A file that names a Core operation may be proven as soon as Core's fact lands
    (milliseconds after the TASK): look again soon, backing off; otherwise wait
    for the settle window to pass.
    """
    if can_be_proven:
        return min(0.005 * 2.0**attempt, settle.after)
    return settle.after
