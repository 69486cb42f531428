"""A thin typed port over ``fcop.Project``, the single writer and lifecycle authority.

baton never writes or edits a TASK, REPORT, ISSUE or REVIEW file itself: every
write and every lifecycle move (T1–T5) goes through ``fcop.Project`` (FCoP's
ADR-0002: "REPORT done is evidence; TASK done is lifecycle state; only the
lifecycle authority may move lifecycle state"). The port exists because the
library's surface is untyped (18 operations attached by ``setattr``, plain
``dict`` results) and churns between releases: here it becomes frozen
dataclasses and baton's error tree (:mod:`baton.fcop_errors`), in the
few modules that a new ``fcop`` release has to get past.

:class:`FcopPort` is the one public face; it is assembled from one part per
concept, and what it adds on top of Core lives with each part:

* :mod:`~baton.fcop_port.base`: the opened workspace and the call seams;
* :mod:`~baton.fcop_port.reads`: reads that tolerate the two-stage
  window, and cheap enumeration (the inbox by ``lstat``, O(stage) listings,
  children by a frontmatter prefilter);
* :mod:`~baton.fcop_port.creation`: T1, idempotent by ``operation_id``;
* :mod:`~baton.fcop_port.evidence`: REPORT, REVIEW and ISSUE appends, and
  look-ups without Core's quadratic listing;
* :mod:`~baton.fcop_port.transitions`: T2, T3 and the authorized T4/T5.

Beside them: the records it returns (:mod:`~baton.fcop_port.records`,
re-exported here), legacy detection and ``init``
(:mod:`~baton.fcop_port.workspace`), and entering ``fcop`` primed with
its errors mapped (:mod:`~baton.fcop_port.calls`).
"""

from __future__ import annotations

from baton.fcop_port.creation import TaskCreation
from baton.fcop_port.records import (
    STAGES,
    TASK_FILE_RE,
    TASK_ID_RE,
    CreatedTask,
    InboxEntry,
    ReportInfo,
    ReviewInfo,
    Stage,
    TaskInfo,
    TransitionInfo,
)
from baton.fcop_port.transitions import TaskTransitions

__all__ = [
    "STAGES",
    "TASK_FILE_RE",
    "TASK_ID_RE",
    "CreatedTask",
    "FcopPort",
    "InboxEntry",
    "ReportInfo",
    "ReviewInfo",
    "Stage",
    "TaskInfo",
    "TransitionInfo",
]


class FcopPort(TaskCreation, TaskTransitions):
    """Typed, error-mapped access to one FCoP 4.0 workspace through ``fcop.Project``.

    Synchronous on purpose (Core fsyncs and takes file locks); async callers
    use ``asyncio.to_thread``. One instance may be shared across threads.
    """
