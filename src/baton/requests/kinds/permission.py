"""A permission request: the agent's own options, chosen by decision; a grant normalized."""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from typing import Any

from baton.request_model.documents import PermissionAnswer, PermissionOption, PermissionRequest
from baton.request_model.errors import InvalidAnswer
from baton.requests.grants import normalize_grant
from baton.requests.kinds.rules import AutomaticDecision, KindRules, Reply, listed

__all__ = ["PERMISSION", "choose_permission_option", "tool_call_paths"]

_PATH_KEYS = (
    "path",
    "filePath",
    "file_path",
    "filepath",
    "notebook_path",
    "cwd",
    "target",
    "destination",
)
"""Top-level ``rawInput`` keys that name a path in the agents we know."""


def _walk_raw_paths(raw: Any) -> Iterator[str]:
    if isinstance(raw, Mapping):
        for key in _PATH_KEYS:
            value = raw.get(key)
            if isinstance(value, str) and value:
                yield value
        for key in ("paths", "files"):
            values = raw.get(key)
            if isinstance(values, list):
                yield from (v for v in values if isinstance(v, str) and v)


def tool_call_paths(document: PermissionRequest) -> tuple[str, ...]:
    """Every path a permission request says it touches (locations, diffs, raw input)."""
    call = document.tool_call
    paths = [loc.path for loc in call.locations]
    paths += [d.path for d in call.diffs]
    paths += list(_walk_raw_paths(call.raw_input))
    return tuple(dict.fromkeys(paths))


def choose_permission_option(
    document: PermissionRequest, answer: PermissionAnswer
) -> PermissionOption:
    """Pick the agent's own option for a decision, by option ``kind``.

    ``allow`` means ``allow_once``, always: baton never answers ``allow_always``,
    because the agent would remember it and stop asking, out of reach of baton's
    scopes and audit (a lasting approval is a grant, :mod:`baton.requests.grants`).
    ``deny`` means ``reject_once`` (falling back to ``reject_always`` when the agent
    offers no one-time rejection).
    """
    if answer.scope == "always":
        raise InvalidAnswer(
            "baton never answers allow_always (the agent would stop asking); "
            "allow once with a grant instead (--scope turn|task|role|run|project)"
        )
    kinds: tuple[str, ...] = (
        ("allow_once",) if answer.decision == "allow" else ("reject_once", "reject_always")
    )
    offered = [f"{o.option_id} ({o.kind})" for o in document.options]
    if answer.option_id is not None:
        chosen = next((o for o in document.options if o.option_id == answer.option_id), None)
        if chosen is None:
            raise InvalidAnswer(
                f"unknown permission option {answer.option_id!r}; the agent offered {listed(offered)}"
            )
        if chosen.kind not in kinds:
            raise InvalidAnswer(
                f"option {chosen.option_id!r} is {chosen.kind}, which does not match "
                f"{answer.decision} ({answer.scope})"
            )
        return chosen
    for kind in kinds:
        for option in document.options:
            if option.kind == kind:
                return option
    raise InvalidAnswer(
        f"the agent offered no {' or '.join(kinds)} option to {answer.decision} with; "
        f"it offered {listed(offered)}"
    )


def _validate(document: PermissionRequest, answer: PermissionAnswer) -> PermissionAnswer:
    option = choose_permission_option(document, answer)
    if answer.grant is not None:
        grant = normalize_grant(document, answer.grant, tool_call_paths(document))
        answer = answer.model_copy(update={"grant": grant})
    return answer.model_copy(update={"option_id": option.option_id})


def _reply(document: PermissionRequest, answer: PermissionAnswer) -> Reply:
    option = choose_permission_option(document, answer)
    return {"outcome": {"outcome": "selected", "optionId": option.option_id}}


def _cancelled(document: PermissionRequest) -> Reply:
    return {"outcome": {"outcome": "cancelled"}}


def _expired(document: PermissionRequest) -> Reply:
    """The agent's own rejection; ``cancelled`` (allowing nothing) when it offered none."""
    try:
        return _reply(document, PermissionAnswer(decision="deny"))
    except InvalidAnswer:  # the agent offered no rejection
        return _cancelled(document)


def _automatic(document: PermissionRequest, decision: AutomaticDecision) -> PermissionAnswer:
    return PermissionAnswer(decision="allow" if decision.outcome == "allow" else "deny")


PERMISSION: KindRules[PermissionRequest, PermissionAnswer] = KindRules(
    answer_type=PermissionAnswer,
    validate=_validate,
    reply=_reply,
    cancelled_reply=_cancelled,
    expired_reply=_expired,
    automatic_answer=_automatic,
)
