"""The real ``cursor-sdk`` client, loaded on demand, with a tap on its run streams.

The SDK is an optional extra (``pip install 'baton[cursor]'``): it is imported only when
a ``cursor-sdk`` session starts, and its absence is :class:`~baton.errors.AgentNotInstalled`
with the install command. baton uses the SDK's public async API (``AsyncClient``,
``AsyncAgent.send``, ``AsyncRun``) over the SDK's own Connect transport, wrapped by
:class:`TapTransport`: every envelope of a ``Send`` stream is also kept raw, in order,
so that what the SDK's parsed types leave out (fields it does not know) still reaches
baton's normalizer, never dropped.
"""

from __future__ import annotations

import collections
from collections.abc import AsyncIterator, Mapping
from dataclasses import dataclass
from types import ModuleType
from typing import Any

from baton.errors import AgentNotInstalled

__all__ = ["PINNED_VERSION", "Sdk", "TapTransport", "load_sdk", "sdk_version"]

PINNED_VERSION = "1.1.0"
"""The ``cursor-sdk`` release baton is built and tested against (the ``cursor`` extra)."""

INSTALL = "pip install 'baton[cursor]'"


@dataclass(frozen=True, slots=True)
class Sdk:
    """The parts of the ``cursor-sdk`` package baton uses."""

    client: ModuleType
    """``cursor_sdk.asyncio``: ``AsyncClient``, ``AsyncConnectTransport``."""
    types: ModuleType
    """``cursor_sdk.types``: ``AgentOptions``, ``LocalAgentOptions``, ``CustomTool``."""
    errors: ModuleType
    """``cursor_sdk.errors``: ``CursorSDKError`` and its subclasses."""


def load_sdk() -> Sdk:
    """The SDK, or :class:`AgentNotInstalled` naming the extra."""
    try:
        import cursor_sdk.asyncio as client
        import cursor_sdk.errors as errors
        import cursor_sdk.types as types
    except ImportError as exc:
        raise AgentNotInstalled(
            f"the cursor-sdk transport needs the cursor-sdk package ({exc.name} is missing); "
            f"install it with: {INSTALL}"
        ) from None
    return Sdk(client=client, types=types, errors=errors)


def sdk_version() -> str | None:
    """The installed ``cursor-sdk`` version, without importing it; ``None`` if absent."""
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("cursor-sdk")
    except PackageNotFoundError:
        return None


class TapTransport:
    """The SDK's ``AsyncTransport``, recording each ``Send`` stream envelope raw.

    ``envelopes`` is a FIFO: the SDK turns each envelope into one ``RunStreamEvent``,
    in order, so whoever iterates the run pops exactly one raw envelope per event.
    """

    def __init__(self, inner: Any) -> None:  # Any: the SDK's untyped AsyncTransport
        self._inner = inner
        self.envelopes: collections.deque[dict[str, Any]] = collections.deque()

    # Any: the SDK's transport protocol, untyped (Connect JSON in and out)
    async def unary(self, service: str, method: str, message: Mapping[str, Any]) -> Any:
        return await self._inner.unary(service, method, message)

    async def stream(  # Any: as unary; a stream of Connect JSON envelopes
        self, service: str, method: str, message: Mapping[str, Any]
    ) -> AsyncIterator[Any]:
        inner = await self._inner.stream(service, method, message)
        if method != "Send":
            return inner  # type: ignore[no-any-return]
        return self._tapped(inner)

    async def _tapped(self, inner: AsyncIterator[Any]) -> AsyncIterator[Any]:
        async for envelope in inner:
            if isinstance(envelope, dict):
                self.envelopes.append(envelope)
            yield envelope

    async def aclose(self) -> None:
        await self._inner.aclose()

    def with_options(self, **kwargs: Any) -> Any:  # Any: the SDK's options, passed through
        return TapTransport(self._inner.with_options(**kwargs))
