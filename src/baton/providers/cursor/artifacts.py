"""``cursor/generate_image`` → ``artifact.generated`` and ``artifact.viewed``, never bytes.

Params: ``{toolCallId, description, filePath?, referenceImagePaths?}``. The generated
image's path becomes one :class:`ArtifactGenerated` and each reference image one
:class:`ArtifactViewed` (emitted first: the references were inputs), all with
``registered=False``: a reference is metadata, not an ingested artifact, and must
be revalidated before any later ingestion.

Every path goes through :func:`~baton.providers.cursor.containment.resolve_artifact_reference`.
A refused path yields :class:`SecurityPathRefused` plus a ``provider.notice``
(``artifact_refused``) and no artifact; nothing is invented (no path, no
artifact; no bytes are ever read or produced, so ``imageData`` is never sent back).

Reply (acp.md §2): ``generated`` with the agent's own ``filePath`` when it was
accepted (or without one when none was given), ``rejected`` with the reason when
the generated image's path was refused.
"""

from __future__ import annotations

from collections.abc import Mapping
from functools import partial
from pathlib import PurePosixPath

from baton.errors import SecurityError
from baton.events.bounds import clip_text
from baton.events.model import (
    ArtifactGenerated,
    ArtifactViewed,
    Payload,
    SecurityPathRefused,
)
from baton.events.redaction import NoRedaction, Redaction
from baton.jsontypes import JsonMapping, JsonObject
from baton.providers.cursor._common import outcome
from baton.providers.cursor.containment import display_candidate, resolve_artifact_reference
from baton.providers.inventory import notice
from baton.security.paths import PathRefused

__all__ = [
    "CONTROL",
    "MAX_REFERENCES",
    "METHOD",
    "generate_image",
    "media_type",
]

METHOD = "cursor/generate_image"
_notice = partial(notice, method=METHOD)
"""A notice of this method (bounded; ``severity=`` for another than a warning)."""
CONTROL = "artifact_containment"
MAX_REFERENCES = 32

_MEDIA_TYPES: Mapping[str, str] = {
    ".png": "image/png",
    ".jpg": "image/jpeg",
    ".jpeg": "image/jpeg",
    ".gif": "image/gif",
    ".webp": "image/webp",
    ".svg": "image/svg+xml",
    ".bmp": "image/bmp",
}


def media_type(reference: str) -> str | None:
    """Guessed from the suffix only (the file is never opened)."""
    return _MEDIA_TYPES.get(PurePosixPath(reference).suffix.lower())


def generate_image(
    params: JsonMapping, *, workspace: str, redaction: Redaction | None = None
) -> tuple[list[Payload], JsonObject]:
    """Payloads and the reply for one ``cursor/generate_image``."""
    redaction = redaction or NoRedaction()
    description = params.get("description")
    title = clip_text(redaction.text(description), 400) if isinstance(description, str) else None
    payloads: list[Payload] = []

    references = params.get("referenceImagePaths")
    if references is not None and not isinstance(references, list):
        payloads.append(_notice("malformed", "referenceImagePaths is not a list; ignored"))
        references = []
    for index, ref in enumerate(references or []):
        if index >= MAX_REFERENCES:
            payloads.append(
                _notice(
                    "artifact_refused",
                    f"{len(references or []) - MAX_REFERENCES} reference image(s) past the "
                    f"limit of {MAX_REFERENCES} not recorded",
                )
            )
            break
        if not isinstance(ref, str):
            payloads.append(_notice("malformed", "a reference image path is not a string"))
            continue
        try:
            rel = resolve_artifact_reference(workspace, ref)
        except SecurityError as exc:
            payloads.extend(_refused(workspace, ref, "reference image", exc))
            continue
        payloads.append(ArtifactViewed(reference=rel, media_type=media_type(rel), title=None))

    file_path = params.get("filePath")
    if file_path is None:
        payloads.append(
            _notice(
                "artifact",
                "image generated without a file path: nothing to reference"
                + (f" ({title})" if title else ""),
                severity="info",
            )
        )
        return payloads, outcome("generated")
    if not isinstance(file_path, str):
        payloads.append(_notice("malformed", "filePath is not a string"))
        return payloads, outcome("rejected", reason="filePath is not a string")
    try:
        rel = resolve_artifact_reference(workspace, file_path)
    except SecurityError as exc:
        payloads.extend(_refused(workspace, file_path, "generated image", exc))
        return payloads, outcome("rejected", reason=f"path refused by baton: {_reason(exc)}")
    payloads.append(ArtifactGenerated(reference=rel, media_type=media_type(rel), title=title))
    return payloads, outcome("generated", filePath=file_path)


def _refused(workspace: str, path: str, role: str, exc: SecurityError) -> list[Payload]:
    subject = display_candidate(workspace, path)
    return [
        SecurityPathRefused(control=CONTROL, subject=subject, reason=_reason(exc)),
        _notice("artifact_refused", f"{role} path {subject!r} refused: {_reason(exc)}"),
    ]


def _reason(exc: SecurityError) -> str:
    return exc.reason if isinstance(exc, PathRefused) else str(exc)
