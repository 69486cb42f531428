"""Replay a recorded ACP trace through a provider extension, sans-I/O.

A trace is NDJSON, one ``{"dir": "agent"|"client", "msg": <JSON-RPC message>}`` per
line (the format of ``tests/support/rawclient.py``). The replay plays baton's side:

- ``client`` ``session/prompt`` starts a turn (``begin_turn``) on its session;
  the agent's response to it ends the turn (``end_turn``, with ``usage_reported``
  set when a ``usage_update`` or a response ``usage`` was seen);
- ``agent`` ``session/update`` on the turn's session: stable variants go to
  ``observe_update`` (the generic normalizer's own output is not this package's),
  others to ``dispatch_update``; on another session to ``dispatch_foreign``;
- ``agent`` vendor methods go to ``dispatch_method``; the outcome is recorded, and
  for requests the trace's ``client`` response must equal baton's answer.

Traces spell the workspace ``${WORKSPACE}`` and a directory outside it
``${OUTSIDE}``; output strings get the real paths replaced back, so goldens do not
depend on the temporary directory.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

from baton.events.extension import STABLE_VARIANTS, TurnContext
from baton.events.model import Payload
from baton.providers.inventory import GENERIC_METHODS
from baton.providers.registry import (
    ErrorReply,
    dispatch_foreign,
    dispatch_method,
    dispatch_update,
    extension_for,
)

WORKSPACE = "${WORKSPACE}"
OUTSIDE = "${OUTSIDE}"


def load_trace(path: Path, tokens: Mapping[str, str]) -> list[dict[str, Any]]:
    text = path.read_text(encoding="utf-8")
    for token, value in tokens.items():
        text = text.replace(json.dumps(token)[1:-1], json.dumps(value)[1:-1])
    return [json.loads(line) for line in text.splitlines() if line.strip()]


def event(payload: Payload) -> dict[str, Any]:
    return {"type": payload.TYPE, "payload": payload.model_dump(mode="json")}


def _result(value: Any) -> Any:
    if isinstance(value, ErrorReply):
        return {"error": value.to_json()}
    return value


def replay(lines: Iterable[Mapping[str, Any]], family: str, workspace: str) -> list[dict[str, Any]]:
    ext = extension_for(family)
    ctx = TurnContext(session_id=None, turn_id=None, workspace=workspace)
    out: list[dict[str, Any]] = []
    prompts: set[Any] = set()
    answers: dict[Any, Any] = {}
    turns = 0
    for line in lines:
        msg = line["msg"]
        if line["dir"] == "client":
            if msg.get("method") == "session/prompt":
                turns += 1
                prompts.add(msg["id"])
                ctx.session_id = msg["params"]["sessionId"]
                ctx.turn_id = f"turn-{turns}"
                ctx.usage_reported = False
                out.extend(event(p) for p in ext.begin_turn(ctx))
            elif "method" not in msg and "id" in msg:
                answers[msg["id"]] = msg.get("result", {"error": msg.get("error")})
            continue
        method = msg.get("method")
        if method == "session/update":
            params = msg["params"]
            update = params["update"]
            variant = update.get("sessionUpdate")
            session = params.get("sessionId")
            if ctx.session_id is not None and session != ctx.session_id:
                payloads = dispatch_foreign(ext, session, update, ctx)
            elif variant in STABLE_VARIANTS:
                if variant == "usage_update":
                    ctx.usage_reported = True
                payloads = ext.observe_update(variant, update, ctx)
            else:
                payloads = dispatch_update(ext, str(variant), update, ctx)
            out.extend(event(p) for p in payloads)
        elif method in GENERIC_METHODS:
            out.append({"runner": method, "id": msg.get("id")})
        elif method is not None:
            outcome = dispatch_method(
                ext, method, msg.get("params") or {}, has_id="id" in msg, ctx=ctx
            )
            out.extend(event(p) for p in outcome.payloads)
            record: dict[str, Any] = {
                "reply_to": method,
                "id": msg.get("id"),
                "route": outcome.route,
                "result": _result(outcome.result),
            }
            if outcome.request is not None:
                record["request"] = outcome.request.model_dump(mode="json")
            out.append(record)
        elif msg.get("id") in prompts:
            result = msg.get("result") or {}
            if isinstance(result, Mapping) and result.get("usage"):
                ctx.usage_reported = True
            out.extend(event(p) for p in ext.end_turn(ctx))
    for record in out:
        if "reply_to" in record and record["id"] is not None:
            record["client_answer_matches"] = answers.get(record["id"]) == record["result"]
    return out


def detokenize(value: Any, tokens: Mapping[str, str]) -> Any:
    """Put the trace tokens back in place of real paths (longest value first)."""
    text = json.dumps(value, ensure_ascii=False)
    for token, real in sorted(tokens.items(), key=lambda kv: -len(kv[1])):
        text = text.replace(json.dumps(real)[1:-1], json.dumps(token)[1:-1])
    return json.loads(text)
