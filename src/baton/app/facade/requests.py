"""What the CLI and the web use of human requests: the ledger, documents, answers, grants, rendering.

The surfaces import these names from here, never from the core's modules, so the
core can move behind them (tests/test_architecture.py holds the rule).
"""

from baton.requests.errors import (
    AnswerConflict,
    IllegalTransition,
    InvalidAnswer,
    NotPending,
    UnknownRequest,
)
from baton.requests.grant_book import GrantBook
from baton.requests.grants import GRANT_SCOPES, Grant, default_subject
from baton.requests.ledger import AnswerResult, Ledger, RequestRecord
from baton.requests.model import (
    Answer,
    BooleanField,
    BranchConflict,
    ChangedFileView,
    ContentValue,
    DiffPreview,
    ElicitationAnswer,
    ElicitationRequest,
    GrantSpec,
    MultiSelectField,
    NumberField,
    PermissionAnswer,
    PermissionRequest,
    PlanAnswer,
    PlanRequest,
    QuestionAnswer,
    QuestionRequest,
    QuestionSelection,
    ReviewAnswer,
    ReviewChanges,
    ReviewRequest,
    StringField,
    parse_answer,
)
from baton.requests.policy import AuditMode, Policy, tool_call_paths
from baton.requests.records import record_from_row
from baton.requests.render import answer_hint, grant_data, render, to_data
from baton.requests.states import State
from baton.requests.validate import validate_answer

__all__ = [
    "GRANT_SCOPES",
    "Answer",
    "AnswerConflict",
    "AnswerResult",
    "AuditMode",
    "BooleanField",
    "BranchConflict",
    "ChangedFileView",
    "ContentValue",
    "DiffPreview",
    "ElicitationAnswer",
    "ElicitationRequest",
    "Grant",
    "GrantBook",
    "GrantSpec",
    "IllegalTransition",
    "InvalidAnswer",
    "Ledger",
    "MultiSelectField",
    "NotPending",
    "NumberField",
    "PermissionAnswer",
    "PermissionRequest",
    "PlanAnswer",
    "PlanRequest",
    "Policy",
    "QuestionAnswer",
    "QuestionRequest",
    "QuestionSelection",
    "RequestRecord",
    "ReviewAnswer",
    "ReviewChanges",
    "ReviewRequest",
    "State",
    "StringField",
    "UnknownRequest",
    "answer_hint",
    "default_subject",
    "grant_data",
    "parse_answer",
    "record_from_row",
    "render",
    "to_data",
    "tool_call_paths",
    "validate_answer",
]
