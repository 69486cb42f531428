"""Newline-delimited JSON framing, sans-I/O.

``LineDecoder.feed(bytes)`` buffers and returns whole decoded frames. Malformed
input never raises: an oversized line is skipped without being buffered (memory
stays bounded however long it is), and undecodable or non-object lines come back as
:class:`FrameError` values so the connection can report them and keep going.

Lines are parsed by msgspec first (4x ``json.loads`` on ACP frames) and by
``json.loads`` whenever msgspec refuses one, so every line decodes exactly as
``json.loads`` alone would decode it: msgspec is strict (it refuses lone surrogates,
``NaN``/``Infinity``, out-of-range floats, a BOM), and for everything it accepts it
builds the same objects (arbitrary-size ints, last duplicate key wins; a hypothesis
property in ``tests/acp/test_framing_parser.py`` holds it to that). orjson was measured
too and is not used: it turns integers beyond 64 bits into floats instead of refusing.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from typing import Any, Literal

import msgspec

from baton.events.surrogates import repair_unencodable
from baton.jsontypes import JsonObject, JsonValue

__all__ = [
    "DEFAULT_MAX_LINE_BYTES",
    "PREVIEW_BYTES",
    "Frame",
    "FrameError",
    "FrameErrorKind",
    "LineDecoder",
    "decode_line",
    "encode_message",
    "loads",
]

DEFAULT_MAX_LINE_BYTES = 16 * 1024 * 1024
"""Largest accepted line. ACP frames carry whole files and diffs; 16 MiB covers
real agents while keeping a hostile or broken agent from exhausting memory."""

PREVIEW_BYTES = 256

FrameErrorKind = Literal["oversized", "invalid_utf8", "invalid_json", "not_object"]


@dataclass(slots=True)
class Frame:
    """One decoded JSON object and the size of its line in bytes.

    ``flags`` say how the message differs from what was received (``unencodable_text``:
    lone surrogates were replaced by U+FFFD); the events it produces carry them.
    Not frozen, though never changed: one is made per line, and a frozen dataclass's
    ``__init__`` costs three times as much.
    """

    message: dict[str, Any]
    size: int
    flags: tuple[str, ...] = ()


REPAIR_AT_FRAMING = False
"""Off until the connection hands a frame's flags to its events (after the session split)."""

_SURROGATE_BYTES = re.compile(rb"\\u[dD][89abcdefABCDEF]|\xed[\xa0-\xbf]")
"""Where a lone surrogate can come from: a ``\\uD8xx``-``\\uDFxx`` escape, or CESU bytes
(``json.loads`` decodes bytes with ``surrogatepass``)."""


@dataclass(frozen=True, slots=True)
class FrameError:
    """A line that could not become a message; ``preview`` is escaped, bounded text."""

    kind: FrameErrorKind
    size: int
    preview: str
    detail: str


_fast_loads = msgspec.json.Decoder().decode
_FAST_REFUSED = (msgspec.DecodeError, RecursionError)


def loads(line: bytes | bytearray) -> JsonValue:
    """``json.loads(line)``, faster: msgspec first, ``json.loads`` for what it refuses."""
    try:
        return _fast_loads(line)
    except _FAST_REFUSED:
        return json.loads(line)


def _preview(data: bytes | bytearray) -> str:
    return bytes(data[:PREVIEW_BYTES]).decode("utf-8", errors="backslashreplace")


class LineDecoder:
    """Split a byte stream into JSON frames, enforcing a per-line size limit."""

    __slots__ = ("_buffer", "_discard_head", "_discarding", "blank_lines", "max_line_bytes")

    def __init__(self, max_line_bytes: int = DEFAULT_MAX_LINE_BYTES) -> None:
        self.max_line_bytes = max_line_bytes
        self.blank_lines = 0
        """Empty (or whitespace-only) lines between frames: skipped, but counted."""
        self._buffer = bytearray()
        self._discarding = 0
        """Bytes skipped so far of an oversized line (0 when not skipping)."""
        self._discard_head = b""

    @property
    def buffered(self) -> int:
        return len(self._buffer)

    def feed(self, data: bytes) -> list[Frame | FrameError]:
        """Every whole frame in ``data`` (with what was buffered before), decoded."""
        out: list[Frame | FrameError] = []
        for line in self.lines(data):
            item = line if isinstance(line, FrameError) else decode_line(line)
            if item is not None:
                out.append(item)
        return out

    def lines(self, data: bytes) -> list[bytes | FrameError]:
        """:meth:`feed` without decoding: each whole, non-blank line for
        :func:`decode_line`, an oversized one as its error. A reader decodes each line
        just before handling it, so a read of a thousand frames does not hold a
        thousand decoded messages at once (plain bytes are no work for the cyclic GC;
        dicts are)."""
        out: list[bytes | FrameError] = []
        start = 0
        if self._discarding:
            newline = data.find(b"\n")
            if newline < 0:
                self._discarding += len(data)
                return out
            out.append(self._oversized(self._discarding + newline))
            start = newline + 1
        buffer = self._buffer
        max_line = self.max_line_bytes
        lines = (data[start:] if start else data).split(b"\n")  # one C call for a read
        rest = lines.pop()  # after the last newline: the start of a line still coming
        if lines and buffer:
            buffer += lines[0]
            lines[0] = bytes(buffer)
            buffer.clear()
        for line in lines:
            if len(line) > max_line:
                self._discard_head = line[:PREVIEW_BYTES]
                out.append(self._oversized(len(line)))
            elif not line or line.isspace():  # what decode_line calls blank
                self.blank_lines += 1
            else:
                out.append(line)
        if rest:
            if len(buffer) + len(rest) > max_line:
                self._discard_head = bytes((buffer + rest[:PREVIEW_BYTES])[:PREVIEW_BYTES])
                self._discarding = len(buffer) + len(rest)
                buffer.clear()
            else:
                buffer += rest
        return out

    def close(self) -> list[FrameError]:
        """End of stream: a trailing partial line is reported, never silently dropped."""
        out: list[FrameError] = []
        if self._discarding:
            out.append(self._oversized(self._discarding))
        elif self._buffer.strip():
            out.append(
                FrameError(
                    "invalid_json",
                    len(self._buffer),
                    _preview(self._buffer),
                    "stream ended inside an unterminated line",
                )
            )
        self._buffer.clear()
        return out

    def _oversized(self, size: int) -> FrameError:
        self._discarding = 0
        head, self._discard_head = self._discard_head, b""
        return FrameError(
            "oversized",
            size,
            _preview(head),
            f"line of {size:,} bytes exceeds the {self.max_line_bytes:,}-byte limit; skipped",
        )


def decode_line(line: bytes | bytearray) -> Frame | FrameError | None:
    """Decode one line (without its newline); ``None`` for blank lines."""
    if line.endswith(b"\r"):
        line = line[:-1]
    if not line.strip():
        return None
    try:
        message = loads(line)
    except UnicodeDecodeError as exc:
        return FrameError("invalid_utf8", len(line), _preview(line), str(exc))
    except (ValueError, RecursionError) as exc:  # RecursionError: absurdly deep nesting
        return FrameError("invalid_json", len(line), _preview(line), str(exc) or type(exc).__name__)
    if not isinstance(message, dict):
        return FrameError(
            "not_object", len(line), _preview(line), "a JSON-RPC message must be an object"
        )
    if REPAIR_AT_FRAMING and (b"\\u" in line or b"\xed" in line) and _SURROGATE_BYTES.search(line):
        # Valid JSON that UTF-8 cannot hold: repaired here, once, for everything above
        # (events, request documents, the ledger), and said so.
        repaired, changed = repair_unencodable(message)
        if changed:
            return Frame(repaired, len(line), ("unencodable_text",))
    return Frame(message, len(line))


def encode_message(message: JsonObject) -> bytes:
    """One compact JSON line. Non-ASCII stays UTF-8; embedded newlines are escaped by JSON."""
    return json.dumps(message, ensure_ascii=False, separators=(",", ":")).encode("utf-8") + b"\n"
