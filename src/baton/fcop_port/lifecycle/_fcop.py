"""The fcop 4.0.5 internals the lifecycle writer is built from, imported in one place.

The writer composes fcop's own encoding, publication, lock and receipt
primitives (``fcop.v4.*``) instead of re-implementing them, so what it writes
is what fcop writes (the durable writers are called as ``encoding.publish``
etc., so a harness that wraps them in ``fcop.v4.encoding`` sees baton's writes); those modules are private, so this is the one file a new
``fcop`` release has to get past. :func:`supported` gates on the exact pinned
version: with any other version the writer is unavailable and the port keeps
calling ``fcop.Project`` (always correct, only slower).
"""

from __future__ import annotations

import re
import warnings

from baton.fcop_port.records import FcopDict

__all__ = ["PINNED", "fail", "prime", "publish_temporary", "supported", "validate"]

PINNED = "4.0.5"

_TEMPORARY = re.compile(r"\.fcop-(create|replace)-(.+)-[a-z0-9_]+\.tmp")


def supported() -> bool:
    """Whether the installed ``fcop`` is the release the writer was proven against."""
    try:
        from fcop import __version__
    except ImportError:  # pragma: no cover - fcop is a hard dependency
        return False
    return bool(__version__ == PINNED)


def prime() -> None:
    """Build fcop's schema validators once, its jsonschema deprecation warning muted."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)
        from fcop.v4 import schema

        schema._validators()


def fail(
    code: str, message: str, *, operation: str | None = None, subject: str | None = None
) -> Exception:
    """fcop's own error (``V4ProtocolError`` with a frozen code), for identical mapping."""
    from fcop.errors import _V4Code
    from fcop.v4.encoding import fail as fcop_fail

    return fcop_fail(_V4Code(code), message, operation=operation, subject=subject)


def validate(name: str, value: FcopDict, *, code: str = "INVALID_ENVELOPE") -> None:
    """fcop's schema check (``fcop.v4.schema._validate``), imported with its warning muted."""
    prime()
    from fcop.errors import _V4Code
    from fcop.v4.schema import _validate

    _validate(name, value, code=_V4Code(code))


def publish_temporary(name: str) -> tuple[str, str] | None:
    """``(kind, stem)`` when ``name`` is an fcop publication temporary, else None.

    fcop's ``publish`` (kind ``create``) and ``replace_durable`` (kind ``replace``)
    write ``tempfile.mkstemp(prefix=f".fcop-{kind}-{stem}-", suffix=".tmp")`` next
    to the final file, whose stem is ``stem``; a crash can leave one behind.
    """
    match = _TEMPORARY.fullmatch(name)
    return None if match is None else (match.group(1), match.group(2))
