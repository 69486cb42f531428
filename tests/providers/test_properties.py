"""Property tests: the todo reducer and the child normalizer keep their invariants.

Todo reducer: for any sequence of merges and replaces, revisions strictly increase,
a snapshot never has more than 256 items nor more than its byte bound, texts are
bounded, ``cancelled`` is ``blocked``, and the list equals a plain reference model
of merge/replace semantics.

Child normalizer: whatever the order of spawns, state updates and foreign-session
updates, no delegation event names a child that was not spawned first, a child's
origin (spawning tool call, agent id) never changes across its events, and a child
completes at most once.
"""

from __future__ import annotations

from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from baton.events.model import (
    DelegationCompleted,
    DelegationStarted,
    DelegationUpdated,
    PlanUpdated,
    ProviderNotice,
)
from baton.providers.cursor.children import ChildNormalizer
from baton.providers.cursor.todos import (
    MAX_CONTENT_CHARS,
    MAX_ITEMS,
    MAX_SNAPSHOT_BYTES,
    TodoReducer,
    step_size,
)

STATUSES = ["pending", "in_progress", "completed", "cancelled", "weird"]

todo_item = st.fixed_dictionaries(
    {"id": st.sampled_from([str(i) for i in range(12)])},
    optional={
        "content": st.text(max_size=30) | st.just("é" * (MAX_CONTENT_CHARS + 50)),
        "status": st.sampled_from(STATUSES),
    },
)
todo_update = st.fixed_dictionaries(
    {"merge": st.booleans(), "todos": st.lists(todo_item, max_size=8)}
)


def reference(updates: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Merge/replace semantics as plainly as possible."""
    items: dict[str, dict[str, Any]] = {}
    for update in updates:
        if not update["merge"]:
            items = {}
        for todo in update["todos"]:
            current = items.get(todo["id"])
            if current is None:
                if len(items) >= MAX_ITEMS:
                    continue
                current = items[todo["id"]] = {"content": "", "status": "pending"}
            if "content" in todo:
                current["content"] = todo["content"][:MAX_CONTENT_CHARS]
            if "status" in todo:
                current["status"] = todo["status"]
    return [{"id": k, **v} for k, v in items.items()]


def check_snapshot(event: PlanUpdated) -> None:
    assert len(event.steps) <= MAX_ITEMS
    assert sum(step_size(s) for s in event.steps) <= MAX_SNAPSHOT_BYTES
    for step in event.steps:
        assert len(step.content) <= MAX_CONTENT_CHARS
        if step.native_status == "cancelled":
            assert step.status == "blocked"
        if step.status == "blocked":
            assert step.native_status == "cancelled"


@settings(max_examples=300, deadline=None)
@given(st.lists(todo_update, min_size=1, max_size=12))
def test_todo_reducer_matches_the_reference_and_keeps_its_bounds(
    updates: list[dict[str, Any]],
) -> None:
    reducer = TodoReducer()
    revisions: list[int] = []
    for index, update in enumerate(updates):
        result = reducer.apply(update)
        for payload in result.payloads:
            if isinstance(payload, PlanUpdated):
                check_snapshot(payload)
                revisions.append(payload.revision)
        expected = reference(updates[: index + 1])
        assert [t["id"] for t in result.todos] == [t["id"] for t in expected]
        assert [t["status"] for t in result.todos] == [t["status"] for t in expected]
        for got, want in zip(result.todos, expected, strict=True):
            assert (
                got["content"][: MAX_CONTENT_CHARS - 1] == want["content"][: MAX_CONTENT_CHARS - 1]
            )
        if not update["merge"]:
            seen: list[str] = []
            for todo in update["todos"]:
                if todo["id"] not in seen:
                    seen.append(todo["id"])
            assert [t["id"] for t in result.todos] == seen
    assert revisions == sorted(set(revisions)), "revisions must strictly increase"


@settings(max_examples=25, deadline=None)
@given(
    st.lists(
        st.fixed_dictionaries(
            {
                "id": st.integers(0, 400).map(str),
                "content": st.text(min_size=0, max_size=5) | st.just("x" * 5000),
                "status": st.sampled_from(STATUSES),
            }
        ),
        min_size=200,
        max_size=320,
    ),
    st.booleans(),
)
def test_large_lists_are_cut_to_the_bounds_and_say_so(
    todos: list[dict[str, Any]], merge: bool
) -> None:
    reducer = TodoReducer()
    result = reducer.apply({"todos": todos, "merge": merge})
    (event,) = [p for p in result.payloads if isinstance(p, PlanUpdated)]
    check_snapshot(event)
    distinct = len({t["id"] for t in todos})
    long_texts = any(len(t["content"]) > MAX_CONTENT_CHARS for t in todos)
    if distinct > MAX_ITEMS or long_texts:
        assert event.truncated
    assert len(result.todos) == min(distinct, MAX_ITEMS)


@settings(max_examples=100, deadline=None)
@given(
    st.lists(st.integers(1, 50), min_size=1, max_size=10),
    st.lists(todo_update, min_size=1, max_size=10),
)
def test_revisions_increase_even_with_a_shared_counter(
    jumps: list[int], updates: list[dict[str, Any]]
) -> None:
    counter = iter([sum(jumps[: i + 1]) for i in range(len(jumps))] + [0] * 100)
    reducer = TodoReducer(revision_source=lambda: next(counter))
    last = 0
    for update in updates:
        for payload in reducer.apply(update).payloads:
            if isinstance(payload, PlanUpdated):
                assert payload.revision > last
                last = payload.revision


# ---------------------------------------------------------------------- children

PARENT = "sess-parent"
CHILDREN = ["c1", "c2", "c3"]
SESSIONS = [PARENT, *CHILDREN, "stranger"]
identity = st.one_of(st.none(), st.sampled_from(["tc-1", "tc-2"]))
agents = st.one_of(st.none(), st.sampled_from(["a-1", "a-2"]))

spawn_op = st.tuples(
    st.just("spawn"), st.sampled_from(SESSIONS), st.sampled_from(CHILDREN), identity, agents
)
state_op = st.tuples(
    st.just("state"),
    st.sampled_from(SESSIONS),
    st.sampled_from([*CHILDREN, "ghost"]),
    st.sampled_from(["completed", "failed", "cancelled", "disconnected", "running", ""]),
    st.tuples(identity, agents),
)
foreign_op = st.tuples(st.just("foreign"), st.sampled_from([*SESSIONS[1:], "ghost"]))
ops = st.lists(st.one_of(spawn_op, state_op, foreign_op), max_size=30)


def _meta(tool: str | None, agent: str | None) -> dict[str, Any]:
    cursor = {k: v for k, v in (("toolCallId", tool), ("agentId", agent)) if v is not None}
    return {"_meta": {"cursor": cursor}} if cursor else {}


@settings(max_examples=400, deadline=None)
@given(ops)
def test_child_normalizer_never_invents_a_child_and_keeps_its_origin(
    operations: list[tuple[Any, ...]],
) -> None:
    normalizer = ChildNormalizer()
    normalizer.begin_turn(PARENT)
    started: dict[str, tuple[str | None, str | None]] = {}
    completed: set[str] = set()
    for op in operations:
        if op[0] == "spawn":
            _, on, child, tool, agent = op
            payloads = normalizer.spawned(
                on, {"subagentSessionId": child, "name": "r", "task": "t", **_meta(tool, agent)}
            )
        elif op[0] == "state":
            _, on, child, state, (tool, agent) = op
            payloads = normalizer.state_update(
                on, {"subagentSessionId": child, "state": state, **_meta(tool, agent)}
            )
        else:
            _, session = op
            update = {
                "sessionUpdate": "agent_message_chunk",
                "content": {"type": "text", "text": "x"},
            }
            got = normalizer.child_update(session, update)
            payloads = got if got is not None else normalizer.unknown_session(session, update)
        for payload in payloads:
            if isinstance(payload, ProviderNotice):
                continue
            assert isinstance(payload, DelegationStarted | DelegationUpdated | DelegationCompleted)
            for child in payload.children:
                origin = (child.parent_tool_call_id, child.agent_id)
                if isinstance(payload, DelegationStarted):
                    assert child.child_id not in started, "a child is started once"
                    started[child.child_id] = origin
                else:
                    assert child.child_id in started, "no child without a spawn"
                    assert started[child.child_id] == origin, "origin is immutable"
                if isinstance(payload, DelegationCompleted):
                    assert child.child_id not in completed, "a child completes once"
                    completed.add(child.child_id)
    normalizer.end_turn()
