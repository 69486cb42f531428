"""The JSON API under ``/api``: runs, their events (NDJSON and SSE), and requests.

Handlers are thin: they parse the query, call the store (off the event loop, in
a worker thread, as the store's reads are blocking sqlite calls) or the ledger
(already async), and shape JSON. Lists are JSON objects (``{"runs": [...]}``)
so fields can be added without breaking clients; a run's events are NDJSON, the
stored lines byte for byte, because that is the canonical stream's own format
and clients already parse it (``baton run --json`` prints the same lines).
Errors are ``{"error": "<Type>", "message": "..."}`` (see :mod:`baton.web.app`).

Length: every ``/api`` route is a small handler beside its siblings; splitting them by route would scatter one URL scheme and its one error mapping.
"""

from __future__ import annotations

import asyncio
import dataclasses
import json
from datetime import UTC, datetime
from typing import Any, Final, TypeVar

from starlette.requests import Request
from starlette.responses import JSONResponse, Response, StreamingResponse
from starlette.routing import Route

from baton.app.facade.requests import RequestRecord, ReviewRequest, State, to_data
from baton.app.facade.store import (
    DecisionFilter,
    RunFilter,
    RunRecord,
    decision_ids,
    live_turns,
    run_prompts,
    run_tool_counts,
    runs_page,
)
from baton.errors import BatonError, RemoteFault
from baton.jsontypes import JsonObject
from baton.web.actions import cancel_role_turn, cancel_run, create_task, raise_budget
from baton.web.answers import submit_answer
from baton.web.board import BoardSource, snapshot_data
from baton.web.context import WebContext
from baton.web.live import TOPICS
from baton.web.markdown import render_markdown
from baton.web.openapi import OPENAPI
from baton.web.sse import parse_resume_point, sse_stream
from baton.web.summaries import decided_by_text, decision_text, prompt_summary, run_outcome
from baton.web.tasks import task_changes, task_documents
from baton.web.trees import task_tree

__all__ = [
    "MAX_ANSWER_BYTES",
    "ApiError",
    "api_routes",
    "read_json_body",
    "request_data",
    "run_data",
]

MAX_ANSWER_BYTES: Final = 256 * 1024
"""An answer is a few ids or form values; anything this large is not one."""
MAX_EVENTS_PAGE: Final = 10_000

_Filter = TypeVar("_Filter", RunFilter, DecisionFilter)


class ApiError(BatonError, RemoteFault):
    """A refusal decided by the HTTP layer itself (bad query, body, media type)."""

    def __init__(self, status: int, error: str, message: str) -> None:
        super().__init__(message)
        self.status = status
        self.error = error


def run_data(run: RunRecord) -> JsonObject:
    """A run as plain JSON data (the row, with ``meta`` as an object)."""
    return dataclasses.asdict(run)


def request_data(record: RequestRecord) -> JsonObject:
    """A request as JSON: :func:`~baton.requests.render.to_data` (the CLI's ``--json``)
    plus when it was answered and delivered, which a web client polling for the
    outcome needs."""
    return to_data(record) | {
        "answered_at": record.answered_at,
        "delivered_at": record.delivered_at,
    }


def _int_query(
    request: Request, name: str, default: int, *, minimum: int, maximum: int | None = None
) -> int:
    raw = request.query_params.get(name)
    if raw is None or raw == "":
        return default
    if not raw.isascii() or not raw.isdigit() or int(raw) < minimum:
        raise ApiError(400, "BadQuery", f"?{name}= must be an integer >= {minimum}, got {raw!r}")
    value = int(raw)
    return value if maximum is None else min(value, maximum)


# Any: whatever JSON the client sent; each route checks the shape it needs.
async def read_json_body(request: Request, *, limit: int = MAX_ANSWER_BYTES) -> Any:
    """The request's JSON body: ``application/json`` only (415), at most ``limit`` bytes (413)."""
    media = request.headers.get("content-type", "").split(";", 1)[0].strip().lower()
    if media != "application/json":
        raise ApiError(415, "UnsupportedMediaType", "send the body as application/json")
    declared = request.headers.get("content-length", "")
    if declared.isdigit() and int(declared) > limit:
        raise ApiError(413, "TooLarge", f"the body is at most {limit} bytes")
    body = bytearray()
    async for chunk in request.stream():
        body += chunk
        if len(body) > limit:
            raise ApiError(413, "TooLarge", f"the body is at most {limit} bytes")
    try:
        return json.loads(body)
    except ValueError as exc:
        raise ApiError(400, "BadJson", f"the body is not JSON: {exc}") from None


def _str_field(data: Any, name: str, *, required: bool = True) -> str | None:
    value = data.get(name) if isinstance(data, dict) else None
    if value is None and not required:
        return None
    if not isinstance(value, str):
        raise ApiError(422, "InvalidBody", f"{name!r} must be a string")
    return value


def _cursor(request: Request) -> tuple[str, str] | None:
    raw = request.query_params.get("before")
    if not raw:
        return None
    created, sep, ident = raw.partition("|")
    if not sep or not created or not ident:
        raise ApiError(400, "BadQuery", "?before= is the 'next' cursor of the previous page")
    return created, ident


def _filter_value(request: Request, name: str) -> str | None:
    value = request.query_params.get(name)
    if value is None or value == "":
        return None
    if len(value) > 200:
        raise ApiError(400, "BadQuery", f"?{name}= is too long")
    return value


async def _run_or_404(ctx: WebContext, run_id: str) -> RunRecord:
    run = await asyncio.to_thread(ctx.store.get_run, run_id)
    if run is None:
        raise ApiError(404, "UnknownRun", f"no run with id {run_id!r}")
    return run


async def runs_with_outcomes(
    ctx: WebContext, f: RunFilter, limit: int
) -> tuple[list[JsonObject], str | None]:
    """A page of runs, each with the outcome a person should read (see ``run_outcome``)."""
    runs = await asyncio.to_thread(runs_page, ctx.store, f, limit + 1)
    more = len(runs) > limit
    runs = runs[:limit]
    ids = [r.run_id for r in runs]
    counts = await asyncio.to_thread(run_tool_counts, ctx.store, ids)
    prompts = await asyncio.to_thread(run_prompts, ctx.store, ids)
    pending: dict[str, int] = {}
    for record in await ctx.ledger.pending():
        pending[record.run_id] = pending.get(record.run_id, 0) + 1
    stalled = await stalled_runs(ctx)
    rows = [
        run_data(run)
        | {
            "outcome": run_outcome(
                run.status,
                counts.get(run.run_id, {}),
                pending.get(run.run_id, 0),
                stalled.get(run.run_id),
            ),
            "prompt": prompt_summary(prompts[run.run_id]) if run.run_id in prompts else None,
        }
        for run in runs
    ]
    cursor = f"{runs[-1].created_at}|{runs[-1].run_id}" if more and runs else None
    return rows, cursor


def _history_filter(request: Request, kind: type[_Filter]) -> _Filter:
    """A history filter from the query string: ``?<field>=`` for each of its fields,
    ``?before=`` the paging cursor."""
    named = (f.name for f in dataclasses.fields(kind) if f.name != "before")
    return kind(**{name: _filter_value(request, name) for name in named}, before=_cursor(request))


def run_filter(request: Request) -> RunFilter:
    return _history_filter(request, RunFilter)


def decision_filter(request: Request) -> DecisionFilter:
    return _history_filter(request, DecisionFilter)


async def decisions_page(
    ctx: WebContext, f: DecisionFilter, limit: int
) -> tuple[list[JsonObject], str | None]:
    ids = await asyncio.to_thread(decision_ids, ctx.store, f, limit + 1)
    more = len(ids) > limit
    records = [await ctx.ledger.get(i) for i in ids[:limit]]
    rows = [
        request_data(r) | {"decision": decision_text(r), "decided_by_text": decided_by_text(r)}
        for r in records
    ]
    cursor = f"{records[-1].created_at}|{records[-1].request_id}" if more and records else None
    return rows, cursor


def _board_source(ctx: WebContext) -> BoardSource:
    if ctx.board is None:
        raise ApiError(404, "NoTeam", "this server has no team (no baton.toml with a [team])")
    return ctx.board


async def team_snapshot(ctx: WebContext) -> JsonObject:
    board = _board_source(ctx)
    pending = await ctx.ledger.pending()
    return snapshot_data(await asyncio.to_thread(board.snapshot, pending))


async def task_detail(ctx: WebContext, task_id: str) -> JsonObject:
    """A task, its documents, and its change: its tree's branch against the base
    (``tree``), or, for a task without a branch, the files its role reported (``changes``)."""
    from baton.app.facade.fcop import CoordinationError

    board = _board_source(ctx)
    snapshot = await asyncio.to_thread(board.snapshot, [])
    try:
        docs = await asyncio.to_thread(task_documents, board.port, task_id)
    except CoordinationError as exc:
        raise ApiError(404, "UnknownTask", str(exc)) from None
    task = next((t for t in snapshot_data(snapshot)["tasks"] if t["task_id"] == task_id), None)
    tree = await task_tree(ctx.project_dir, ctx.store, task_id)
    changes = (None if tree is not None else await task_changes_for(ctx, docs[0].recipient)) or {
        "files": [],
        "diff": "",
        "note": "",
    }
    return {
        "task_id": task_id,
        "task": task,
        "documents": [
            dataclasses.asdict(d) | {"html": render_markdown(d.body) if not d.refused else ""}
            for d in docs
        ],
        "changes": changes,
        "tree": tree.data() if tree is not None else None,
    }


async def stalled_runs(ctx: WebContext) -> dict[str, int]:
    """Per running run whose agent has gone silent: the longest silence (ms) now."""
    now = datetime.now(UTC)
    out: dict[str, int] = {}
    for turn in await asyncio.to_thread(live_turns, ctx.store):
        if turn.stalled:
            out[turn.run_id] = max(out.get(turn.run_id, 0), turn.silence_ms(now))
    return out


async def run_detail(ctx: WebContext, run: RunRecord) -> JsonObject:
    """What the run page needs beyond the row: outcome, counts, roles, requests, turns."""
    last_seq = await asyncio.to_thread(ctx.store.last_seq, run.run_id)
    counts = (await asyncio.to_thread(run_tool_counts, ctx.store, [run.run_id]))[run.run_id]
    requests = await ctx.ledger.list_requests(run_id=run.run_id, limit=500)
    pending = sum(1 for r in requests if r.state is State.PENDING)
    sessions = await asyncio.to_thread(ctx.store.list_sessions, 1000)
    now = datetime.now(UTC)
    turns = [t for t in await asyncio.to_thread(live_turns, ctx.store) if t.run_id == run.run_id]
    stalled = max((t.silence_ms(now) for t in turns if t.stalled), default=None)
    return {
        "last_seq": last_seq,
        "outcome": run_outcome(run.status, counts, pending, stalled),
        "turns": [t.to_json(now) for t in turns],
        "counts": counts,
        "roles": {s.agent_session_id: s.role for s in sessions if s.role},
        "requests": [
            {
                "request_id": r.request_id,
                "kind": r.kind,
                "title": await request_title(ctx, r),
                "state": r.state.value,
                "decision": decision_text(r),
            }
            for r in requests
        ],
    }


async def task_subject(ctx: WebContext, task_id: str) -> str | None:
    """A task's subject from its TASK file (None when there is no board or no such task)."""
    if ctx.board is None:
        return None
    port = ctx.board.port
    try:
        return (await asyncio.to_thread(port.read_task, task_id)).subject or None
    except Exception:  # a missing or refused TASK: the id stands in for it
        return None


async def request_title(ctx: WebContext, record: RequestRecord) -> str:
    """How a request is titled on a page: a review by its task's subject, not its id."""
    doc = record.document
    if isinstance(doc, ReviewRequest):
        subject = await task_subject(ctx, doc.task_id)
        if subject:
            return f"Review: {subject}"
    return record.title


async def task_changes_for(ctx: WebContext, role: str | None) -> JsonObject | None:
    """The changed files (and their diff) the role's sessions reported, for a review."""
    board = ctx.board
    if board is None or ctx.project_dir is None or not role:
        return None
    files = await asyncio.to_thread(board.files_changed, role)
    return await asyncio.to_thread(task_changes, ctx.project_dir, files)


def api_routes(ctx: WebContext) -> list[Route]:
    """The ``/api`` routes, closed over ``ctx``."""

    async def list_runs(request: Request) -> Response:
        limit = _int_query(request, "limit", 50, minimum=1, maximum=1000)
        rows, cursor = await runs_with_outcomes(ctx, run_filter(request), limit)
        return JSONResponse({"runs": rows, "next": cursor})

    async def get_run(request: Request) -> Response:
        run = await _run_or_404(ctx, request.path_params["run_id"])
        return JSONResponse(run_data(run) | await run_detail(ctx, run))

    async def run_events(request: Request) -> Response:
        run = await _run_or_404(ctx, request.path_params["run_id"])
        after = _int_query(request, "after", 0, minimum=0)
        limit = _int_query(request, "limit", 1000, minimum=1, maximum=MAX_EVENTS_PAGE)

        def read() -> list[str]:
            return list(ctx.store.iter_event_json(run.run_id, after_seq=after, limit=limit))

        lines = await asyncio.to_thread(read)
        return Response("".join(line + "\n" for line in lines), media_type="application/x-ndjson")

    async def run_stream(request: Request) -> Response:
        run = await _run_or_404(ctx, request.path_params["run_id"])
        try:
            after = parse_resume_point(
                request.headers.get("last-event-id"), request.query_params.get("after")
            )
        except ValueError as exc:
            raise ApiError(400, "BadQuery", str(exc)) from None
        body = sse_stream(
            ctx.store,
            run.run_id,
            after_seq=after,
            poll_interval=ctx.poll_interval,
            keepalive=ctx.keepalive,
        )
        return _sse(body)

    async def start_run(request: Request) -> Response:
        if ctx.launcher is None:
            raise ApiError(404, "NoProject", "this server cannot start runs (no project)")
        data = await read_json_body(request)
        agent = _str_field(data, "agent")
        prompt = _str_field(data, "prompt")
        assert agent is not None and prompt is not None
        started = await ctx.launcher.launch(agent=agent, prompt=prompt)
        ctx.hub.poke()
        return JSONResponse(started, status_code=201)

    async def cancel(request: Request) -> Response:
        result = await asyncio.to_thread(cancel_run, ctx.store, request.path_params["run_id"])
        return JSONResponse(result, status_code=202)

    async def cancel_slot_turn(request: Request) -> Response:
        if ctx.board is None:
            raise ApiError(404, "NoTeam", "this server has no team")
        data = await read_json_body(request)
        task_id = _str_field(data, "task_id", required=False)
        reason = _str_field(data, "reason", required=False) or ""
        result = await asyncio.to_thread(
            cancel_role_turn,
            ctx.store,
            request.path_params["slot"],
            task_id=task_id,
            reason=reason,
        )
        ctx.hub.poke()
        return JSONResponse(result, status_code=202)

    async def raise_budget_limit(request: Request) -> Response:
        if ctx.project_dir is None:
            raise ApiError(404, "NoProject", "this server has no project (no baton.toml)")
        data = await read_json_body(request)
        value = data.get("value") if isinstance(data, dict) else None
        result = await raise_budget(
            ctx.store,
            ctx.project_dir,
            scope=_str_field(data, "scope") or "",
            key=_str_field(data, "key") or "",
            dimension=_str_field(data, "dimension") or "",
            value=value,
        )
        ctx.hub.poke()
        return JSONResponse(result, status_code=200)

    async def list_requests(request: Request) -> Response:
        state = request.query_params.get("state", "pending")
        run_id = request.query_params.get("run_id") or None
        limit = _int_query(request, "limit", 200, minimum=1, maximum=1000)
        if state == "all":
            states = None
        else:
            try:
                states = [State(state)]
            except ValueError:
                choices = ", ".join(["all", *(s.value for s in State)])
                raise ApiError(400, "BadQuery", f"?state= must be one of {choices}") from None
        records = await ctx.ledger.list_requests(states=states, run_id=run_id, limit=limit)
        return JSONResponse({"requests": [request_data(record) for record in records]})

    async def get_request(request: Request) -> Response:
        request_id = await ctx.ledger.resolve_id(request.path_params["request_id"])
        record = await ctx.ledger.get(request_id)
        return JSONResponse(request_data(record) | {"decision": decision_text(record)})

    async def answer_request(request: Request) -> Response:
        data = await read_json_body(request)
        if not isinstance(data, dict):
            raise ApiError(422, "InvalidAnswer", "the answer must be a JSON object with a kind")
        result = await submit_answer(
            ctx.ledger, request.path_params["request_id"], data, project_dir=ctx.project_dir
        )
        ctx.hub.poke()
        return JSONResponse(
            request_data(result.record)
            | {"replayed": result.replayed, "decision": decision_text(result.record)}
        )

    async def list_decisions(request: Request) -> Response:
        limit = _int_query(request, "limit", 50, minimum=1, maximum=500)
        rows, cursor = await decisions_page(ctx, decision_filter(request), limit)
        return JSONResponse({"decisions": rows, "next": cursor})

    async def team(request: Request) -> Response:
        return JSONResponse(await team_snapshot(ctx))

    async def tasks(request: Request) -> Response:
        snapshot = await team_snapshot(ctx)
        stage = request.query_params.get("stage")
        rows = [t for t in snapshot["tasks"] if stage in (None, "", t["stage"])]
        return JSONResponse({"tasks": rows, "counts": snapshot["counts"]})

    async def get_task(request: Request) -> Response:
        return JSONResponse(await task_detail(ctx, request.path_params["task_id"]))

    async def new_task(request: Request) -> Response:
        if ctx.project_dir is None:
            raise ApiError(404, "NoTeam", "this server has no project")
        data = await read_json_body(request)
        to = _str_field(data, "to")
        subject = _str_field(data, "subject")
        body = _str_field(data, "body", required=False) or ""
        operation_id = _str_field(data, "operation_id", required=False)
        assert to is not None and subject is not None
        created = await asyncio.to_thread(
            create_task,
            ctx.project_dir,
            to=to,
            subject=subject,
            body=body,
            operation_id=operation_id,
        )
        ctx.hub.poke()
        return JSONResponse(created, status_code=200 if created["existing"] else 201)

    async def agents(request: Request) -> Response:
        names = ctx.launcher.agents() if ctx.launcher is not None else []
        return JSONResponse({"agents": names})

    async def live(request: Request) -> Response:
        raw = request.query_params.get("topics", "inbox")
        topics = frozenset(t for t in raw.split(",") if t)
        if not topics or not topics <= TOPICS:
            raise ApiError(400, "BadQuery", f"?topics= is a comma list of {sorted(TOPICS)}")
        if "board" in topics and ctx.board is None:
            topics = topics - {"board"}
        return _sse(ctx.hub.stream(topics, keepalive=ctx.keepalive))

    async def openapi(request: Request) -> Response:
        return JSONResponse(OPENAPI)

    return [
        Route("/api/runs", list_runs, methods=["GET"]),
        Route("/api/runs", start_run, methods=["POST"]),
        Route("/api/runs/{run_id}", get_run, methods=["GET"]),
        Route("/api/runs/{run_id}/events", run_events, methods=["GET"]),
        Route("/api/runs/{run_id}/stream", run_stream, methods=["GET"]),
        Route("/api/runs/{run_id}/cancel", cancel, methods=["POST"]),
        Route("/api/requests", list_requests, methods=["GET"]),
        Route("/api/requests/{request_id}", get_request, methods=["GET"]),
        Route("/api/requests/{request_id}/answer", answer_request, methods=["POST"]),
        Route("/api/decisions", list_decisions, methods=["GET"]),
        Route("/api/team", team, methods=["GET"]),
        Route("/api/team/slots/{slot}/cancel", cancel_slot_turn, methods=["POST"]),
        Route("/api/budget/raise", raise_budget_limit, methods=["POST"]),
        Route("/api/tasks", tasks, methods=["GET"]),
        Route("/api/tasks", new_task, methods=["POST"]),
        Route("/api/tasks/{task_id}", get_task, methods=["GET"]),
        Route("/api/agents", agents, methods=["GET"]),
        Route("/api/live", live, methods=["GET"]),
        Route("/api/openapi.json", openapi, methods=["GET"]),
    ]


def _sse(body: Any) -> StreamingResponse:
    # X-Accel-Buffering: a reverse proxy in front must not hold events back.
    return StreamingResponse(
        body, media_type="text/event-stream", headers={"x-accel-buffering": "no"}
    )
