"""The guarded parse of one untrusted FCoP file: bytes in, a verdict out (pure).

:func:`screen_envelope` checks, in order, everything that must hold before Core
may parse a TASK/REPORT/ISSUE/REVIEW: the size cap, strict UTF-8 without BOM or
CR (Core's encoding rule), a complete front matter (split exactly as Core
splits it), the front-matter cap, the YAML limits of
:mod:`~baton.intake.yaml_guard` (with Core's own duplicate-key
loader underneath, so acceptance matches Core's), a mapping with a known
envelope type, and display-safe one-line routing fields (no control, bidi or
newline characters in a subject, sender, recipient…). :func:`screen_json`
does the same for Core's JSON facts (operation facts, receipts, the manifest).

A verdict never raises: the result is :class:`Screened` or :class:`Refused`,
with a reason from :data:`ScreenReason` and a detail a human can act on. This
runs inside :mod:`~baton.intake.worker`'s subprocess, which adds
the deadline and the memory limit a pure function cannot give itself.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping
from dataclasses import asdict, dataclass
from typing import Any, Literal

import yaml

from baton.intake.limits import DEFAULT_LIMITS, IntakeLimits
from baton.intake.yaml_guard import YamlLimitError, YamlLimitReason, bounded_loader
from baton.security.display import neutralize_terminal

__all__ = [
    "ENVELOPE_TYPES",
    "LINE_FIELDS",
    "MAX_SUBJECT_CHARS",
    "Refused",
    "ScreenReason",
    "Screened",
    "front_matter",
    "screen_envelope",
    "screen_json",
    "subject_problem",
    "to_json",
    "unsafe_line",
    "verdict_from_json",
]

ScreenReason = Literal[
    YamlLimitReason,
    "too_large",
    "invalid_utf8",
    "not_lf",
    "incomplete_front_matter",
    "yaml_invalid",
    "not_an_envelope",
    "id_mismatch",
    "unsafe_text",
    "json_invalid",
    "parse_timeout",
    "parse_memory",
    "parse_crashed",
    "unreadable",
    "not_a_file",
    "symlink",
    "unstable",
]

ENVELOPE_TYPES = ("TASK", "REPORT", "ISSUE", "REVIEW")
LINE_FIELDS = (
    "subject",
    "sender",
    "recipient",
    "parent",
    "branch_of",
    "subject_ref",
    "result",
    "severity",
    "priority",
)
"""Front-matter fields shown on one line by baton's commands: display-safe or refused."""


@dataclass(frozen=True, slots=True)
class Screened:
    """A file that may be handed to Core; the few fields baton routes and shows by."""

    kind: str
    envelope_id: str
    digest: str
    """SHA-256 of the exact bytes screened."""
    size: int
    subject: str = ""
    sender: str = ""
    recipient: str = ""
    parent: str | None = None
    operation_id: str | None = None

    ok: Literal[True] = True


@dataclass(frozen=True, slots=True)
class Refused:
    """A file Core must not see, and why."""

    reason: ScreenReason
    detail: str

    ok: Literal[False] = False


Verdict = Screened | Refused


def verdict_from_json(data: Mapping[str, Any]) -> Screened | Refused:  # JSON in: a worker line
    """Rebuild a verdict from the worker's JSON (unknown keys ignored)."""
    if data.get("ok") is True:
        names = set(Screened.__dataclass_fields__) - {"ok"}
        return Screened(**{k: v for k, v in data.items() if k in names})
    return Refused(reason=data.get("reason", "parse_crashed"), detail=str(data.get("detail", "")))


def to_json(verdict: Screened | Refused) -> dict[str, Any]:  # JSON out: a worker line
    return asdict(verdict)


def unsafe_line(value: str) -> bool:
    """Whether ``value`` cannot be shown as one terminal line as it is."""
    return "\n" in value or "\t" in value or neutralize_terminal(value) != value


MAX_SUBJECT_CHARS = 200
"""A subject is a title, shown on one line everywhere (status, inbox, the dashboard)."""


def subject_problem(subject: str) -> str | None:
    """Why ``subject`` cannot be a new TASK's subject (``None``: it can), for every entry
    point (``baton task new``, the dashboard, an agent's ``create_task``).

    Besides one printable line of bounded length: FCoP's parser ends a header at the
    first ``---`` before a line break anywhere in it, so a subject whose YAML has a line
    ending in ``---`` (``"done---"``, or a long one folded there) would make a TASK no
    one can read; it is refused here, in words, instead of as a schema error later.
    """
    text = subject.strip()
    if not text:
        return "the subject must not be empty"
    if unsafe_line(text):
        return (
            "the subject must be one line of printable text "
            "(no control, bidi or line-break characters)"
        )
    if len(text) > MAX_SUBJECT_CHARS:
        return f"the subject must be at most {MAX_SUBJECT_CHARS} characters (it has {len(text)})"
    if "---\n" in yaml.safe_dump({"subject": text}, allow_unicode=True, sort_keys=False):
        return "the subject must not put '---' at the end of a line (FCoP ends a header there)"
    return None


def front_matter(text: str) -> str | None:
    """The YAML between the delimiters, split exactly as Core splits it (None: incomplete)."""
    if not text.startswith("---\n") or "\n---\n" not in text[3:]:
        return None
    return text.split("---\n", 2)[1]


def _decode(data: bytes) -> str | Refused:
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as exc:
        return Refused("invalid_utf8", f"not UTF-8 at byte {exc.start} ({exc.reason})")
    if text.startswith("\ufeff"):
        return Refused("not_lf", "starts with a byte-order mark (FCoP requires UTF-8 without BOM)")
    if "\r" in text:
        return Refused("not_lf", "contains CR characters (FCoP requires LF line endings)")
    return text


_LOADERS: dict[IntakeLimits, type[Any]] = {}


def _loader(limits: IntakeLimits) -> type[Any]:
    loader = _LOADERS.get(limits)
    if loader is None:
        from fcop.v4 import encoding

        base = encoding._UniqueLoader
        while getattr(base, "_baton_bounded", False):  # already hardened: bound the original
            base = base.__mro__[2]
        loader = _LOADERS[limits] = bounded_loader(base, limits)
    return loader


def screen_envelope(
    data: bytes, *, limits: IntakeLimits = DEFAULT_LIMITS, expect_id: str | None = None
) -> Screened | Refused:
    """The verdict on one envelope's bytes (see the module docstring for the order)."""
    if len(data) > limits.max_file_bytes:
        return Refused(
            "too_large", f"{len(data)} bytes, over the {limits.max_file_bytes}-byte limit"
        )
    text = _decode(data)
    if isinstance(text, Refused):
        return text
    header = front_matter(text)
    if header is None:
        return Refused(
            "incomplete_front_matter", "no complete '---' front matter (a partial write?)"
        )
    size = len(header.encode("utf-8"))
    if size > limits.max_frontmatter_bytes:
        return Refused(
            "front_matter_too_large",
            f"{size} bytes of front matter, over the {limits.max_frontmatter_bytes}-byte limit",
        )
    from fcop.errors import FcopError

    try:
        fields = yaml.load(header, Loader=_loader(limits))  # noqa: S506 - a bounded SafeLoader
    except YamlLimitError as exc:
        return Refused(exc.reason, exc.detail)
    except (yaml.YAMLError, ValueError, TypeError, FcopError) as exc:
        # FcopError: Core's loader refuses duplicate and non-string keys itself.
        return Refused("yaml_invalid", _one_line(str(exc)))
    except RecursionError:
        return Refused("yaml_too_deep", "nesting exhausted the parser's recursion limit")
    if not isinstance(fields, dict):
        return Refused("not_an_envelope", "the front matter is not a YAML mapping")
    kind = fields.get("type")
    if kind not in ENVELOPE_TYPES:
        return Refused("not_an_envelope", f"type {_shown(kind)} is not one of {ENVELOPE_TYPES}")
    envelope_id = fields.get(f"{str(kind).lower()}_id")
    if not isinstance(envelope_id, str) or (expect_id is not None and envelope_id != expect_id):
        return Refused(
            "id_mismatch", f"{kind.lower()}_id {_shown(envelope_id)} does not match the file name"
        )
    for name in LINE_FIELDS:
        value = fields.get(name)
        if isinstance(value, str) and unsafe_line(value):
            return Refused(
                "unsafe_text",
                f"{name} holds control, bidi or line-break characters: {_shown(value)}",
            )
    operation_id = fields.get("operation_id")
    parent = fields.get("parent")
    return Screened(
        kind=str(kind),
        envelope_id=envelope_id,
        digest=hashlib.sha256(data).hexdigest(),
        size=len(data),
        subject=_str(fields.get("subject")),
        sender=_str(fields.get("sender")),
        recipient=_str(fields.get("recipient")),
        parent=parent if isinstance(parent, str) else None,
        operation_id=operation_id if isinstance(operation_id, str) else None,
    )


def screen_json(
    data: bytes, *, limits: IntakeLimits = DEFAULT_LIMITS
) -> dict[str, Any] | Refused:  # JSON in: a fact Core wrote, parsed under bounds
    """Core's JSON facts: size cap, UTF-8, an object, nesting Python's parser survives."""
    if len(data) > limits.max_json_bytes:
        return Refused(
            "too_large", f"{len(data)} bytes, over the {limits.max_json_bytes}-byte limit"
        )
    try:
        value = json.loads(data.decode("utf-8"))
    except UnicodeDecodeError as exc:
        return Refused("invalid_utf8", f"not UTF-8 at byte {exc.start} ({exc.reason})")
    except RecursionError:
        return Refused("yaml_too_deep", "JSON nesting exhausted the parser's recursion limit")
    except ValueError as exc:
        return Refused("json_invalid", _one_line(str(exc)))
    if not isinstance(value, dict):
        return Refused("json_invalid", "not a JSON object")
    return value


def _str(value: object) -> str:
    return value if isinstance(value, str) else ""


def _one_line(text: str, limit: int = 300) -> str:
    flat = " ".join(text.split())
    return flat if len(flat) <= limit else flat[: limit - 1] + "…"


def _shown(value: object, limit: int = 80) -> str:
    """A value quoted for a refusal message: escapes visible, bounded."""
    text = repr(value)
    return text if len(text) <= limit else text[: limit - 1] + "…"
