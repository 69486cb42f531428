"""Coordination errors: FCoP's frozen error codes translated once, at the port.

This subtree hangs under :class:`baton.errors.BatonError`::

    BatonError
    └── CoordinationError                 anything in FCoP coordination
        ├── LegacyWorkspaceError          a 1.x–3.x (or unknown) workspace; never touched
        ├── WorkspaceNotInitialized       no ``fcop/fcop.json`` yet
        ├── TaskNotFound                  no TASK with that id in any lifecycle stage
        ├── RoutingError                  a recipient baton will not guess a role for
        ├── Unresolved                    recovery's evidence allows no repair: a human must
        │                                 look (baton.fcop_port.recovery)
        ├── YamlLimitError       [remote] a task file over an intake bound (alias bomb, depth,
        │                                 size; baton.intake.yaml_guard)
        └── FcopProtocolError             ``fcop.errors.V4ProtocolError``, mapped by ``code``
            ├── StateAmbiguous            two-stage window (retry), or a stuck move
            ├── LifecycleConflict         wrong stage now (lost a claim race, already moved)
            ├── EvidenceError             missing/ambiguous REPORT head, stale attempt
            ├── AuthorizationRefused      T4–T7 authorization missing, invalid, expired, reused
            ├── InvalidEnvelope           a file or request that is not a valid 4.0 envelope
            ├── OperationConflict         same ``operation_id``, different request
            ├── WorkspaceError            wrong/unsupported workspace, filesystem, encoding
            └── RecoveryRequired          Core preserved evidence and wants a human

The mapping is a table (:data:`CODE_TO_ERROR`) so a new Core code lands in one
place; an unknown code becomes the base :class:`FcopProtocolError`, never a
silent success. Every mapped error keeps ``code``, ``operation_ref`` and
``subject_ref`` and chains the original with ``raise ... from exc``.
"""

from __future__ import annotations

from collections.abc import Mapping
from types import MappingProxyType

from baton.errors import BatonError

__all__ = [
    "CODE_TO_ERROR",
    "AuthorizationRefused",
    "CoordinationError",
    "EvidenceError",
    "FcopProtocolError",
    "InvalidEnvelope",
    "LegacyWorkspaceError",
    "LifecycleConflict",
    "OperationConflict",
    "RecoveryRequired",
    "RoutingError",
    "StateAmbiguous",
    "TaskNotFound",
    "WorkspaceError",
    "WorkspaceNotInitialized",
    "map_fcop_error",
]


class CoordinationError(BatonError):
    """Base of every FCoP coordination failure baton raises."""


class LegacyWorkspaceError(CoordinationError):
    """The project holds an FCoP workspace baton must not write to (1.x–3.x, unknown).

    ``guidance`` is the multi-line "how to migrate" text shown to the user.
    """

    def __init__(self, message: str, *, kind: str, evidence: tuple[str, ...], guidance: str):
        super().__init__(message)
        self.kind = kind
        self.evidence = evidence
        self.guidance = guidance


class WorkspaceNotInitialized(CoordinationError):
    """There is no FCoP workspace yet (run ``baton init``)."""


class TaskNotFound(CoordinationError):
    """No lifecycle stage holds a TASK with this id."""

    def __init__(self, task_id: str) -> None:
        super().__init__(f"no TASK {task_id} in any lifecycle stage")
        self.task_id = task_id


class RoutingError(CoordinationError):
    """A recipient maps to no configured role; baton never guesses one."""


class FcopProtocolError(CoordinationError):
    """A ``V4ProtocolError`` from the ``fcop`` library, with its frozen ``code``."""

    def __init__(
        self,
        message: str,
        *,
        code: str,
        operation_ref: str | None = None,
        subject_ref: str | None = None,
    ) -> None:
        super().__init__(f"{code}: {message}")
        self.code = code
        self.fcop_message = message
        self.operation_ref = operation_ref
        self.subject_ref = subject_ref


class StateAmbiguous(FcopProtocolError):
    """A TASK is visible in two stages: normally a move in flight, so retry."""


class LifecycleConflict(FcopProtocolError):
    """The TASK is not where the request says (lost a race, or already moved)."""


class EvidenceError(FcopProtocolError):
    """T3–T5 evidence is missing or ambiguous (no REPORT, two heads, old attempt)."""


class AuthorizationRefused(FcopProtocolError):
    """An authorized transition (T4–T7) was refused by Core or by baton's policy."""


class InvalidEnvelope(FcopProtocolError):
    """A file or request is not a valid FCoP 4.0 envelope (schema, encoding, relation)."""


class OperationConflict(FcopProtocolError):
    """The ``operation_id`` was already used for a different request."""


class WorkspaceError(FcopProtocolError):
    """Workspace identity, version, encoding or filesystem is unsupported or changed."""


class RecoveryRequired(FcopProtocolError):
    """Core found an interrupted operation or a held lock and preserved the evidence."""


CODE_TO_ERROR: Mapping[str, type[FcopProtocolError]] = MappingProxyType(
    {
        "STATE_AMBIGUOUS": StateAmbiguous,
        "INVALID_TRANSITION": LifecycleConflict,
        "LEGACY_TRANSITION_NOT_ALLOWED": LifecycleConflict,
        "ROOT_NOT_ACTIVE": LifecycleConflict,
        "BRANCH_NOT_TERMINAL": LifecycleConflict,
        "BRANCH_DEPTH_EXCEEDED": LifecycleConflict,
        "REPORT_REQUIRED": EvidenceError,
        "REPORT_HEAD_AMBIGUOUS": EvidenceError,
        "ATTEMPT_MISMATCH": EvidenceError,
        "REVIEW_REQUIRED": EvidenceError,
        "EVIDENCE_DIGEST_MISMATCH": EvidenceError,
        "FAMILY_CONVERGENCE_REQUIRED": EvidenceError,
        "FAMILY_CONVERGENCE_MISMATCH": EvidenceError,
        "AUTHORIZATION_REQUIRED": AuthorizationRefused,
        "AUTHORIZATION_INVALID": AuthorizationRefused,
        "AUTHORIZATION_EXPIRED": AuthorizationRefused,
        "AUTHORIZATION_REUSED": AuthorizationRefused,
        "AUTHORIZATION_PROFILE_UNAVAILABLE": AuthorizationRefused,
        "INVALID_ENVELOPE": InvalidEnvelope,
        "RELATION_INVALID": InvalidEnvelope,
        "REFERENCE_UNRESOLVED": InvalidEnvelope,
        "OPERATION_ID_CONFLICT": OperationConflict,
        "WORKSPACE_ID_MISMATCH": WorkspaceError,
        "WORKSPACE_ID_CLONE_CONFLICT": WorkspaceError,
        "UNSUPPORTED_PROTOCOL": WorkspaceError,
        "UNSUPPORTED_WORKSPACE_VERSION": WorkspaceError,
        "UNSUPPORTED_ENCODING": WorkspaceError,
        "UNSUPPORTED_FILESYSTEM": WorkspaceError,
        "TARGET_ALREADY_EXISTS_DIFFERENT": RecoveryRequired,
        "RECOVERY_REQUIRED": RecoveryRequired,
        "LOCK_RECOVERY_REQUIRED": RecoveryRequired,
    }
)
"""Every frozen 4.0 code (31, plus ``toolkit:`` extensions falling to the base)."""


def map_fcop_error(exc: BaseException) -> CoordinationError:
    """Translate ``fcop.errors.V4ProtocolError`` into baton's tree (other errors pass).

    Callers ``raise map_fcop_error(exc) from exc`` so the original stays chained.
    """
    code = getattr(exc, "code", None)
    if isinstance(code, str):
        cls = CODE_TO_ERROR.get(code, FcopProtocolError)
        return cls(
            str(exc),
            code=code,
            operation_ref=getattr(exc, "operation_ref", None),
            subject_ref=getattr(exc, "subject_ref", None),
        )
    if isinstance(exc, CoordinationError):
        return exc
    return CoordinationError(f"{type(exc).__name__}: {exc}")
