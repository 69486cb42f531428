"""A turn left open by a dead team loop: take its result from a live holder, or interrupt it.

On one machine a team loop's agents die with it, so every turn it left ``dispatched`` or
``running`` is interrupted and re-prompted with its context. In cluster mode the agent
lives on in its role actor (the *holder*, :mod:`baton.cluster.actor`), which keeps the
turn going and hands its result to the next coordinator that asks for it. Running the
turn again there would run it twice (and file its report twice), so a restarted
coordinator *adopts* such a turn: it waits for the holder's result and commits it as the
turn's end. Only a turn the holder has is adopted: the holder hands over the turn whose
prompt has the digest the turn row recorded at dispatch, or says it has none.

:func:`reconcile` is the decision, over plain facts (no I/O): the turn row's state and
prompt digest, and what the store says of the slot's holder. It is taken twice: at start
from the store (:class:`HolderTurn` from the holder's placement and its own events, read by
the cluster package: a :data:`HolderLookup` handed to the loop), and
again when the holder has answered that it has no such turn, or is gone (``None``): the
turn then falls back to the interruption of before.
"""

from __future__ import annotations

import hashlib
from collections.abc import Awaitable, Callable, Collection, Mapping
from dataclasses import dataclass
from typing import Final

from baton.team.states import DispatchState

__all__ = [
    "LOOP_STOPPED",
    "Adopt",
    "HolderLookup",
    "HolderTurn",
    "Interrupt",
    "Reconciled",
    "prompt_digest",
    "reconcile",
]

LOOP_STOPPED: Final = "its team loop (`baton up`) stopped before the turn finished"


def prompt_digest(text: str) -> str:
    """The prompt's SHA-256, as the runner records it (``turn.submitted.prompt_sha256``)."""
    return hashlib.sha256(text.encode("utf-8", errors="surrogatepass")).hexdigest()


@dataclass(frozen=True, slots=True)
class HolderTurn:
    """What the store says of a slot's live holder: its last turn, as its events tell it."""

    prompt_sha256: str | None
    """The digest of the last prompt it gave its agent (``None``: no turn yet)."""
    ended: bool
    """That turn has ended (its result waits for whoever asks for it next)."""
    lease_live: bool = True
    """Its placement is ``placed`` and its lease has not run out (it renews it itself)."""


HolderLookup = Callable[[Collection[str]], Awaitable[Mapping[str, HolderTurn]]]
"""The store's facts of the live holders of these slots (cluster mode, where the cluster
package reads them: ``baton.cluster.holders.holder_turns``); a slot without one is absent."""


@dataclass(frozen=True, slots=True)
class Adopt:
    """Wait for the holder's result of this turn and commit it as the turn's end."""

    reason: str


@dataclass(frozen=True, slots=True)
class Interrupt:
    """Mark the turn interrupted: the loop re-prompts it with its context, as always."""

    reason: str


Reconciled = Adopt | Interrupt


def reconcile(
    state: DispatchState, prompt_sha256: str | None, holder: HolderTurn | None
) -> Reconciled:
    """The fate of one open turn (``state`` dispatched or running) after a team loop's death.

    =========================  ==========================================  =========
    turn row                   holder (the store's facts)                  decision
    =========================  ==========================================  =========
    any                        none (one machine, or no live placement)    interrupt
    ``dispatched``             any (the prompt was never handed over)      interrupt
    no digest (an older row)   any                                         interrupt
    ``running``, digest D      lease lost                                  interrupt
    ``running``, digest D      live                                        adopt
    =========================  ==========================================  =========

    Adopting only asks the holder: it hands over the turn whose prompt has digest D, or
    answers that it has none (the coordinator died before the prompt reached it), and the
    turn is then interrupted (``holder=None`` here). The store's marks of the holder's last
    prompt only say which of the two to expect: its events are written in batches, so a
    prompt it just took may not be stored yet, and only the holder's answer decides.
    """
    if holder is None:
        return Interrupt(LOOP_STOPPED)
    if state is not DispatchState.RUNNING:
        return Interrupt(f"{LOOP_STOPPED} (its prompt was never handed to the role's holder)")
    if prompt_sha256 is None:
        return Interrupt(f"{LOOP_STOPPED} (no prompt digest was recorded for it)")
    if not holder.lease_live:
        return Interrupt(f"{LOOP_STOPPED} (the role's holder lost its placement)")
    if holder.prompt_sha256 != prompt_sha256:
        return Adopt("the role's holder lives; its stored events do not show the turn yet")
    if holder.ended:
        return Adopt("the role's holder finished the turn: its result is taken, not run again")
    return Adopt("the role's holder is still running the turn: its result is awaited")
