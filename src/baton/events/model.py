"""The canonical event model: one versioned stream for every agent.

Normalizers produce *payloads* (one frozen pydantic model per event type); the
sequencer stamps them into :class:`CanonicalEvent` envelopes with run/session/turn
identity, a per-run sequence number and a timestamp. The set of event types is
closed: :data:`PAYLOAD_TYPES` is the inventory, and anything a normalizer cannot
classify becomes a :class:`ProviderNotice` with category ``unclassified`` instead
of vanishing.

Bump :data:`SCHEMA_VERSION` on any incompatible change; ``schema/events.schema.json``
is generated from these models (``baton schema --check`` / tests fail when stale).

Length: one frozen model per canonical event type: the closed set, the JSON Schema's source, read as one inventory.
"""

from __future__ import annotations

from typing import Any, ClassVar, Literal

from pydantic import BaseModel, ConfigDict, Field, SerializeAsAny, model_validator
from pydantic_core import PydanticSerializationError, to_json

from baton.events.surrogates import repair_unencodable
from baton.jsontypes import JsonValue

__all__ = [
    "EVENT_FLAGS",
    "PAYLOAD_TYPES",
    "SCHEMA_VERSION",
    "TERMINAL_TURN_TYPES",
    "ArtifactGenerated",
    "ArtifactViewed",
    "BudgetExceeded",
    "BudgetRaised",
    "BudgetThreshold",
    "BudgetUnmetered",
    "BudgetWindowReset",
    "CanonicalEvent",
    "ClusterFencedOut",
    "ClusterPlacementChanged",
    "CommandsUpdated",
    "ConfigChanged",
    "DelegationChild",
    "DelegationCompleted",
    "DelegationStarted",
    "DelegationUpdated",
    "DiffContent",
    "ExceededAction",
    "HarnessDiagnostic",
    "JsonValue",
    "Location",
    "ModeChanged",
    "Payload",
    "PlanStep",
    "PlanUpdated",
    "ProviderNotice",
    "RequestAnswered",
    "RequestCancelled",
    "RequestCreated",
    "RequestDelivered",
    "RequestExpired",
    "RequestRejected",
    "SecurityAdmissionRefused",
    "SecurityEvent",
    "SecurityPathRefused",
    "SecurityPayloadRejected",
    "SecurityPinMismatch",
    "SecurityRedactionFallback",
    "SessionClosed",
    "SessionFailed",
    "SessionInfoUpdated",
    "SessionStarted",
    "ToolExecutionCompleted",
    "ToolExecutionProgressed",
    "ToolExecutionStarted",
    "ToolOutput",
    "TranscriptAssistant",
    "TranscriptThinking",
    "TranscriptUser",
    "TurnCancelled",
    "TurnCompleted",
    "TurnFailed",
    "TurnResumed",
    "TurnStalled",
    "TurnSubmitted",
    "UsageCounted",
    "UsageReported",
    "storable",
]

SCHEMA_VERSION = 1


class Payload(BaseModel):
    """Base of every event payload; ``TYPE`` is the canonical event type."""

    model_config = ConfigDict(frozen=True, extra="forbid")
    TYPE: ClassVar[str]


# --------------------------------------------------------------------------- session


class SessionStarted(Payload):
    """A session is ready: new, loaded (history replayed) or resumed."""

    TYPE: ClassVar[str] = "session.started"
    agent: str
    how: Literal["new", "load", "resume"]
    agent_session_id: str
    cwd: str
    protocol_version: int
    agent_info: dict[str, JsonValue] | None = None
    modes: list[dict[str, JsonValue]] = Field(default_factory=list)
    current_mode: str | None = None
    config_options: list[dict[str, JsonValue]] = Field(default_factory=list)
    replayed_updates: int = 0
    reason: str | None = None
    approval: Literal["asks", "read_only", "contained_edits", "self_approves", "unknown"] | None = (
        None
    )
    """Who approves mutations in the effective mode (``baton.providers.approval``)."""


class SessionInfoUpdated(Payload):
    """``session_info_update``: the agent renamed the session or touched it."""

    TYPE: ClassVar[str] = "session.info_updated"
    title: str | None = None
    updated_at: str | None = None
    cleared: list[str] = Field(default_factory=list)


class SessionClosed(Payload):
    """The session ended and its agent process was released."""

    TYPE: ClassVar[str] = "session.closed"
    reason: str
    exit_code: int | None = None


class SessionFailed(Payload):
    """The session could not be created or died; ``error`` is the typed cause."""

    TYPE: ClassVar[str] = "session.failed"
    error_type: str
    message: str
    auth_methods: list[str] = Field(default_factory=list)
    stderr_preview: str = ""


# ------------------------------------------------------------------------------ turn


class TurnSubmitted(Payload):
    """A prompt was written to the agent."""

    TYPE: ClassVar[str] = "turn.submitted"
    prompt_preview: str
    prompt_bytes: int
    prompt_sha256: str


class TurnCompleted(Payload):
    """Terminal: the agent answered the prompt with a stop reason."""

    TYPE: ClassVar[str] = "turn.completed"
    stop_reason: str
    duration_ms: int


class TurnFailed(Payload):
    """Terminal: the turn ended without a stop reason (error, timeout, agent death)."""

    TYPE: ClassVar[str] = "turn.failed"
    error_type: str
    message: str
    duration_ms: int
    stderr_preview: str = ""


class TurnCancelled(Payload):
    """Terminal: the turn was cancelled (by the user, a timeout, or a replacement)."""

    TYPE: ClassVar[str] = "turn.cancelled"
    reason: str
    duration_ms: int
    forced: bool = False
    """True when the agent ignored ``session/cancel`` and its process group was killed."""


class TurnStalled(Payload):
    """Diagnostic, not terminal: the agent has said nothing for ``silent_ms``.

    Emitted once when a running turn's silence reaches the threshold (configurable,
    60 s by default), long before the turn timeout; :class:`TurnResumed` clears it.
    """

    TYPE: ClassVar[str] = "turn.stalled"
    silent_ms: int
    threshold_ms: int
    timeout_in_ms: int | None = None
    """How long until the turn timeout ends the turn, when the turn has one."""


class TurnResumed(Payload):
    """The agent spoke again after a :class:`TurnStalled`: the stall is cleared."""

    TYPE: ClassVar[str] = "turn.resumed"
    silent_ms: int
    """How long the silence lasted in all."""


TERMINAL_TURN_TYPES = frozenset({"turn.completed", "turn.failed", "turn.cancelled"})

# ------------------------------------------------------------------------ transcript


class _TranscriptChunk(Payload):
    message_id: str
    text: str
    """Coalesced text of consecutive chunks with the same message id."""
    chunks: int = 1
    content_type: str = "text"
    """``text`` or the non-text ContentBlock type (then ``text`` describes it)."""


class TranscriptAssistant(_TranscriptChunk):
    TYPE: ClassVar[str] = "transcript.assistant"


class TranscriptThinking(_TranscriptChunk):
    TYPE: ClassVar[str] = "transcript.thinking"


class TranscriptUser(_TranscriptChunk):
    TYPE: ClassVar[str] = "transcript.user"


# ---------------------------------------------------------------------- tool calls


class Location(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")
    path: str
    """Relative to the workspace; absolute/outside paths are masked."""
    line: int | None = None


class DiffContent(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")
    path: str
    old_text: str | None
    new_text: str
    truncated: bool = False
    new_text_bytes: int = 0
    new_text_sha256: str = ""


class ToolOutput(BaseModel):
    """A bounded view of a tool's output: the tail, the total size and a digest."""

    model_config = ConfigDict(frozen=True, extra="forbid")
    tail: str
    total_bytes: int
    sha256: str
    truncated: bool


class _ToolExecution(Payload):
    tool_call_id: str
    title: str
    kind: str
    status: str
    """``pending``, ``in_progress``, ``completed``, ``failed`` (ACP statuses)."""
    locations: list[Location] = Field(default_factory=list)
    raw_input: JsonValue = None
    raw_output: JsonValue = None
    diffs: list[DiffContent] = Field(default_factory=list)
    output: ToolOutput | None = None
    terminal_ids: list[str] = Field(default_factory=list)
    agent_terminal_ids: list[str] = Field(default_factory=list)
    """Of ``terminal_ids``, those the agent runs itself (not through baton's
    ``terminal/create``): baton holds no output for them, so ``output`` is the agent's own
    report of it."""
    parent_tool_call_id: str | None = None
    """Delegation lineage (e.g. Claude's ``_meta.claudeCode.parentToolUseId``)."""


class ToolExecutionStarted(_ToolExecution):
    TYPE: ClassVar[str] = "tool.execution.started"


class ToolExecutionProgressed(_ToolExecution):
    TYPE: ClassVar[str] = "tool.execution.progressed"


class ToolExecutionCompleted(_ToolExecution):
    """Terminal for one tool call: status ``completed``, ``failed`` or ``cancelled``."""

    TYPE: ClassVar[str] = "tool.execution.completed"
    duration_ms: int | None = None


# ----------------------------------------------------------------------------- plan


class PlanStep(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")
    step_id: str
    content: str
    status: Literal["pending", "in_progress", "completed", "blocked"]
    priority: str | None = None
    native_status: str | None = None
    """The agent's own status when it differs (e.g. Cursor ``cancelled`` → blocked)."""


class PlanUpdated(Payload):
    """A complete snapshot of the agent's plan/checklist; revisions strictly increase."""

    TYPE: ClassVar[str] = "plan.updated"
    source: str
    """``acp.plan``, ``cursor.update_todos``, ..."""
    revision: int
    steps: list[PlanStep]
    truncated: bool = False


# -------------------------------------------------------------------- session state


class ModeChanged(Payload):
    TYPE: ClassVar[str] = "mode.changed"
    mode_id: str


class ConfigChanged(Payload):
    TYPE: ClassVar[str] = "config.changed"
    config_options: list[dict[str, JsonValue]]


class CommandsUpdated(Payload):
    """``available_commands_update``: slash commands/skills the agent offers."""

    TYPE: ClassVar[str] = "commands.updated"
    commands: list[dict[str, JsonValue]]


class UsageReported(Payload):
    """Usage as the agent reported it. ``available: false`` never means zero."""

    TYPE: ClassVar[str] = "usage.reported"
    available: bool
    reason: str | None = None
    scope: Literal["turn", "context", "session"] = "turn"
    input_tokens: int | None = None
    output_tokens: int | None = None
    total_tokens: int | None = None
    thought_tokens: int | None = None
    cached_read_tokens: int | None = None
    cached_write_tokens: int | None = None
    context_used: int | None = None
    context_size: int | None = None
    cost_amount: float | None = None
    cost_currency: str | None = None

    @model_validator(mode="after")
    def _unavailable_has_reason_and_no_numbers(self) -> UsageReported:
        numbers = (
            self.input_tokens,
            self.output_tokens,
            self.total_tokens,
            self.thought_tokens,
            self.cached_read_tokens,
            self.cached_write_tokens,
            self.context_used,
            self.context_size,
            self.cost_amount,
        )
        if not self.available:
            if not self.reason:
                raise ValueError("unavailable usage needs a reason")
            if any(n is not None for n in numbers):
                raise ValueError("unavailable usage must not carry numbers")
        elif all(n is None for n in numbers):
            raise ValueError("available usage must carry at least one reported number")
        return self


Provenance = Literal["reported", "derived", "estimated", "unavailable"]
"""How the ledger knows a number: the agent said it (``reported``), baton took the
difference of a running total the agent reports (``derived``), baton priced reported
tokens from a price table (``estimated``), or nobody knows (``unavailable``, never 0)."""


class UsageCounted(Payload):
    """One entry of the usage ledger (``baton.budgets.ledger``): a delta of spend, where it
    is charged and how baton knows each number. Summed, these are the spend every budget
    is checked against; committed with their row of the ledger in one transaction."""

    TYPE: ClassVar[str] = "usage.counted"
    entry: Literal["turn_start", "usage", "turn_end"]
    """``turn_start``: the turn itself (``turns``); ``usage``: a running total the agent
    reported mid-turn moved; ``turn_end``: the turn's tokens, tool calls and time."""
    profile: str
    agent_version: str | None = None
    model: str | None = None
    credential: str
    """Whose quota it spends: a fingerprint of the bound credential (never the secret),
    or ``profile:NAME`` for an agent with none (a subscription login)."""
    task_id: str | None = None
    tree: str | None = None
    """The task tree it is charged to (the TASK a human filed)."""
    role: str | None = None
    tokens: int | None = None
    """Counted against ``tokens`` limits: the reported total, else the sum of the parts."""
    input_tokens: int | None = None
    output_tokens: int | None = None
    thought_tokens: int | None = None
    cached_read_tokens: int | None = None
    cached_write_tokens: int | None = None
    tokens_provenance: Provenance | None = None
    cost_usd: float | None = None
    cost_provenance: Provenance | None = None
    cost_source: str | None = None
    """Where the dollars come from (the agent's running total, a price table and model)."""
    cumulative_cost: float | None = None
    """The agent's running total this delta was derived from (kept across restarts)."""
    turns: int = 0
    tool_calls: int = 0
    seconds: float = 0.0
    reason: str | None = None
    """Why a number is unavailable."""


class _Budget(Payload):
    scope: Literal["run", "task", "role", "window"]
    key: str
    """The run id, the task tree's root TASK, the role, or the window's credential."""
    dimension: Literal["tokens", "cost_usd", "turns", "tool_calls", "minutes"]
    spend: float
    limit: float


class BudgetThreshold(_Budget):
    """Spend reached the soft fraction of a limit: the human is told, no new claims."""

    TYPE: ClassVar[str] = "budget.threshold"
    soft: float


ExceededAction = Literal["cancelled", "refused", "parked", "ended"]
"""What baton did at a hard limit: ``cancelled`` the running turn; ``refused`` a turn not
started; ``parked``: the TASK waits for a raise or the window; ``ended``: the turn had
ended, no new one starts."""


class BudgetExceeded(_Budget):
    """Spend reached a hard limit: the running turn is cancelled (or a turn refused) and
    the TASK parked until the limit is raised or the window lets it go on."""

    TYPE: ClassVar[str] = "budget.exceeded"
    action: ExceededAction
    task_id: str | None = None


class BudgetRaised(_Budget):
    """A human raised a limit (``baton budget raise``, the dashboard); ``spend`` is the
    scope's spend then, ``limit`` the new limit."""

    TYPE: ClassVar[str] = "budget.raised"
    previous: float | None = None
    by: str


class BudgetWindowReset(_Budget):
    """A credential's rolling window fell under its limit again: deferred work goes on."""

    TYPE: ClassVar[str] = "budget.window_reset"
    window: str


class BudgetUnmetered(Payload):
    """Limits on tokens or dollars meet an agent that reports neither: it is held to the
    limits it cannot escape (turns, tool calls, minutes), and said so once a session."""

    TYPE: ClassVar[str] = "budget.unmetered"
    profile: str
    reason: str
    held_to: list[str]


# -------------------------------------------------------------------- delegation


class DelegationChild(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")
    child_id: str
    role: str | None = None
    description: str | None = None
    model: str | None = None
    agent_id: str | None = None
    status: str | None = None
    duration_ms: int | None = None
    parent_tool_call_id: str | None = None


class _Delegation(Payload):
    source: str
    children: list[DelegationChild]


class DelegationStarted(_Delegation):
    TYPE: ClassVar[str] = "delegation.started"


class DelegationUpdated(_Delegation):
    TYPE: ClassVar[str] = "delegation.updated"


class DelegationCompleted(_Delegation):
    TYPE: ClassVar[str] = "delegation.completed"


# ---------------------------------------------------------------------- artifacts


class _Artifact(Payload):
    reference: str
    """Workspace-relative path: a reference only, never read or uploaded."""
    media_type: str | None = None
    title: str | None = None
    registered: Literal[False] = False


class ArtifactGenerated(_Artifact):
    TYPE: ClassVar[str] = "artifact.generated"


class ArtifactViewed(_Artifact):
    TYPE: ClassVar[str] = "artifact.viewed"


# ------------------------------------------------------------------------ requests


class _Request(Payload):
    request_id: str
    kind: str
    """``permission``, ``question``, ``plan``, ``elicitation``, ``review``."""


class RequestCreated(_Request):
    """Persisted before any surface shows it."""

    TYPE: ClassVar[str] = "request.created"
    title: str
    summary: JsonValue = None
    rule: str | None = None
    """The policy rule that decided or escalated it (``preset-reads:escalate:edit``)."""


class RequestAnswered(_Request):
    TYPE: ClassVar[str] = "request.answered"
    decided_by: Literal["human", "policy", "headless"]
    answer: JsonValue
    rule: str | None = None
    """The policy rule that decided, or the surface a human answered at (``cli``, ``web``,
    ``terminal``)."""
    escalated_by: str | None = None
    """For a human decision: the policy rule that escalated the request to a human."""


class RequestDelivered(_Request):
    """The JSON-RPC response was written to the agent's pipe."""

    TYPE: ClassVar[str] = "request.delivered"


class RequestExpired(_Request):
    TYPE: ClassVar[str] = "request.expired"
    reason: str


class RequestCancelled(_Request):
    TYPE: ClassVar[str] = "request.cancelled"
    reason: str


class RequestRejected(_Request):
    """An incoming request or an answer was refused (oversize, stale, forged)."""

    TYPE: ClassVar[str] = "request.rejected"
    reason: str


# ------------------------------------------------------------------------------ team


class TeamTaskChanged(Payload):
    """baton's view of an FCoP TASK moved (``baton.team.states``), committed with the change."""

    TYPE: ClassVar[str] = "team.task.changed"
    task_id: str
    role: str
    from_state: str | None
    to_state: str
    event: str
    attempt_id: str | None = None
    dispatch: int | None = None
    """The turn (per-task dispatch number) the move belongs to, when it is about one."""
    reason: str | None = None


class TeamWorktreeChanged(Payload):
    """A task tree's branch and worktree moved (``baton.worktrees.states``): created,
    checkpointed, merging, merged, salvaged, restored, removed."""

    TYPE: ClassVar[str] = "team.worktree.changed"
    root_task: str
    branch: str
    from_state: str | None
    to_state: str
    event: str
    head_commit: str | None = None
    """The branch head after this move (a checkpoint moves it without a state change)."""
    merge_commit: str | None = None
    salvage_ref: str | None = None
    reason: str | None = None


class TeamSlotChanged(Payload):
    """A role slot's session moved (idle, starting, ready, working, failed, closed)."""

    TYPE: ClassVar[str] = "team.slot.changed"
    slot: str
    role: str
    from_state: str | None
    to_state: str
    event: str
    agent_session_id: str | None = None
    reason: str | None = None


class ClusterPlacementChanged(Payload):
    """A role slot's placement moved (cluster mode): placed on a host under a new epoch,
    its lease expired or its host failed, or it was released (``baton.cluster.placement``)."""

    TYPE: ClassVar[str] = "cluster.placement.changed"
    slot: str
    host: str
    epoch: int
    from_state: str | None
    to_state: str
    event: str
    from_host: str | None = None
    lease_expires_at: float | None = None
    """Wall-clock seconds (the writer's clock) until which the holder may act."""


class ClusterFencedOut(Payload):
    """A role slot's holder was refused a side effect: its epoch is stale or its lease
    ran out (``baton.cluster.fence_guard``); it stops its agent."""

    TYPE: ClassVar[str] = "cluster.fenced_out"
    slot: str
    epoch: int
    act: str
    """What was refused: ``request fs/write_text_file``, ``answer 7``, ``report``, ``lease``."""
    reason: str


class TeamRefusal(Payload):
    """An inbox entry the doorbell refused, and what it did (ISSUE, quarantine)."""

    TYPE: ClassVar[str] = "team.refusal"
    name: str
    reason: str
    message: str
    task_id: str | None = None
    issue_id: str | None = None
    quarantined_to: str | None = None


class TeamRecovery(Payload):
    """A host-side recovery of FCoP state after a crash, with the documented rule it applied."""

    TYPE: ClassVar[str] = "team.recovery"
    task_id: str | None
    rule: str
    """Which rule (``docs/coordination.md`` "Recovery"): e.g. ``two-stages.prepared-roll-forward``."""
    outcome: Literal["resolved", "needs_attention", "cleaned"]
    detail: str
    valid: bool | None = None
    """``fcop``'s ``validate_workspace`` verdict after the repair (None: not checked)."""


# ------------------------------------------------------------- notices, diagnostics


class ProviderNotice(Payload):
    """Something the agent sent that is not (fully) classified: kept, never dropped."""

    TYPE: ClassVar[str] = "provider.notice"
    category: str
    """``unclassified``, ``malformed``, ``late_update``, ``vendor_method``, ``replay`` ..."""
    severity: Literal["info", "warning", "error"] = "warning"
    summary: str
    method: str | None = None
    variant: str | None = None


class HarnessDiagnostic(Payload):
    """Something about the agent process: stderr preview, exit, protocol trouble."""

    TYPE: ClassVar[str] = "harness.diagnostic"
    category: str
    """``protocol``, ``internal`` (baton failed on one frame: ``method``, ``frame``), …"""
    summary: str
    stderr_preview: str = ""
    exit_code: int | None = None
    method: str | None = None
    """The JSON-RPC method of the frame concerned, if any."""
    frame: int | None = None
    """The frame's position on its connection (1 = the first frame the agent sent)."""


class SecurityEvent(Payload):
    """Base for refusals by a security control; every refusal is visible."""

    control: str
    subject: str
    reason: str


class SecurityAdmissionRefused(SecurityEvent):
    TYPE: ClassVar[str] = "security.admission_refused"


class SecurityPinMismatch(SecurityEvent):
    TYPE: ClassVar[str] = "security.pin_mismatch"


class SecurityPathRefused(SecurityEvent):
    """A path (fs/*, terminal cwd, artifact) fell outside the workspace."""

    TYPE: ClassVar[str] = "security.path_refused"


class SecurityPayloadRejected(SecurityEvent):
    """An oversize or malformed authoritative payload was rejected, not truncated."""

    TYPE: ClassVar[str] = "security.payload_rejected"


class SecurityRedactionFallback(SecurityEvent):
    """Redaction could not parse something and redacted all of it."""

    TYPE: ClassVar[str] = "security.redaction_fallback"


class SecurityApprovalRefused(SecurityEvent):
    """The session's mode would let the agent approve its own mutations: refused."""

    TYPE: ClassVar[str] = "security.approval_refused"
    mode: str | None = None


class SecurityApprovalBypass(SecurityEvent):
    """The session runs in a mode where the agent approves itself (``agent_approves = true``)."""

    TYPE: ClassVar[str] = "security.approval_bypass"
    mode: str | None = None


class SecurityUnapprovedMutation(SecurityEvent):
    """A mutation (tool call, client fs write, terminal) that no recorded decision allowed."""

    TYPE: ClassVar[str] = "security.unapproved_mutation"
    mutation: Literal["tool_call", "fs_write", "terminal"]
    tool_call_id: str | None = None
    kind: str | None = None
    path: str | None = None
    """Workspace-relative (masked when outside)."""
    expected: bool = False
    """The profile says ``agent_approves``: recorded, but not a failure of the run."""


class SecurityMutationAllowed(SecurityEvent):
    """A mutation no request decided that an audit rule allows: ``worktree``, an edit inside
    the session's task-tree worktree (no ``.git`` path), reviewed as the tree's diff."""

    TYPE: ClassVar[str] = "security.mutation_allowed"
    rule: str
    mutation: Literal["tool_call", "fs_write"]
    tool_call_id: str | None = None
    kind: str | None = None
    path: str | None = None
    """Workspace-relative."""


# -------------------------------------------------------------------------- files


class FileWritten(Payload):
    """The agent wrote a file through the client (``fs/write_text_file``)."""

    TYPE: ClassVar[str] = "file.written"
    path: str
    """Workspace-relative."""
    bytes: int
    sha256: str


PAYLOAD_TYPES: dict[str, type[Payload]] = {
    cls.TYPE: cls
    for cls in (
        SessionStarted,
        SessionInfoUpdated,
        SessionClosed,
        SessionFailed,
        TurnSubmitted,
        TurnCompleted,
        TurnFailed,
        TurnCancelled,
        TurnStalled,
        TurnResumed,
        TranscriptAssistant,
        TranscriptThinking,
        TranscriptUser,
        ToolExecutionStarted,
        ToolExecutionProgressed,
        ToolExecutionCompleted,
        PlanUpdated,
        ModeChanged,
        ConfigChanged,
        CommandsUpdated,
        UsageReported,
        UsageCounted,
        BudgetThreshold,
        BudgetExceeded,
        BudgetRaised,
        BudgetWindowReset,
        BudgetUnmetered,
        DelegationStarted,
        DelegationUpdated,
        DelegationCompleted,
        ArtifactGenerated,
        ArtifactViewed,
        RequestCreated,
        RequestAnswered,
        RequestDelivered,
        RequestExpired,
        RequestCancelled,
        RequestRejected,
        TeamTaskChanged,
        TeamWorktreeChanged,
        TeamSlotChanged,
        TeamRefusal,
        TeamRecovery,
        ClusterPlacementChanged,
        ClusterFencedOut,
        ProviderNotice,
        HarnessDiagnostic,
        SecurityAdmissionRefused,
        SecurityPinMismatch,
        SecurityPathRefused,
        SecurityPayloadRejected,
        SecurityRedactionFallback,
        SecurityApprovalRefused,
        SecurityApprovalBypass,
        SecurityUnapprovedMutation,
        SecurityMutationAllowed,
        FileWritten,
    )
}
"""The closed inventory of canonical event types."""


EVENT_FLAGS: dict[str, str] = {
    "unencodable_text": "text that could not be stored as received (a lone UTF-16 "
    "surrogate, valid JSON but not encodable as UTF-8) was replaced by U+FFFD",
    "late": "the agent sent this after its turn's prompt response (or during a later "
    "turn); it is attributed to its own turn by the agent's ids, never to the current one",
}
"""What a flag on an event means. The event is kept, in a safe form, and says so."""


class CanonicalEvent(BaseModel):
    """One event of the canonical stream, as stored and as emitted in NDJSON."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    schema_version: int = SCHEMA_VERSION
    type: str
    seq: int = Field(ge=1)
    run_id: str
    session_id: str | None = None
    turn_id: str | None = None
    ts: str
    """RFC 3339 UTC timestamp with milliseconds."""
    payload: SerializeAsAny[Payload]
    raw: JsonValue = None
    """The native payload this event came from, redacted and bounded."""
    flags: list[str] = Field(default_factory=list)
    """How this event differs from what was received (:data:`EVENT_FLAGS`); usually empty."""

    @model_validator(mode="before")
    @classmethod
    def _payload_from_type(cls, data: Any) -> Any:
        if isinstance(data, dict):
            payload_cls = PAYLOAD_TYPES.get(data.get("type", ""))
            if payload_cls is None:
                raise ValueError(f"unknown canonical event type {data.get('type')!r}")
            payload = data.get("payload")
            if isinstance(payload, dict):
                data = {**data, "payload": payload_cls.model_validate(payload)}
            elif isinstance(payload, Payload) and not isinstance(payload, payload_cls):
                raise ValueError(
                    f"payload {type(payload).__name__} does not match type {data['type']!r}"
                )
        return data

    def to_json(self) -> str:
        """One line of NDJSON (no trailing newline); the serializer directly, on the hot path.

        Serialized once: the store, NDJSON output and SSE share the line (kept outside
        the fields, so equality and dumps ignore it; :meth:`model_copy` drops it).
        Unicode line separators are escaped (see :data:`_LINE_BREAKS`).
        """
        fields = self.__dict__
        line: str | None = fields.get("_json")
        if line is None:
            if fields["raw"] is None and not fields["flags"] and type(fields["seq"]) is int:
                line = _plain_line(fields)  # most events: the envelope written here
            else:
                line = self.__pydantic_serializer__.to_json(self).decode()
            if not line.isascii() and ("\u2028" in line or "\u2029" in line or "\x85" in line):
                line = line.translate(_LINE_BREAKS)
            object.__setattr__(self, "_json", line)
        return line

    @classmethod
    def stamped(
        cls,
        type: str,
        seq: int,
        run_id: str,
        session_id: str | None,
        turn_id: str | None,
        ts: str,
        payload: Payload,
        raw: JsonValue,
        flags: list[str],
    ) -> CanonicalEvent:
        """The envelope validation would build, without validating it: for the sequencer,
        whose arguments are typed by construction (a validated payload of its own type, a
        fresh seq, baton's ids). Validation cost more than the rest of stamping; a test
        holds the two equal. Anything else goes through the validating constructor."""
        event = _new_event(cls)
        _set(
            event,
            "__dict__",
            {
                "schema_version": SCHEMA_VERSION,
                "type": type,
                "seq": seq,
                "run_id": run_id,
                "session_id": session_id,
                "turn_id": turn_id,
                "ts": ts,
                "payload": payload,
                "raw": raw,
                "flags": flags,
            },
        )
        _set(event, "__pydantic_fields_set__", _ENVELOPE_FIELDS)
        _set(event, "__pydantic_extra__", None)
        _set(event, "__pydantic_private__", None)
        return event

    # Any: pydantic's own ``model_copy`` signature.
    def model_copy(self, *, update: Any = None, deep: bool = False) -> CanonicalEvent:
        copied = super().model_copy(update=update, deep=deep)
        copied.__dict__.pop("_json", None)
        return copied


_new_event = BaseModel.__new__
_set = object.__setattr__
_ENVELOPE_FIELDS = frozenset(CanonicalEvent.model_fields)

_JSON_STRINGS: dict[str, str] = {}
"""Ids as JSON strings, by pydantic's own encoder (a run, a session, its turns: few)."""


def _json_string(value: str | None) -> str:
    if value is None:
        return "null"
    text = _JSON_STRINGS.get(value)
    if text is None:
        if len(_JSON_STRINGS) >= 1024:
            _JSON_STRINGS.clear()
        text = _JSON_STRINGS[value] = to_json(value).decode()
    return text


_LAST_TS = ["", '""']


def _json_ts(ts: str) -> str:
    """A timestamp as a JSON string; the last one is kept (a flood's share a millisecond)."""
    if ts != _LAST_TS[0]:
        _LAST_TS[:] = [ts, to_json(ts).decode()]
    return _LAST_TS[1]


def _plain_line(fields: dict[str, Any]) -> str:
    """The serializer's line for an event with no ``raw`` and no flags, written here
    around the payload's own serialization (which is what ``SerializeAsAny`` writes):
    the envelope's fields cost more through the serializer than the payload does.
    Raises what the serializer raises (a lone surrogate). Held byte-equal to the
    serializer over recorded traces and any ids (``tests/events/test_stamping.py``)."""
    payload = fields["payload"]
    return (
        f'{{"schema_version":{fields["schema_version"]},"type":{_json_string(fields["type"])},'
        f'"seq":{fields["seq"]},"run_id":{_json_string(fields["run_id"])},'
        f'"session_id":{_json_string(fields["session_id"])},'
        f'"turn_id":{_json_string(fields["turn_id"])},"ts":{_json_ts(fields["ts"])},'
        f'"payload":{payload.__pydantic_serializer__.to_json(payload).decode()},'
        '"raw":null,"flags":[]}'
    )


_LINE_BREAKS = {0x2028: "\\u2028", 0x2029: "\\u2029", 0x85: "\\u0085"}
"""Characters JSON may leave raw but ``str.splitlines()`` (and so many NDJSON readers)
splits on: escaped, so that one event is always one line whoever reads it."""


def storable(event: CanonicalEvent) -> CanonicalEvent:
    """``event`` itself when it serializes; else a safe copy that says what changed.

    Valid JSON can hold what UTF-8 cannot (``"\\ud800"``: a lone surrogate). Such an
    event is neither dropped nor allowed to fail its writer: every string is repaired
    (lone surrogates become U+FFFD) and the event is flagged ``unencodable_text``.
    The serialized line is kept on the event, so this costs no second serialization.
    """
    try:
        event.to_json()
    except PydanticSerializationError:
        data, _ = repair_unencodable(event.model_dump(mode="python"))
        data["flags"] = sorted({*data.get("flags", ()), "unencodable_text"})
        event = CanonicalEvent.model_validate(data)
        event.to_json()
    return event
