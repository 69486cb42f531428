"""The runner suite's tests run on a loop that fast-forwards through idle waits.

Over the in-memory transport a turn timeout, a kill grace or a stall threshold is only a
timer, so :func:`baton.testing.clock.fast_forward_loop` jumps to it instead of sleeping;
over a real process (or while a thread, an executor job or a socket is live) the loop
waits in real time, exactly as the standard one does. The harness vouches for its store's
doorbell directory, so a test waiting for a human (on the ledger's FIFO) is fast-forwarded too.

Measured 2026-12-02 (sum of per-test setup+call+teardown, ``-p no:xdist``, medians of three
interleaved rounds each way, load 6-12 from other engineers' runs): the 64 tests not marked
``process`` take 5.3 s in memory vs 24.0 s with ``BATON_TEST_TRANSPORT=subprocess`` (4.6x;
main before this change: 2.2x in the same window); the whole suite 13.8 vs 32.7 s (2.4x),
bounded by the 7 ``process`` tests (~8 s, the same in both modes).
"""

from __future__ import annotations

import pytest
from pytest_asyncio.plugin import LoopFactory

from baton.testing.clock import fast_forward_loop


def pytest_asyncio_loop_factories(
    config: pytest.Config, item: pytest.Item
) -> dict[str, LoopFactory]:
    return {"fast_forward": fast_forward_loop}
