"""The silence watch, sans-I/O: one stall per silence, cleared by the next frame."""

from __future__ import annotations

import pytest

from baton.events.model import TurnResumed, TurnStalled
from baton.runner.liveness import DEFAULT_STALL_SECONDS, Liveness


def test_a_silence_past_the_threshold_is_one_stall_then_cleared() -> None:
    watch = Liveness.start(60, now_ms=0)
    assert watch.check(59_999) is None
    assert watch.due_ms() == 60_000
    stalled = watch.check(60_000)
    assert stalled == TurnStalled(silent_ms=60_000, threshold_ms=60_000)
    assert watch.check(120_000) is None, "one stall per silence"
    assert watch.due_ms() is None
    assert watch.heard(125_000) == TurnResumed(silent_ms=125_000)
    assert not watch.stalled and watch.due_ms() == 185_000
    assert watch.heard(126_000) is None


def test_speaking_moves_the_deadline() -> None:
    watch = Liveness.start(10, now_ms=0)
    watch.heard(9_000)
    assert watch.check(15_000) is None
    assert watch.check(19_000) is not None


def test_waiting_for_a_human_is_not_the_agents_silence() -> None:
    watch = Liveness.start(10, now_ms=0)
    watch.waiting(True, 1_000)
    assert watch.check(500_000) is None
    watch.waiting(False, 500_000)
    assert watch.check(509_000) is None
    assert watch.check(510_000) is not None


def test_the_default_and_bad_thresholds() -> None:
    assert DEFAULT_STALL_SECONDS == 60
    with pytest.raises(ValueError):
        Liveness.start(0, now_ms=0)
