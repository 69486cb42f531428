"""Who answers a request while ``baton run`` waits: the person at the terminal, or (without
a TTY on both ends) nobody here, with a line saying how and where to answer instead."""

from __future__ import annotations

import asyncio
import contextlib
import sys
import time
from collections.abc import Callable, Mapping
from typing import Final

from rich.console import Console
from rich.markup import escape

from baton.app.facade.requests import (
    Answer,
    GrantSpec,
    PermissionAnswer,
    PermissionRequest,
    PlanAnswer,
    PlanRequest,
    RequestRecord,
    default_subject,
    tool_call_paths,
)
from baton.cli.shared import err
from baton.security.display import terminal_safe

__all__ = ["HeadlessHint", "TerminalAsker", "permission_reply", "say_headless"]


_GRANT_KEYS: Final = {"t": "turn", "r": "run", "p": "project"}


async def permission_reply(console: Console, document: PermissionRequest) -> PermissionAnswer:
    """Allow once (y), allow and grant for this turn/run/project (t/r/p), or deny.

    baton never answers the agent's "allow always": a lasting approval is a grant baton
    keeps, offered only where a subject can be normalized (:mod:`baton.requests.grants`)."""
    subject = default_subject(document, tool_call_paths(document))
    if subject is None:
        reply = await asyncio.to_thread(
            console.input, "baton: allow it? (y = allow once, n or Enter = deny) ", markup=False
        )
        return PermissionAnswer(
            decision="allow" if reply.strip().lower() in ("y", "yes") else "deny"
        )
    console.print(
        f"baton: t, r or p also allows later {document.tool_call.kind} {subject!r} calls in "
        "this turn, run or project (a grant: `baton grants`)",
        markup=False,
    )
    question = "baton: allow it? (y = allow once, t/r/p = and grant, n or Enter = deny) "
    reply = (await asyncio.to_thread(console.input, question, markup=False)).strip().lower()
    if reply in ("y", "yes"):
        return PermissionAnswer(decision="allow")
    if reply in _GRANT_KEYS:
        return PermissionAnswer(
            decision="allow", grant=GrantSpec(scope=_GRANT_KEYS[reply], subject=subject)
        )
    return PermissionAnswer(decision="deny")


class TerminalAsker:
    """The person at the terminal answers permissions and plans as they arrive.

    Questions and forms are left to ``baton answer`` (the request waits in the
    ledger); any other surface may answer first, and then its answer stands.
    """

    def __init__(self, console: Console) -> None:
        self.console = console
        self.pause: Callable[[], contextlib.AbstractContextManager[None]] = contextlib.nullcontext

    async def ask(self, record: RequestRecord) -> Answer | None:
        with self.pause():
            return await self._ask(record)

    async def _ask(self, record: RequestRecord) -> Answer | None:
        document = record.document
        if not isinstance(document, PermissionRequest | PlanRequest):
            self.console.print(
                f"baton: request {record.request_id} waits for `baton answer {record.request_id}`"
            )
            return None
        from baton.app.facade.requests import render as render_request

        self.console.print(render_request(record))
        if isinstance(document, PermissionRequest):
            return await permission_reply(self.console, document)
        reply = await asyncio.to_thread(
            self.console.input, "baton: accept this plan? (y = accept, n or Enter = reject) "
        )
        accept = reply.strip().lower() in ("y", "yes")
        return PlanAnswer(
            decision="accept" if accept else "reject",
            revision=document.revision,
            reason=None if accept else "rejected at the terminal",
        )


class HeadlessHint:
    """Without a TTY: say how and where to answer a request that waits for a human.

    Registered as the broker's human channel only when someone can answer (a wait
    timeout above 0): it prints the answer command, the dashboard if one runs, and
    the deadline, then leaves the answer to the ledger (returns ``None``).
    """

    def __init__(self, wait_timeout: float, dashboard: Callable[[], str | None]) -> None:
        self.wait_timeout = wait_timeout
        self.dashboard = dashboard
        self.deadlines: dict[str, float] = {}

    async def ask(self, record: RequestRecord) -> Answer | None:
        from baton.app.facade.requests import answer_hint

        deadline = time.time() + self.wait_timeout
        self.deadlines[record.request_id] = deadline
        where = "from another shell"
        url = self.dashboard()
        if url:
            where += f" or the dashboard {url}"
        err.print(
            f"  → waiting for you: {terminal_safe(answer_hint(record), inline=True, mark=False)}"
            f" ({where}); "
            f"{_outcome(record)} at {_clock(deadline)} UTC ({_left(deadline)}) if nobody answers",
            style="magenta",
        )
        return None

    def remind(self, waiting: Mapping[str, object]) -> None:
        """The short repeating reminder, one line per request still waiting."""
        for request_id in waiting:
            deadline = self.deadlines.get(request_id)
            if deadline is not None:
                err.print(
                    f"  ⏳ still waiting for {escape(request_id)}: `baton answer {escape(request_id)} …`"
                    f" ({_left(deadline)} left)",
                    style="magenta",
                )


def _outcome(record: RequestRecord) -> str:
    return "denied" if isinstance(record.document, PermissionRequest) else "expires"


def _clock(ts: float) -> str:
    return time.strftime("%H:%M:%S", time.gmtime(ts))


def _left(deadline: float) -> str:
    seconds = max(0, int(deadline - time.time()))
    return f"{seconds // 60}m {seconds % 60:02d}s" if seconds >= 60 else f"{seconds}s"


def say_headless(wait_timeout: float) -> None:
    """Someone is at a terminal, but not on both ends: say why nobody will be asked here."""
    which = "stdin" if not sys.stdin.isatty() else "stdout"
    then = (
        "a request that needs you is denied at once (--wait-timeout 0)"
        if wait_timeout == 0
        else "a request that needs you waits for `baton answer` or the dashboard "
        f"(up to --wait-timeout {wait_timeout:g}s)"
    )
    err.print(
        f"baton: {which} is not a terminal, so nobody is asked here: {then}",
        style="dim",
        markup=False,
    )
