"""Request fixtures built from the shapes in acp.md §1.10 and §2 (no recorded traces yet)."""

from __future__ import annotations

from typing import Any

from baton.request_model.documents import (
    DiffPreview,
    ElicitationRequest,
    ElicitationSchema,
    NativeQuestion,
    PermissionOption,
    PermissionRequest,
    PlanPhase,
    PlanRequest,
    PlanTodo,
    QuestionRequest,
    ReviewRequest,
    ToolCallSummary,
    ToolLocation,
)

META: dict[str, Any] = {
    "run_id": "run-1",
    "connection_id": "conn-1",
    "session_id": "sess-1",
    "turn_id": "turn-1",
}
"""Identity of a request created in a test (pass with ``jsonrpc_id``)."""

ACP_OPTIONS = (
    PermissionOption(option_id="allow-once", name="Allow", kind="allow_once"),
    PermissionOption(option_id="allow-always", name="Always", kind="allow_always"),
    PermissionOption(option_id="reject-once", name="Reject", kind="reject_once"),
)


def permission(
    kind: str = "execute",
    *,
    command: str | None = "rm -rf build",
    paths: tuple[str, ...] = (),
    diff: DiffPreview | None = None,
    raw_input: Any = None,
    granted: bool = False,
    options: tuple[PermissionOption, ...] = ACP_OPTIONS,
    tool_call_id: str = "call_1",
) -> PermissionRequest:
    """``session/request_permission`` as in acp.md §1.10."""
    return PermissionRequest(
        tool_call=ToolCallSummary(
            tool_call_id=tool_call_id,
            title=command or f"{kind} tool",
            kind=kind,
            command=command,
            diffs=(diff,) if diff else (),
            locations=tuple(ToolLocation(path=p) for p in paths),
            raw_input=raw_input,
        ),
        options=options,
        allow_always_granted=granted,
    )


def cursor_questions(*, title: str | None = "Setup") -> QuestionRequest:
    """``cursor/ask_question`` params from acp.md §2, normalized."""
    params: dict[str, Any] = {
        "toolCallId": "tc_q",
        "title": title,
        "questions": [
            {
                "id": "db",
                "prompt": "Which database?",
                "options": [{"id": "pg", "label": "Postgres"}, {"id": "lite", "label": "SQLite"}],
            },
            {
                "id": "features",
                "prompt": "Which features?",
                "allowMultiple": True,
                "options": [
                    {"id": "auth", "label": "Auth"},
                    {"id": "billing", "label": "Billing"},
                    {"id": "search", "label": "Search"},
                ],
            },
        ],
    }
    return QuestionRequest.from_native(
        [
            NativeQuestion(
                native_id=q["id"],
                prompt=q["prompt"],
                options=[(o["id"], o["label"]) for o in q["options"]],
                multiple=bool(q.get("allowMultiple")),
            )
            for q in params["questions"]
        ],
        title=params["title"],
        tool_call_id=params["toolCallId"],
    )


def cursor_plan(markdown: str = "# Plan\n\n1. Do it\n", **kw: Any) -> PlanRequest:
    """``cursor/create_plan`` params from acp.md §2, normalized."""
    return PlanRequest(
        tool_call_id=kw.pop("tool_call_id", "tc_plan"),
        name=kw.pop("name", "Refactor"),
        overview=kw.pop("overview", "Split the module"),
        markdown=markdown,
        todos=(PlanTodo(id="t1", content="Extract parser"), PlanTodo(id="t2", content="Add tests")),
        phases=(PlanPhase(name="Phase 1", todos=(PlanTodo(id="t1", content="Extract parser"),)),),
        is_project=kw.pop("is_project", False),
        **kw,
    )


def elicitation() -> ElicitationRequest:
    return ElicitationRequest(
        message="Configure the release",
        requested_schema=ElicitationSchema.from_wire(
            {
                "type": "object",
                "properties": {
                    "version": {"type": "string", "pattern": "^[0-9]+\\.[0-9]+$"},
                    "retries": {"type": "integer", "minimum": 0, "maximum": 5},
                    "dry_run": {"type": "boolean"},
                    "channel": {"type": "string", "enum": ["stable", "beta"]},
                    "targets": {
                        "type": "array",
                        "items": {"type": "string", "enum": ["linux", "mac", "win"]},
                        "minItems": 1,
                    },
                },
                "required": ["version", "channel"],
            }
        ),
    )


def review() -> ReviewRequest:
    return ReviewRequest(
        task_id="TASK-1", report_ref="reports/TASK-1.md", summary="Done", role="DEV"
    )
