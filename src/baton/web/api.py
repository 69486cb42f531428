"""The JSON API under ``/api``: runs, their events (NDJSON and SSE), and requests.

Handlers are thin: they parse the query, call the store (off the event loop, in
a worker thread, as the store's reads are blocking sqlite calls) or the ledger
(already async), and shape JSON. Lists are JSON objects (``{"runs": [...]}``)
so fields can be added without breaking clients; a run's events are NDJSON, the
stored lines byte for byte, because that is the canonical stream's own format
and clients already parse it (``baton run --json`` prints the same lines).
Errors are ``{"error": "<Type>", "message": "..."}`` (see :mod:`baton.web.app`).
"""

from __future__ import annotations

import asyncio
import dataclasses
import json
from typing import Any, Final

from starlette.requests import Request
from starlette.responses import JSONResponse, Response, StreamingResponse
from starlette.routing import Route

from baton.requests.ledger import RequestRecord
from baton.requests.render import to_data
from baton.requests.states import State
from baton.store.records import RunRecord
from baton.web.answers import submit_answer
from baton.web.context import WebContext
from baton.web.sse import parse_resume_point, sse_stream

__all__ = ["MAX_ANSWER_BYTES", "ApiError", "api_routes", "request_data", "run_data"]

MAX_ANSWER_BYTES: Final = 256 * 1024
"""An answer is a few ids or form values; anything this large is not one."""
MAX_EVENTS_PAGE: Final = 10_000


class ApiError(Exception):
    """A refusal decided by the HTTP layer itself (bad query, body, media type)."""

    def __init__(self, status: int, error: str, message: str) -> None:
        super().__init__(message)
        self.status = status
        self.error = error


def run_data(run: RunRecord) -> dict[str, Any]:
    """A run as plain JSON data (the row, with ``meta`` as an object)."""
    return dataclasses.asdict(run)


def request_data(record: RequestRecord) -> dict[str, Any]:
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


async def _run_or_404(ctx: WebContext, run_id: str) -> RunRecord:
    run = await asyncio.to_thread(ctx.store.get_run, run_id)
    if run is None:
        raise ApiError(404, "UnknownRun", f"no run with id {run_id!r}")
    return run


def api_routes(ctx: WebContext) -> list[Route]:
    """The ``/api`` routes, closed over ``ctx``."""

    async def list_runs(request: Request) -> Response:
        limit = _int_query(request, "limit", 50, minimum=1, maximum=1000)
        runs = await asyncio.to_thread(ctx.store.list_runs, limit)
        return JSONResponse({"runs": [run_data(run) for run in runs]})

    async def get_run(request: Request) -> Response:
        run = await _run_or_404(ctx, request.path_params["run_id"])
        last_seq = await asyncio.to_thread(ctx.store.last_seq, run.run_id)
        return JSONResponse(run_data(run) | {"last_seq": last_seq})

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
        # X-Accel-Buffering: a reverse proxy in front must not hold events back.
        return StreamingResponse(
            body, media_type="text/event-stream", headers={"x-accel-buffering": "no"}
        )

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
        return JSONResponse(request_data(await ctx.ledger.get(request_id)))

    async def answer_request(request: Request) -> Response:
        media = request.headers.get("content-type", "").split(";", 1)[0].strip().lower()
        if media != "application/json":
            raise ApiError(415, "UnsupportedMediaType", "send the answer as application/json")
        declared = request.headers.get("content-length", "")
        if declared.isdigit() and int(declared) > MAX_ANSWER_BYTES:
            raise ApiError(413, "TooLarge", f"an answer is at most {MAX_ANSWER_BYTES} bytes")
        body = bytearray()
        async for chunk in request.stream():
            body += chunk
            if len(body) > MAX_ANSWER_BYTES:
                raise ApiError(413, "TooLarge", f"an answer is at most {MAX_ANSWER_BYTES} bytes")
        try:
            data = json.loads(body)
        except ValueError as exc:
            raise ApiError(400, "BadJson", f"the body is not JSON: {exc}") from None
        if not isinstance(data, dict):
            raise ApiError(422, "InvalidAnswer", "the answer must be a JSON object with a kind")
        result = await submit_answer(ctx.ledger, request.path_params["request_id"], data)
        return JSONResponse(request_data(result.record) | {"replayed": result.replayed})

    return [
        Route("/api/runs", list_runs, methods=["GET"]),
        Route("/api/runs/{run_id}", get_run, methods=["GET"]),
        Route("/api/runs/{run_id}/events", run_events, methods=["GET"]),
        Route("/api/runs/{run_id}/stream", run_stream, methods=["GET"]),
        Route("/api/requests", list_requests, methods=["GET"]),
        Route("/api/requests/{request_id}", get_request, methods=["GET"]),
        Route("/api/requests/{request_id}/answer", answer_request, methods=["POST"]),
    ]
