"""The redaction seam the normalizers call; :mod:`baton.security.redact` implements it."""

from __future__ import annotations

from typing import Any, Protocol

__all__ = ["NoRedaction", "Redaction"]


class Redaction(Protocol):
    @property
    def secret_count(self) -> int:
        """How many secrets are bound; it only grows (a cached redaction is stale when it did)."""

    def text(self, value: str) -> str: ...

    # Any: any JSON value, redacted in place of its strings.
    def value(self, value: Any) -> Any: ...

    def stream_cut(self, pending: str, context: str = "") -> int:
        """How much of streamed text may be shown before more arrives."""

    def text_after(self, context: str, s: str) -> str:
        """Redact ``s``, which continues already shown ``context``."""

    def stream_context(self, context: str, shown: str) -> str:
        """The context for the text that follows ``shown``."""

    def drain_fallbacks(self) -> list[str]:
        """Why redaction fell back since the last call (fixed phrases, no quoted text)."""


class NoRedaction:
    """For tests of pure normalization only; the runner always uses a real redactor."""

    secret_count = 0

    def text(self, value: str) -> str:
        return value

    # Any: as Redaction.value.
    def value(self, value: Any) -> Any:
        return value

    def stream_cut(self, pending: str, context: str = "") -> int:
        return len(pending)

    def text_after(self, context: str, s: str) -> str:
        return s

    def stream_context(self, context: str, shown: str) -> str:
        return ""

    def drain_fallbacks(self) -> list[str]:
        return []
