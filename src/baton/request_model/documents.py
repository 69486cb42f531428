"""Request documents and answers: what an agent asks a human, and what comes back.

One frozen pydantic model per kind of request, discriminated by ``kind``:

- :class:`PermissionRequest`: ACP ``session/request_permission`` (a tool call
  summary plus the agent's own options);
- :class:`QuestionRequest`: Cursor ``cursor/ask_question`` (1–64 questions, each
  single or multiple selection, all required);
- :class:`PlanRequest`: Cursor ``cursor/create_plan`` (full Markdown, overview,
  todos, phases, project flag), bound to a SHA-256 ``revision``;
- :class:`ElicitationRequest`: ACP ``elicitation/create`` in form mode, with the
  flat primitive schema subset ACP allows;
- :class:`ReviewRequest`: FCoP review approvals (the coordination layer).

These documents are the contract with the provider normalizers: a normalizer
builds one (for questions with opaque ``question-N``/``option-N`` ids that map to
the agent's native ids) and hands it to the ledger, which persists it byte-exact.
Opaque ids exist so a surface never shows, and a human never types, an id the
agent chose: they are short, predictable, and cannot collide with each other.

Limits are checked by :func:`check_limits` at the durable boundary (the ledger
calls it before writing): the canonical JSON of a document is at most
:data:`MAX_DOCUMENT_BYTES` of UTF-8 and any question text at most
:data:`MAX_DESCRIPTION_CHARS` characters. Oversize is refused with
:class:`~baton.request_model.errors.PayloadTooLarge`, never truncated: an approval
that a human sees must be exactly what the agent will act on. (The 4 KiB preview
cap of diagnostics does not apply here.)

Length: one model per request and answer kind with the limits they share: the one document model every part validates with.
"""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Annotated, Any, Literal

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    StrictBool,
    StrictFloat,
    StrictInt,
    StrictStr,
    TypeAdapter,
    ValidationError,
    model_validator,
)

from baton.request_model.errors import InvalidAnswer, InvalidDocument, PayloadTooLarge

__all__ = [
    "ANSWER_ADAPTER",
    "DOCUMENT_ADAPTER",
    "MAX_DESCRIPTION_CHARS",
    "MAX_DOCUMENT_BYTES",
    "MAX_OPTIONS",
    "MAX_QUESTIONS",
    "Answer",
    "BooleanField",
    "BranchConflict",
    "ChangedFileView",
    "CommitView",
    "DecidedBy",
    "DiffPreview",
    "ElicitationAnswer",
    "ElicitationField",
    "ElicitationRequest",
    "ElicitationSchema",
    "EnumChoice",
    "GrantContext",
    "GrantScope",
    "GrantSpec",
    "MultiSelectField",
    "NativeQuestion",
    "NumberField",
    "PermissionAnswer",
    "PermissionOption",
    "PermissionRequest",
    "PlanAnswer",
    "PlanPhase",
    "PlanRequest",
    "PlanTodo",
    "Question",
    "QuestionAnswer",
    "QuestionOption",
    "QuestionRequest",
    "QuestionSelection",
    "RequestDocument",
    "RequestKind",
    "ReviewAnswer",
    "ReviewChanges",
    "ReviewRequest",
    "StringField",
    "ToolCallSummary",
    "ToolLocation",
    "canonical_json",
    "check_limits",
    "headline",
    "parse_answer",
    "parse_document",
    "plan_revision",
]

MAX_DOCUMENT_BYTES = 196 * 1024
"""Cap on the UTF-8 size of a document's canonical JSON (200,704 bytes)."""

MAX_DESCRIPTION_CHARS = 100_000
"""Cap, in characters (code points), on a question's prompt or description."""

MAX_QUESTIONS = 64
MAX_OPTIONS = 128

RequestKind = Literal["permission", "question", "plan", "elicitation", "review"]
DecidedBy = Literal["human", "policy", "headless"]

QUESTION_ID_PATTERN = r"^question-[1-9][0-9]*$"
OPTION_ID_PATTERN = r"^option-[1-9][0-9]*$"


# Any: any JSON value.
def canonical_json(value: Any) -> str:
    """The one JSON spelling baton hashes, measures and stores.

    Sorted keys, no whitespace, real characters (not ``\\u`` escapes) so the byte
    count is the UTF-8 size a human would expect; control characters, including
    NUL, are escaped by the JSON encoder and so round-trip through SQLite TEXT.
    """
    return json.dumps(
        value, ensure_ascii=False, sort_keys=True, separators=(",", ":"), allow_nan=False
    )


class _Frozen(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")


def _unique(values: Iterator[str], what: str) -> None:
    seen: set[str] = set()
    for value in values:
        if value in seen:
            raise ValueError(f"duplicate {what} {value!r}")
        seen.add(value)


# ------------------------------------------------------------------- permission

PermissionOptionKind = Literal["allow_once", "allow_always", "reject_once", "reject_always"]


class PermissionOption(_Frozen):
    """One of the agent's own options; baton answers with its ``option_id``."""

    option_id: str = Field(min_length=1)
    name: str
    kind: PermissionOptionKind


class ToolLocation(_Frozen):
    path: str
    line: int | None = None


class DiffPreview(_Frozen):
    """A proposed file change as the agent sent it (``old_text`` None = new file)."""

    path: str
    old_text: str | None = None
    new_text: str


class ToolCallSummary(_Frozen):
    """What the tool call would do: enough for a human to decide, and for policy.

    ``locations`` and the diff paths feed the policy's outside-workspace rule;
    ``command`` is the shell command for ``execute`` tools when the agent said one.
    """

    tool_call_id: str
    title: str
    kind: str = "other"
    """ACP tool kind (``read``, ``edit``, ``execute``, ...); unknown kinds count as ``other``."""
    command: str | None = None
    diffs: tuple[DiffPreview, ...] = ()
    locations: tuple[ToolLocation, ...] = ()
    raw_input: Any = None
    """The agent-specific ``rawInput``, kept for display and path extraction."""


GrantScope = Literal["turn", "task", "role", "run", "project"]
"""Where a human's grant applies (see :mod:`baton.requests.grants`)."""


class GrantContext(_Frozen):
    """Who asked, beyond the run and turn the ledger row names: the team's task tree and
    role (None outside ``baton up``). Set by the runner, so an answer given anywhere can
    scope a grant to "this task tree" or "this role"."""

    task: str | None = None
    role: str | None = None
    workspace: str | None = None
    """Where the agent works: edit grants are globs relative to it."""


class PermissionRequest(_Frozen):
    """ACP ``session/request_permission``."""

    kind: Literal["permission"] = "permission"
    tool_call: ToolCallSummary
    options: tuple[PermissionOption, ...] = Field(min_length=1)
    allow_always_granted: bool = False
    """Kept so stored documents still load; baton never answers ``allow_always`` (the
    agent's own memory of approvals would escape baton's scopes and audit)."""
    context: GrantContext | None = None
    """The team context a grant given with the answer may be scoped to."""

    @model_validator(mode="after")
    def _unique_options(self) -> PermissionRequest:
        _unique((o.option_id for o in self.options), "permission option id")
        return self


# --------------------------------------------------------------------- question


class QuestionOption(_Frozen):
    id: str = Field(pattern=OPTION_ID_PATTERN)
    """Opaque id shown to humans, unique within its question."""
    native_id: str
    """The agent's own option id, sent back in the reply."""
    label: str
    description: str | None = None


class Question(_Frozen):
    """One required question; ``single`` takes exactly one option, ``multiple`` one or more."""

    id: str = Field(pattern=QUESTION_ID_PATTERN)
    native_id: str
    prompt: str
    description: str | None = None
    selection: Literal["single", "multiple"] = "single"
    options: tuple[QuestionOption, ...] = Field(min_length=1, max_length=MAX_OPTIONS)

    @model_validator(mode="after")
    def _unique_options(self) -> Question:
        _unique((o.id for o in self.options), f"option id in {self.id}")
        _unique((o.native_id for o in self.options), f"native option id in {self.id}")
        return self

    def option(self, option_id: str) -> QuestionOption | None:
        return next((o for o in self.options if o.id == option_id), None)


@dataclass(frozen=True, slots=True)
class NativeQuestion:
    """A question as an agent sends it, before opaque ids are assigned."""

    native_id: str
    prompt: str
    options: Sequence[tuple[str, str]]
    """``(native option id, label)`` pairs, in the agent's order."""
    multiple: bool = False
    description: str | None = None
    option_descriptions: Mapping[str, str] = field(default_factory=dict)


class QuestionRequest(_Frozen):
    """Cursor ``cursor/ask_question``; every question must be answered."""

    kind: Literal["question"] = "question"
    tool_call_id: str | None = None
    title: str | None = None
    questions: tuple[Question, ...] = Field(min_length=1, max_length=MAX_QUESTIONS)

    @model_validator(mode="after")
    def _unique_questions(self) -> QuestionRequest:
        _unique((q.id for q in self.questions), "question id")
        _unique((q.native_id for q in self.questions), "native question id")
        return self

    def question(self, question_id: str) -> Question | None:
        return next((q for q in self.questions if q.id == question_id), None)

    @classmethod
    def from_native(
        cls,
        questions: Sequence[NativeQuestion],
        *,
        title: str | None = None,
        tool_call_id: str | None = None,
    ) -> QuestionRequest:
        """Number questions ``question-1..`` and each question's options ``option-1..``."""
        return cls(
            title=title,
            tool_call_id=tool_call_id,
            questions=tuple(
                Question(
                    id=f"question-{qi}",
                    native_id=q.native_id,
                    prompt=q.prompt,
                    description=q.description,
                    selection="multiple" if q.multiple else "single",
                    options=tuple(
                        QuestionOption(
                            id=f"option-{oi}",
                            native_id=native,
                            label=label,
                            description=q.option_descriptions.get(native),
                        )
                        for oi, (native, label) in enumerate(q.options, start=1)
                    ),
                )
                for qi, q in enumerate(questions, start=1)
            ),
        )


# ------------------------------------------------------------------------- plan


class PlanTodo(_Frozen):
    id: str
    content: str
    status: str = "pending"


class PlanPhase(_Frozen):
    name: str
    todos: tuple[PlanTodo, ...] = ()


# Any: a plan's JSON fields, hashed as they are.
def plan_revision(plan_fields: Mapping[str, Any]) -> str:
    """SHA-256 (hex) of the canonical JSON of every plan field except ``revision``."""
    body = {k: v for k, v in plan_fields.items() if k != "revision"}
    return hashlib.sha256(canonical_json(body).encode("utf-8")).hexdigest()


class PlanRequest(_Frozen):
    """Cursor ``cursor/create_plan``: the complete plan, never a summary.

    ``revision`` is derived: leave it empty to have it computed, or pass it to
    have it verified (a persisted plan whose content no longer matches its
    revision fails to load). An approval names the revision it approves, so an
    answer given while looking at an older plan is rejected as stale.
    """

    kind: Literal["plan"] = "plan"
    tool_call_id: str | None = None
    name: str | None = None
    overview: str | None = None
    markdown: str
    todos: tuple[PlanTodo, ...] = ()
    phases: tuple[PlanPhase, ...] = ()
    is_project: bool = False
    revision: str = ""

    @model_validator(mode="after")
    def _derive_revision(self) -> PlanRequest:
        expected = plan_revision(self.model_dump(mode="json"))
        if not self.revision:
            # Frozen model: the derived field is set once, during validation.
            object.__setattr__(self, "revision", expected)
        elif self.revision != expected:
            raise ValueError(
                f"plan revision {self.revision!r} does not match its content ({expected!r})"
            )
        return self


# ------------------------------------------------------------------ elicitation


class EnumChoice(_Frozen):
    value: str
    title: str | None = None


class StringField(_Frozen):
    type: Literal["string"] = "string"
    name: str
    title: str | None = None
    description: str | None = None
    min_length: int | None = Field(default=None, ge=0)
    max_length: int | None = Field(default=None, ge=0)
    pattern: str | None = None
    format: Literal["email", "uri", "date", "date-time"] | None = None
    default: str | None = None
    choices: tuple[EnumChoice, ...] | None = None
    """Single-select enum (``enum`` or titled ``oneOf`` on the wire)."""

    @model_validator(mode="after")
    def _pattern_compiles(self) -> StringField:
        if self.pattern is not None:
            try:
                re.compile(self.pattern)
            except re.error as exc:
                raise ValueError(f"field {self.name!r}: pattern does not compile: {exc}") from None
        return self


class NumberField(_Frozen):
    type: Literal["number", "integer"]
    name: str
    title: str | None = None
    description: str | None = None
    minimum: float | None = None
    maximum: float | None = None
    default: float | None = None


class BooleanField(_Frozen):
    type: Literal["boolean"] = "boolean"
    name: str
    title: str | None = None
    description: str | None = None
    default: bool | None = None


class MultiSelectField(_Frozen):
    type: Literal["array"] = "array"
    name: str
    title: str | None = None
    description: str | None = None
    choices: tuple[EnumChoice, ...] = Field(min_length=1)
    min_items: int | None = Field(default=None, ge=0)
    max_items: int | None = Field(default=None, ge=0)
    default: tuple[str, ...] | None = None


ElicitationField = Annotated[
    StringField | NumberField | BooleanField | MultiSelectField, Field(discriminator="type")
]

_WIRE_KEYS: Mapping[str, frozenset[str]] = {
    "string": frozenset(
        {
            "type",
            "title",
            "description",
            "minLength",
            "maxLength",
            "pattern",
            "format",
            "default",
            "enum",
            "oneOf",
            "enumNames",
        }
    ),
    "number": frozenset({"type", "title", "description", "minimum", "maximum", "default"}),
    "integer": frozenset({"type", "title", "description", "minimum", "maximum", "default"}),
    "boolean": frozenset({"type", "title", "description", "default"}),
    "array": frozenset(
        {"type", "title", "description", "minItems", "maxItems", "items", "default"}
    ),
}


def _wire_choices(name: str, spec: Mapping[str, Any]) -> tuple[EnumChoice, ...] | None:
    if "oneOf" in spec or "anyOf" in spec:
        raw = spec.get("oneOf", spec.get("anyOf"))
        if not isinstance(raw, list):
            raise InvalidDocument(f"elicitation field {name!r}: oneOf/anyOf must be a list")
        return tuple(EnumChoice(value=c["const"], title=c.get("title")) for c in raw)
    if "enum" in spec:
        titles = spec.get("enumNames") or [None] * len(spec["enum"])
        return tuple(
            EnumChoice(value=v, title=t) for v, t in zip(spec["enum"], titles, strict=True)
        )
    return None


class ElicitationSchema(_Frozen):
    """The flat form ACP allows: an object of primitive (or string multi-select) fields."""

    title: str | None = None
    description: str | None = None
    fields: tuple[ElicitationField, ...] = ()
    required: tuple[str, ...] = ()

    @model_validator(mode="after")
    def _names(self) -> ElicitationSchema:
        _unique((f.name for f in self.fields), "elicitation field")
        names = {f.name for f in self.fields}
        unknown = [r for r in self.required if r not in names]
        if unknown:
            raise ValueError(f"required names unknown fields: {unknown}")
        return self

    def field(
        self, name: str
    ) -> StringField | NumberField | BooleanField | MultiSelectField | None:
        return next((f for f in self.fields if f.name == name), None)

    # Any: ACP's ``requestedSchema`` JSON from the agent, checked here.
    @classmethod
    def from_wire(cls, schema: Mapping[str, Any]) -> ElicitationSchema:
        """Parse ACP's ``requestedSchema``; anything outside the flat subset is refused.

        Nested objects, ``$ref``, non-string arrays and vendor (``_``-prefixed)
        property types are rejected rather than shown partially: a form a human
        fills in must be the whole form.
        """
        try:
            if schema.get("type", "object") != "object":
                raise InvalidDocument("requestedSchema must have type 'object'")
            props = schema.get("properties") or {}
            if not isinstance(props, Mapping):
                raise InvalidDocument("requestedSchema.properties must be an object")
            fields: list[StringField | NumberField | BooleanField | MultiSelectField] = []
            for name, spec in props.items():
                if not isinstance(spec, Mapping):
                    raise InvalidDocument(f"elicitation field {name!r} is not an object")
                ftype = spec.get("type")
                allowed = _WIRE_KEYS.get(ftype) if isinstance(ftype, str) else None
                if allowed is None:
                    raise InvalidDocument(
                        f"elicitation field {name!r} has unsupported type {ftype!r}"
                    )
                extra = sorted(k for k in spec if k not in allowed and k != "_meta")
                if extra:
                    raise InvalidDocument(
                        f"elicitation field {name!r} has unsupported keys {extra}"
                    )
                common = {
                    "name": name,
                    "title": spec.get("title"),
                    "description": spec.get("description"),
                }
                if ftype == "string":
                    fields.append(
                        StringField(
                            **common,
                            min_length=spec.get("minLength"),
                            max_length=spec.get("maxLength"),
                            pattern=spec.get("pattern"),
                            format=spec.get("format"),
                            default=spec.get("default"),
                            choices=_wire_choices(name, spec),
                        )
                    )
                elif ftype in ("number", "integer"):
                    fields.append(
                        NumberField(
                            **common,
                            type=ftype,
                            minimum=spec.get("minimum"),
                            maximum=spec.get("maximum"),
                            default=spec.get("default"),
                        )
                    )
                elif ftype == "boolean":
                    fields.append(BooleanField(**common, default=spec.get("default")))
                else:
                    items = spec.get("items")
                    if not isinstance(items, Mapping) or items.get("type", "string") != "string":
                        raise InvalidDocument(
                            f"elicitation field {name!r}: only string multi-selects are supported"
                        )
                    choices = _wire_choices(name, items)
                    if not choices:
                        raise InvalidDocument(
                            f"elicitation field {name!r}: a multi-select needs choices"
                        )
                    default = spec.get("default")
                    fields.append(
                        MultiSelectField(
                            **common,
                            choices=choices,
                            min_items=spec.get("minItems"),
                            max_items=spec.get("maxItems"),
                            default=tuple(default) if default is not None else None,
                        )
                    )
            return cls(
                title=schema.get("title"),
                description=schema.get("description"),
                fields=tuple(fields),
                required=tuple(schema.get("required") or ()),
            )
        except (ValidationError, KeyError, TypeError, ValueError) as exc:
            if isinstance(exc, InvalidDocument):
                raise
            raise InvalidDocument(
                f"requestedSchema is not the flat form ACP allows: {exc}"
            ) from None


class ElicitationRequest(_Frozen):
    """ACP ``elicitation/create`` in form mode (URL mode is not a human decision we hold)."""

    kind: Literal["elicitation"] = "elicitation"
    message: str
    requested_schema: ElicitationSchema
    tool_call_id: str | None = None


# ----------------------------------------------------------------------- review


class ChangedFileView(_Frozen):
    """One file of a task branch's change: status letter, path, lines added/removed."""

    status: str = Field(max_length=2)
    path: str
    old_path: str | None = None
    added: int | None = None
    """None: a binary file."""
    removed: int | None = None


class CommitView(_Frozen):
    commit: str = Field(max_length=64)
    author: str
    subject: str


class BranchConflict(_Frozen):
    """Another live task branch, and the files this one conflicts with it in."""

    branch: str
    paths: tuple[str, ...]


class ReviewChanges(_Frozen):
    """A task tree's branch against its base: the diff is the review (``baton.worktrees``).

    Bounded by whoever builds it to fit the document: ``diff`` is None when it did not
    fit (``note`` then says where to read it whole), ``files`` may stop short
    (``more_files`` counts the rest); the counts and conflicts are always whole."""

    branch: str
    base: str
    head: str
    merge_base: str
    files: tuple[ChangedFileView, ...] = ()
    more_files: int = 0
    added: int = 0
    removed: int = 0
    commits: tuple[CommitView, ...] = ()
    diff: str | None = None
    note: str = ""
    base_conflicts: tuple[str, ...] = ()
    """Files that conflict with the base tip now (the merge preflight)."""
    branch_conflicts: tuple[BranchConflict, ...] = ()
    """Other live task branches this one conflicts with (merging both will need care)."""
    merge_refused: str | None = None
    """Why the last approval of this tree did not merge (the review is open again)."""


class ReviewRequest(_Frozen):
    """An FCoP review approval: a human accepts or rejects a filed report."""

    kind: Literal["review"] = "review"
    task_id: str
    report_ref: str
    """Path of the report, relative to the FCoP root: a reference, never inlined."""
    summary: str
    role: str | None = None
    changes: ReviewChanges | None = None
    """A task tree on its own branch: its change against the base, and the preflight."""


RequestDocument = Annotated[
    PermissionRequest | QuestionRequest | PlanRequest | ElicitationRequest | ReviewRequest,
    Field(discriminator="kind"),
]
DOCUMENT_ADAPTER: TypeAdapter[RequestDocument] = TypeAdapter(RequestDocument)


# ---------------------------------------------------------------------- answers


class GrantSpec(_Frozen):
    """What a human grants with an ``allow``: the same kind of tool call on the same
    subject, within ``scope``, until ``for_seconds`` pass or ``uses`` are spent.

    ``subject`` narrows or widens what the request itself names: an argv prefix for a
    command (``pytest``, ``npm test``), a path glob inside the workspace for an edit, a
    host for a fetch; empty: derived from the request (:mod:`baton.requests.grants`)."""

    scope: GrantScope
    for_seconds: float | None = Field(default=None, gt=0, le=366 * 86400)
    uses: int | None = Field(default=None, ge=1, le=1_000_000)
    subject: str = Field(default="", max_length=1024)


class PermissionAnswer(_Frozen):
    """``allow``/``deny``; validation resolves ``option_id`` to the agent's own option.

    Always a one-time option: ``scope="always"`` is refused (baton never passes the
    agent's ``allow_always``); a lasting approval is a ``grant`` baton keeps and audits.
    A surface may name ``option_id`` directly; it must then agree with the decision.
    """

    kind: Literal["permission"] = "permission"
    decision: Literal["allow", "deny"]
    scope: Literal["once", "always"] = "once"
    option_id: str | None = None
    grant: GrantSpec | None = None
    """With ``allow``: also answer later requests like this one (a durable grant)."""

    @model_validator(mode="after")
    def _grant_allows(self) -> PermissionAnswer:
        if self.grant is not None and self.decision != "allow":
            raise ValueError("a grant goes with allow, not deny")
        return self


class QuestionSelection(_Frozen):
    question_id: str
    option_ids: tuple[str, ...]


class QuestionAnswer(_Frozen):
    """Selections by opaque id (``answered``), or the whole set declined (``skipped``)."""

    kind: Literal["question"] = "question"
    outcome: Literal["answered", "skipped"] = "answered"
    selections: tuple[QuestionSelection, ...] = ()
    reason: str | None = None


class PlanAnswer(_Frozen):
    kind: Literal["plan"] = "plan"
    decision: Literal["accept", "reject"]
    revision: str
    """The revision the human looked at; must equal the persisted one."""
    reason: str | None = None


ContentValue = StrictBool | StrictInt | StrictFloat | StrictStr | tuple[StrictStr, ...]


class ElicitationAnswer(_Frozen):
    kind: Literal["elicitation"] = "elicitation"
    action: Literal["accept", "decline", "cancel"]
    content: dict[str, ContentValue] | None = None


class ReviewAnswer(_Frozen):
    kind: Literal["review"] = "review"
    decision: Literal["approve", "reject"]
    reason: str | None = None


Answer = Annotated[
    PermissionAnswer | QuestionAnswer | PlanAnswer | ElicitationAnswer | ReviewAnswer,
    Field(discriminator="kind"),
]
ANSWER_ADAPTER: TypeAdapter[Answer] = TypeAdapter(Answer)


# ------------------------------------------------------------------ boundaries


def _first_error(exc: ValidationError) -> str:
    err = exc.errors(include_url=False)[0]
    loc = ".".join(str(p) for p in err["loc"])
    return f"{loc}: {err['msg']}" if loc else str(err["msg"])


# Any: plain JSON data, validated here.
def parse_document(data: Any) -> RequestDocument:
    """Validate a document from plain data (JSON object or dict) and check its limits."""
    try:
        doc = (
            DOCUMENT_ADAPTER.validate_json(data)
            if isinstance(data, str | bytes)
            else DOCUMENT_ADAPTER.validate_python(data)
        )
    except ValidationError as exc:
        raise InvalidDocument(f"invalid request document: {_first_error(exc)}") from None
    check_limits(doc)
    return doc


# Any: plain JSON data, validated here.
def parse_answer(data: Any) -> Answer:
    """Validate an answer's shape (not yet against its request: see ``validate``)."""
    try:
        return (
            ANSWER_ADAPTER.validate_json(data)
            if isinstance(data, str | bytes)
            else ANSWER_ADAPTER.validate_python(data)
        )
    except ValidationError as exc:
        raise InvalidAnswer(f"invalid answer: {_first_error(exc)}") from None


def _texts(doc: RequestDocument) -> Iterator[tuple[str, str]]:
    if isinstance(doc, QuestionRequest):
        for q in doc.questions:
            yield f"{q.id} prompt", q.prompt
            if q.description is not None:
                yield f"{q.id} description", q.description


def check_limits(doc: RequestDocument) -> str:
    """Return the canonical JSON of ``doc``, or refuse it as oversize or not Unicode.

    Lone surrogates (which JSON ``\\uD800`` escapes can smuggle in) are refused:
    they have no UTF-8 encoding, so they could neither be measured nor stored
    byte-exact.
    """
    for where, text in _texts(doc):
        if len(text) > MAX_DESCRIPTION_CHARS:
            raise PayloadTooLarge(
                f"{doc.kind} request {where} has {len(text)} characters; "
                f"the limit is {MAX_DESCRIPTION_CHARS} (rejected, not truncated)",
                what="description",
                size=len(text),
                limit=MAX_DESCRIPTION_CHARS,
            )
    text = canonical_json(doc.model_dump(mode="json"))
    try:
        size = len(text.encode("utf-8"))
    except UnicodeEncodeError:
        raise InvalidDocument(
            f"{doc.kind} request contains text that is not valid Unicode (lone surrogate)"
        ) from None
    if size > MAX_DOCUMENT_BYTES:
        raise PayloadTooLarge(
            f"{doc.kind} request is {size} bytes of UTF-8; the limit is "
            f"{MAX_DOCUMENT_BYTES} (rejected, not truncated)",
            what="document",
            size=size,
            limit=MAX_DOCUMENT_BYTES,
        )
    return text


def headline(doc: RequestDocument, width: int = 120) -> str:
    """A one-line title for events and lists (display only; the document stays whole)."""
    if isinstance(doc, PermissionRequest):
        text = doc.tool_call.title
    elif isinstance(doc, QuestionRequest):
        text = doc.title or doc.questions[0].prompt
    elif isinstance(doc, PlanRequest):
        text = doc.name or doc.overview or "Plan approval"
    elif isinstance(doc, ElicitationRequest):
        text = doc.message
    else:
        text = f"Review of {doc.task_id}"
    first = text.strip().splitlines()[0] if text.strip() else doc.kind
    return first if len(first) <= width else first[: width - 1] + "…"
