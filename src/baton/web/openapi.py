"""The OpenAPI 3.1 description of ``/api`` (served at ``/api/openapi.json``).

The board's schemas are generated from the read model's dataclasses
(:mod:`baton.web.board`), so the document cannot drift from what
``/api/team`` returns; the paths are listed here, next to their parameters.
"""

from __future__ import annotations

import dataclasses
import types
import typing
from collections.abc import Mapping
from typing import Any, Final, Literal, Union, get_args, get_origin, get_type_hints

from baton.web import board

__all__ = ["OPENAPI", "schema_of"]


def _type(hint: Any, components: dict[str, Any]) -> dict[str, Any]:
    origin = get_origin(hint)
    if origin in (Union, types.UnionType):
        options = [a for a in get_args(hint) if a is not type(None)]
        inner = (
            _type(options[0], components)
            if len(options) == 1
            else {"anyOf": [_type(a, components) for a in options]}
        )
        return {"anyOf": [inner, {"type": "null"}]}
    if origin is Literal:
        return {"type": "string", "enum": list(get_args(hint))}
    if origin in (tuple, list):
        return {"type": "array", "items": _type(get_args(hint)[0], components)}
    if origin in (dict, Mapping, typing.Mapping) or hint is dict:
        args = get_args(hint)
        value = _type(args[1], components) if args else {}
        return {"type": "object", "additionalProperties": value}
    if dataclasses.is_dataclass(hint) and isinstance(hint, type):
        schema_of(hint, components)
        return {"$ref": f"#/components/schemas/{hint.__name__}"}
    if hint is Any:
        return {}
    return {
        str: {"type": "string"},
        int: {"type": "integer"},
        float: {"type": "number"},
        bool: {"type": "boolean"},
    }.get(hint, {})


# Any: JSON Schema objects, built here and sent as JSON.
def schema_of(cls: type, components: dict[str, Any]) -> dict[str, Any]:
    """Add ``cls`` (a dataclass) and what it refers to under ``components``."""
    if cls.__name__ in components:
        return components[cls.__name__]  # type: ignore[no-any-return]
    components[cls.__name__] = {}
    hints = get_type_hints(cls, vars(board))
    fields = dataclasses.fields(cls)
    schema = {
        "type": "object",
        "properties": {f.name: _type(hints[f.name], components) for f in fields},
        "required": [
            f.name
            for f in fields
            if f.default is dataclasses.MISSING and f.default_factory is dataclasses.MISSING
        ],
    }
    components[cls.__name__] = schema
    return schema


def _error() -> dict[str, Any]:
    return {
        "description": "an error",
        "content": {"application/json": {"schema": {"$ref": "#/components/schemas/Error"}}},
    }


def _json(ref: str | None = None, description: str = "OK") -> dict[str, Any]:
    schema: dict[str, Any] = {"$ref": f"#/components/schemas/{ref}"} if ref else {"type": "object"}
    return {"description": description, "content": {"application/json": {"schema": schema}}}


def _q(name: str, description: str) -> dict[str, Any]:
    return {
        "name": name,
        "in": "query",
        "required": False,
        "schema": {"type": "string"},
        "description": description,
    }


def _body(schema: dict[str, Any]) -> dict[str, Any]:
    """A required JSON request body of this schema."""
    return {"required": True, "content": {"application/json": {"schema": schema}}}


def _p(name: str) -> dict[str, Any]:
    return {"name": name, "in": "path", "required": True, "schema": {"type": "string"}}


def _build() -> dict[str, Any]:
    components: dict[str, Any] = {
        "Error": {
            "type": "object",
            "required": ["error", "message"],
            "properties": {"error": {"type": "string"}, "message": {"type": "string"}},
        },
    }
    schema_of(board.BoardSnapshot, components)
    paging = [
        _q("limit", "page size"),
        _q("before", "the `next` cursor of the previous page"),
        _q("since", "ISO date/time, inclusive"),
        _q("until", "ISO date/time, exclusive"),
    ]
    errors = {"400": _error(), "401": _error(), "403": _error(), "404": _error()}
    paths: dict[str, Any] = {
        "/api/team": {
            "get": {
                "summary": "The team board: roles, sessions, tasks by FCoP stage",
                "responses": {"200": _json("BoardSnapshot"), **errors},
            }
        },
        "/api/tasks": {
            "get": {
                "summary": "Tasks (optionally of one stage)",
                "parameters": [_q("stage", "inbox, active, review, done, archive")],
                "responses": {"200": _json(description="{tasks: [TaskView], counts}"), **errors},
            },
            "post": {
                "summary": "Create a task as the human (FCoP T1, like `baton task new`)",
                "requestBody": _body(
                    {
                        "type": "object",
                        "required": ["to", "subject"],
                        "properties": {
                            "to": {"type": "string"},
                            "subject": {"type": "string"},
                            "body": {"type": "string"},
                            "operation_id": {"type": "string"},
                        },
                    }
                ),
                "responses": {
                    "201": _json(),
                    "200": _json(description="already existed"),
                    "422": _error(),
                    **errors,
                },
            },
        },
        "/api/tasks/{task_id}": {
            "get": {
                "summary": "A task with its TASK/REPORT/ISSUE/REVIEW documents (rendered), its "
                "tree's change against the base when it has a branch (tree), else the files "
                "its role reported (changes)",
                "parameters": [_p("task_id")],
                "responses": {"200": _json(), **errors},
            }
        },
        "/api/runs": {
            "get": {
                "summary": "Runs, newest first, filtered and paged",
                "parameters": [
                    _q("status", "run status"),
                    _q("agent", "agent profile"),
                    _q("kind", "run, up, probe"),
                    _q("role", "team role"),
                    *paging,
                ],
                "responses": {"200": _json(description="{runs: [...], next}"), **errors},
            },
            "post": {
                "summary": "Start a one-off run (`baton run --agent A -`)",
                "requestBody": _body(
                    {
                        "type": "object",
                        "required": ["agent", "prompt"],
                        "properties": {"agent": {"type": "string"}, "prompt": {"type": "string"}},
                    }
                ),
                "responses": {"201": _json(), "422": _error(), **errors},
            },
        },
        "/api/runs/{run_id}": {
            "get": {
                "summary": "A run, its outcome, roles, requests and running turns (stalled or not)",
                "parameters": [_p("run_id")],
                "responses": {"200": _json(), **errors},
            }
        },
        "/api/runs/{run_id}/events": {
            "get": {
                "summary": "The run's events as NDJSON",
                "parameters": [_p("run_id"), _q("after", "seq"), _q("limit", "at most 10000")],
                "responses": {
                    "200": {"description": "NDJSON", "content": {"application/x-ndjson": {}}},
                    **errors,
                },
            }
        },
        "/api/runs/{run_id}/stream": {
            "get": {
                "summary": "The run's events as resumable SSE (Last-Event-ID)",
                "parameters": [_p("run_id"), _q("after", "seq")],
                "responses": {
                    "200": {"description": "SSE", "content": {"text/event-stream": {}}},
                    **errors,
                },
            }
        },
        "/api/runs/{run_id}/cancel": {
            "post": {
                "summary": "Cancel the running turn of a one-off run (SIGINT, like Ctrl-C)",
                "parameters": [_p("run_id")],
                "responses": {"202": _json(), "409": _error(), **errors},
            }
        },
        "/api/budget/raise": {
            "post": {
                "summary": (
                    "Raise one budget limit of one scope, as `baton budget raise` does; a running "
                    "`baton up` lets what the old limit parked go on"
                ),
                "requestBody": _body(
                    {
                        "type": "object",
                        "required": ["scope", "key", "dimension", "value"],
                        "properties": {
                            "scope": {"enum": ["run", "task", "role", "window"]},
                            "key": {"type": "string"},
                            "dimension": {
                                "enum": ["tokens", "cost_usd", "turns", "tool_calls", "minutes"]
                            },
                            "value": {"type": "number", "exclusiveMinimum": 0},
                        },
                    }
                ),
                "responses": {"200": _json(), "400": _error(), "415": _error(), **errors},
            }
        },
        "/api/team/slots/{slot}/cancel": {
            "post": {
                "summary": (
                    "Cancel a role slot's running turn in a team run; the team loop cancels it "
                    "and the TASK goes to needs attention (a retry re-prompts it)"
                ),
                "parameters": [_p("slot")],
                "requestBody": _body(
                    {
                        "type": "object",
                        "properties": {
                            "task_id": {
                                "type": "string",
                                "description": "the task the slot was seen on",
                            },
                            "reason": {"type": "string", "maxLength": 500},
                        },
                    }
                ),
                "responses": {"202": _json(), "409": _error(), "415": _error(), **errors},
            }
        },
        "/api/requests": {
            "get": {
                "summary": "Requests (pending by default)",
                "parameters": [
                    _q("state", "pending, all, or a state"),
                    _q("run_id", "one run"),
                    _q("limit", ""),
                ],
                "responses": {"200": _json(), **errors},
            }
        },
        "/api/requests/{request_id}": {
            "get": {
                "summary": "One request",
                "parameters": [_p("request_id")],
                "responses": {"200": _json(), **errors},
            }
        },
        "/api/requests/{request_id}/answer": {
            "post": {
                "summary": "Answer a request (a baton.requests answer as JSON)",
                "parameters": [_p("request_id")],
                "requestBody": _body({"type": "object", "required": ["kind"]}),
                "responses": {
                    "200": _json(),
                    "409": _error(),
                    "415": _error(),
                    "422": _error(),
                    **errors,
                },
            }
        },
        "/api/grants": {
            "get": {
                "summary": "The human's scoped grants (any state), newest first",
                "responses": {"200": _json(description="{grants: [...]}"), **errors},
            }
        },
        "/api/grants/{grant_id}/revoke": {
            "post": {
                "summary": "Revoke a grant: it answers nothing from now on",
                "parameters": [_p("grant_id")],
                "responses": {"200": _json(), "404": _error(), **errors},
            }
        },
        "/api/decisions": {
            "get": {
                "summary": "Requests and who decided them by which rule, filtered and paged",
                "parameters": [
                    _q("state", ""),
                    _q("kind", ""),
                    _q("decided_by", "human, policy, headless"),
                    _q("role", ""),
                    _q("agent", ""),
                    _q("run_id", ""),
                    *paging,
                ],
                "responses": {"200": _json(description="{decisions: [...], next}"), **errors},
            }
        },
        "/api/live": {
            "get": {
                "summary": "SSE: `inbox` and `board` messages, each the whole current state",
                "parameters": [_q("topics", "comma list: inbox, board")],
                "responses": {
                    "200": {"description": "SSE", "content": {"text/event-stream": {}}},
                    **errors,
                },
            }
        },
        "/api/login": {
            "post": {
                "summary": "Exchange a one-time login code for a session cookie",
                "security": [],
                "requestBody": _body(
                    {
                        "type": "object",
                        "required": ["code"],
                        "properties": {"code": {"type": "string"}},
                    }
                ),
                "responses": {"200": _json(), "401": _error(), "403": _error()},
            }
        },
        "/api/agents": {
            "get": {
                "summary": "Agent profiles a run can use",
                "responses": {"200": _json(), **errors},
            }
        },
    }
    return {
        "openapi": "3.1.0",
        "info": {
            "title": "baton",
            "version": "1",
            "description": "The JSON API of `baton serve` (see docs/web.md).",
        },
        "components": {
            "schemas": components,
            "securitySchemes": {
                "bearer": {"type": "http", "scheme": "bearer"},
                "session": {"type": "apiKey", "in": "cookie", "name": "baton_session_<port>"},
            },
        },
        "security": [{"bearer": []}, {"session": []}],
        "paths": paths,
    }


OPENAPI: Final[dict[str, Any]] = _build()
