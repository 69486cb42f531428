"""Inspecting one inbox entry: ``lstat`` facts, stability, the guarded parse, then Core.

The order is the defence: a symlink, a non-regular file, a bad name or an
oversize file is refused by its ``lstat`` alone; then the entry must be stable
(proven complete by Core's create fact, or unchanged for the settle window) and
pass the screen in the killable parse worker before Core reads it; a file that
is invalid while it may still be changing is looked at again later
(:class:`RecheckLater`), never quarantined for it. What Core then accepts is
routed by its ``recipient`` frontmatter, never by its filename.

A TASK that passed the screen before Core's create fact landed (Core links the
TASK first) keeps its verdict in its :class:`SettleState`: the re-check, made
when the fact arrives, asks the worker only whether the fact holds the screened
bytes' digest, unless the file changed since (then it is screened again).
"""

from __future__ import annotations

import asyncio
import os
from collections.abc import Callable
from dataclasses import dataclass
from typing import Literal

from baton.fcop_errors import (
    FcopProtocolError,
    InvalidEnvelope,
    StateAmbiguous,
    TaskNotFound,
    WorkspaceError,
)
from baton.fcop_port.port import InboxEntry
from baton.inbox.doorbell_events import DoorbellEvent, TaskArrived, TaskRefused
from baton.inbox.refusals import InboxRefusals
from baton.intake.limits import IntakeLimits
from baton.intake.screen import Refused, Screened
from baton.intake.stability import (
    FileFacts,
    Settling,
    Stable,
    Unstable,
    assess,
    recheck_delay,
)
from baton.intake.worker import ParseWorker, Proof

__all__ = ["InboxInspection", "RecheckLater", "SettleState"]

_FINAL: frozenset[str] = frozenset({"parse_timeout", "parse_memory", "parse_crashed"})
"""Worker failures are final even for a file still settling (re-trying a bomb is a DoS)."""


@dataclass(frozen=True, slots=True)
class RecheckLater:
    """Not yet readable: look again in ``after`` seconds."""

    after: float


@dataclass(slots=True)
class SettleState:
    """One entry waiting to become stable: when and how it was first seen, its re-check."""

    first: tuple[FileFacts, float]
    source: Literal["drain", "watch", "rescan"] = "watch"
    """How the file was first noticed (a re-check reports that, not itself)."""
    detected: float = 0.0
    attempts: int = 0
    timer: asyncio.TimerHandle | None = None
    screened: tuple[FileFacts, Screened] | None = None
    """A screen that passed while the file was neither settled nor proven, and the facts
    it held still over: a re-check that finds the same facts asks only for the proof."""
    awaiting: str | None = None
    """The name of Core's create fact that would prove it (in ``fcop/operations/``): the
    doorbell re-checks the moment it lands instead of waiting for the timer."""


class InboxInspection(InboxRefusals):
    """The doorbell's inspection of an entry (see the module docstring)."""

    route: Callable[[str], str | None]
    max_task_bytes: int
    limits: IntakeLimits
    worker: ParseWorker
    clock: Callable[[], float]
    wall_clock: Callable[[], float]

    def _inspect(
        self,
        entry: InboxEntry,
        state: SettleState,
        source: Literal["drain", "watch", "rescan"],
        detected: float,
    ) -> DoorbellEvent | RecheckLater | None:
        """Classify one entry (runs in a worker thread; all I/O is here)."""
        if entry.is_symlink:
            return self._hostile(entry, "symlink", "a symlink in the inbox (FCoP forbids links)")
        if not entry.is_regular:
            return self._hostile(entry, "not_a_file", "not a regular file")
        if entry.task_id is None:
            return self._hostile(entry, "bad_name", "the name is not TASK-<id>.md")
        if entry.size > self.max_task_bytes:
            return self._hostile(
                entry,
                "too_large",
                f"{entry.size} bytes, over the {self.max_task_bytes}-byte limit; not read",
            )
        screened = self._screen(entry, state)
        if screened is not None:
            return screened
        try:
            task = self.port.read_task(entry.task_id)
        except TaskNotFound:
            return None  # claimed or moved on before we looked
        except StateAmbiguous as exc:
            return self._refuse_in_place(entry, "state_ambiguous", str(exc))
        except InvalidEnvelope as exc:
            if not os.path.lexists(entry.path):
                return None
            if exc.code == "RELATION_INVALID":
                return self._refuse_in_place(entry, "invalid_relation", str(exc))
            return self._hostile(entry, "invalid_envelope", str(exc))
        except WorkspaceError as exc:
            if exc.code == "WORKSPACE_ID_MISMATCH" and os.path.lexists(entry.path):
                return self._hostile(entry, "invalid_envelope", str(exc))
            return self._refuse_in_place(entry, "unreadable", str(exc))
        except (FcopProtocolError, OSError) as exc:
            return self._refuse_in_place(entry, "unreadable", str(exc))
        if task.stage != "inbox":
            return None
        if task.recipient == self.human:
            role, for_human = self.human, True
        else:
            routed = self.route(task.recipient)
            if routed is None:
                return self._refuse_in_place(
                    entry,
                    "unknown_recipient",
                    f"recipient {task.recipient!r} is not a role of this team; "
                    "baton does not guess (fix the team or re-issue the task)",
                    recipient=task.recipient,
                    remember=True,
                )
            role, for_human = routed, False
        return TaskArrived(
            task_id=task.task_id,
            recipient=task.recipient,
            role=role,
            for_human=for_human,
            sender=task.sender,
            subject=task.subject,
            parent=task.parent,
            priority=task.priority,
            source=source,
            detected_at=detected,
            emitted_at=0.0,
            published_ns=entry.ctime_ns,
        )

    def _screen(self, entry: InboxEntry, state: SettleState) -> TaskRefused | RecheckLater | None:
        """Stability, then the guarded parse in the worker; None: Core may read it.

        A TASK screened valid before Core's create fact landed is not screened again:
        the re-check, when it finds the same bytes (:meth:`FileFacts.same_bytes`), asks
        the worker only whether the fact now holds the screened bytes' digest.
        """
        facts = FileFacts(entry.size, entry.mtime_ns, entry.ctime_ns, entry.ino, entry.dev)
        now = self.clock()
        stability = assess(
            facts,
            now_wall=self.wall_clock(),
            limits=self.limits,
            first_seen=state.first,
            now_mono=now,
        )
        if isinstance(stability, Unstable):
            return self._hostile(
                entry,
                "unstable",
                f"still being written after {stability.seconds:.0f} s; not read",
                facts=facts,
            )
        settle = stability if isinstance(stability, Settling) else Settling(self.limits.settle_s)
        proof = Proof(self.port.root, self.port.workspace_id)
        earlier = state.screened
        if earlier is not None and earlier[0].same_bytes(facts):
            if self.worker.prove(proof, earlier[1]):
                return None
            if not isinstance(stability, Stable):
                state.attempts += 1
                return RecheckLater(recheck_delay(state.attempts, settle, can_be_proven=True))
        state.screened = state.awaiting = None
        result = self.worker.screen_envelope(entry.path, expect_id=entry.task_id, proof=proof)
        before, after = result.before, result.after
        if before is not None and not before.same_bytes(facts):
            state.attempts += 1
            return RecheckLater(0.005)  # replaced or rewritten since the lstat: look again
        stable = isinstance(stability, Stable) or result.proven
        verdict = result.verdict
        if isinstance(verdict, Refused):
            if not stable and verdict.reason not in _FINAL:
                state.attempts += 1
                return RecheckLater(settle.after)  # may be half-written: re-check, not quarantine
            return self._hostile(entry, verdict.reason, verdict.detail, facts=facts)
        if stable and result.still and before == facts:
            return None
        state.attempts += 1
        if verdict.operation_id is not None and after is not None and facts.same_bytes(after):
            from baton.intake.create_fact import create_fact_name

            state.screened = (facts, verdict)
            state.awaiting = create_fact_name(self.port.workspace_id, verdict.operation_id)
        return RecheckLater(
            recheck_delay(state.attempts, settle, can_be_proven=verdict.operation_id is not None)
        )
