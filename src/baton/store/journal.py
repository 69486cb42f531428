"""The seam between "a state change" and "the canonical event that says so".

Whoever changes durable state (the ledger, the team loop) describes the change
with event payloads and hands both to a :class:`Journal`, which stamps the
payloads into its run's sequence and commits them with the change in one
transaction (:meth:`baton.store.store.Store.write`). The runner's
``EventEmitter`` is the journal of a run; its listeners see the events only
after that commit. Without a journal a change is still atomic, just silent:
processes that own no run (a reader) never change state.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Protocol, TypeVar

from baton.events.model import Payload
from baton.store.tx import Tx

__all__ = ["Journal"]

T = TypeVar("T")


class Journal(Protocol):
    """Commits a write together with the events that describe it."""

    async def commit(self, payloads: Sequence[Payload], fn: Callable[[Tx], T]) -> T:
        """Run ``fn`` and store ``payloads`` (stamped) in one transaction; return ``fn``'s result."""
        ...
