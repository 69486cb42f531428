"""The redaction seam the normalizers call; :mod:`baton.security.redact` implements it."""

from __future__ import annotations

from typing import Any, Protocol


class Redaction(Protocol):
    def text(self, value: str) -> str: ...

    def value(self, value: Any) -> Any: ...


class NoRedaction:
    """For tests of pure normalization only; the runner always uses a real redactor."""

    def text(self, value: str) -> str:
        return value

    def value(self, value: Any) -> Any:
        return value
