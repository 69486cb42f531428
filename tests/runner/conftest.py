"""The runner suite's tests run on a loop that fast-forwards through idle waits.

Over the in-memory transport a turn timeout, a kill grace or a stall threshold is only a
timer, so :func:`baton.testing.clock.fast_forward_loop` jumps to it instead of sleeping;
over a real process (or while a thread, an executor job or a socket is live) the loop
waits in real time, exactly as the standard one does.
"""

from __future__ import annotations

import pytest
from pytest_asyncio.plugin import LoopFactory

from baton.testing.clock import fast_forward_loop


def pytest_asyncio_loop_factories(
    config: pytest.Config, item: pytest.Item
) -> dict[str, LoopFactory]:
    return {"fast_forward": fast_forward_loop}
