"""Ending asyncio tasks baton owns, without swallowing the caller's own cancellation.

``with suppress(CancelledError): await task`` after ``task.cancel()`` also swallows a
cancel aimed at the *caller* (it arrives as the same exception), so a shutdown that is
itself being cancelled would carry on. :func:`cancel_and_wait` waits with
``asyncio.wait``, which never raises a task's exception and lets the caller's cancel
through; a task that died of something else is logged, not lost.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Iterable
from typing import Any

__all__ = ["cancel_and_wait"]

log = logging.getLogger(__name__)


# Any: futures of every result type (a Future is invariant in it); only cancelled here
async def cancel_and_wait(tasks: Iterable[asyncio.Future[Any] | None]) -> None:
    """Cancel ``tasks`` (``None`` and the running task are skipped) and wait until they end."""
    current = asyncio.current_task()
    live = [t for t in tasks if t is not None and t is not current]
    for task in live:
        task.cancel()
    if live:
        await asyncio.wait(live)
    for task in live:
        error = None if task.cancelled() else task.exception()
        if error is not None:
            log.error("task %r failed", task, exc_info=error)
