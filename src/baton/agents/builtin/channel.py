"""What a turn may ask of the client (updates, permission, file writes), aware of cancellation.

A turn's ``cancel`` event is set by ``session/cancel`` or by a replacing prompt. Waits on the
client race it: on cancellation an outstanding request is withdrawn (``$/cancel_request``) and
`TurnInterrupted` is raised, so a client that never answers cannot hold a cancelled turn open.
"""

import asyncio
from collections.abc import Awaitable
from dataclasses import dataclass
from typing import TypeVar

from baton.errors import BuiltinAgentError

from .connection import Connection, ConnectionClosed
from .jsonrpc import JsonObject, RpcError
from .updates import PERMISSION_OPTIONS

__all__ = ["Channel", "Permission", "TurnInterrupted", "until_cancelled"]

T = TypeVar("T")


class TurnInterrupted(BuiltinAgentError):
    """The turn was cancelled while waiting."""


async def until_cancelled(awaitable: Awaitable[T], cancel: asyncio.Event) -> T:
    """Await ``awaitable`` unless ``cancel`` is set first (then cancel it, raise TurnInterrupted)."""
    work = asyncio.ensure_future(awaitable)
    stopper = asyncio.ensure_future(cancel.wait())
    try:
        await asyncio.wait([work, stopper], return_when=asyncio.FIRST_COMPLETED)
    finally:
        stopper.cancel()
        if not work.done():
            work.cancel()
            await asyncio.wait([work])
    if work.cancelled() and cancel.is_set():
        raise TurnInterrupted
    return work.result()


@dataclass(frozen=True, slots=True)
class Permission:
    """The client's decision on one permission request."""

    granted: bool
    always: bool = False
    reason: str = ""


_OPTION_KINDS = {option["optionId"]: option["kind"] for option in PERMISSION_OPTIONS}


@dataclass(kw_only=True, eq=False)
class Channel:
    """The client, as seen by one session's turn."""

    connection: Connection
    session_id: str
    cancel: asyncio.Event

    async def update(self, update: JsonObject) -> None:
        """Send one ``session/update``."""
        await self.connection.notify(
            "session/update", {"sessionId": self.session_id, "update": update}
        )

    async def ask_permission(self, tool_call: JsonObject) -> Permission:
        """Ask ``session/request_permission``; an error or odd answer counts as a refusal."""
        params = {
            "sessionId": self.session_id,
            "toolCall": tool_call,
            "options": list(PERMISSION_OPTIONS),
        }
        try:
            answer = await self._request("session/request_permission", params)
        except (RpcError, ConnectionClosed) as exc:
            return Permission(False, reason=f"permission denied (the request failed: {exc})")
        outcome = answer.get("outcome") if isinstance(answer, dict) else None
        if isinstance(outcome, dict) and outcome.get("outcome") == "cancelled":
            # ACP: the client answers ``cancelled`` because the turn is being cancelled;
            # end the turn as cancelled even if session/cancel is still on its way.
            self.cancel.set()
        if not isinstance(outcome, dict) or outcome.get("outcome") != "selected":
            return Permission(False, reason="permission denied (request cancelled)")
        kind = _OPTION_KINDS.get(outcome.get("optionId"))
        if kind is None:
            return Permission(
                False, reason=f"permission denied (unknown option {outcome.get('optionId')!r})"
            )
        if kind == "reject_once":
            return Permission(False, reason="permission denied")
        return Permission(True, always=kind == "allow_always")

    async def write_text_file(self, path: str, content: str) -> None:
        """Write through the client (``fs/write_text_file``); raises RpcError or ConnectionClosed."""
        await self._request(
            "fs/write_text_file", {"sessionId": self.session_id, "path": path, "content": content}
        )

    async def _request(self, method: str, params: JsonObject) -> object:
        call = self.connection.call(method, params)
        try:
            return await until_cancelled(call.result, self.cancel)
        except TurnInterrupted:
            self.connection.withdraw(call)
            raise
