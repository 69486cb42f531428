"""The restart decision over plain data: which open turn a live holder's result settles."""

from __future__ import annotations

import pytest

from baton.team.reconcile import (
    LOOP_STOPPED,
    Adopt,
    HolderTurn,
    Interrupt,
    prompt_digest,
    reconcile,
)
from baton.team.states import DispatchState

D = prompt_digest("the task, as it was given")
RUNNING, DISPATCHED = DispatchState.RUNNING, DispatchState.DISPATCHED

CASES = [
    # (turn state, turn digest, holder) -> adopted?, why (a word of the reason)
    (RUNNING, D, None, False, LOOP_STOPPED),
    (DISPATCHED, D, HolderTurn(D, ended=False), False, "never handed"),
    (RUNNING, None, HolderTurn(D, ended=False), False, "no prompt digest"),
    (RUNNING, D, HolderTurn(D, ended=False, lease_live=False), False, "lost its placement"),
    # Not stored yet (the holder's events are batched): the holder's answer decides.
    (RUNNING, D, HolderTurn(None, ended=False), True, "do not show"),
    (RUNNING, D, HolderTurn(prompt_digest("an earlier turn"), ended=True), True, "do not show"),
    (RUNNING, D, HolderTurn(D, ended=False), True, "still running"),
    (RUNNING, D, HolderTurn(D, ended=True), True, "finished"),
]


@pytest.mark.parametrize(("state", "digest", "holder", "adopted", "why"), CASES)
def test_reconcile(
    state: DispatchState, digest: str | None, holder: HolderTurn | None, adopted: bool, why: str
) -> None:
    decision = reconcile(state, digest, holder)
    assert isinstance(decision, Adopt if adopted else Interrupt)
    assert why in decision.reason


def test_the_digest_is_the_runners() -> None:
    """The turn row's digest is compared with the holder's ``turn.submitted.prompt_sha256``."""
    import hashlib

    text = "caf\u00e9 \ud800"  # a lone surrogate, as the runner encodes it
    assert prompt_digest(text) == hashlib.sha256(text.encode("utf-8", "surrogatepass")).hexdigest()
