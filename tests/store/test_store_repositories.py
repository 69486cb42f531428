"""Every repository over the store's ``Tx``, on both backends (``open_store``).

The team loop's tables (tasks, turns, slots, roles, outbox, questions, refusals,
meta), services, web sessions and the history reads speak one SQL; these tests
run that SQL on SQLite and on PostgreSQL, with the rules callers rely on:
guarded updates, identity ids, the outbox's doorbell, float timestamps kept whole.
"""

from __future__ import annotations

import asyncio
import json
from typing import Any

from baton.events.model import ToolExecutionCompleted, TurnCompleted, TurnSubmitted
from baton.store import history, team_sql, web_sessions
from baton.store.services_sql import ServiceRecord, list_services, register_service
from baton.store.tx import Tx

from .conftest import StoreFactory, event, run_record

AT = "2026-12-02T00:00:00.000Z"


def _task(task_id: str, **changes: Any) -> dict[str, Any]:
    values: dict[str, Any] = {
        "task_id": task_id,
        "role": "dev",
        "state": "seen",
        "for_human": False,
        "created_at": AT,
        "updated_at": AT,
    }
    values.update(changes)
    return values


async def test_tasks_guarded_updates_and_children(open_store: StoreFactory) -> None:
    store = open_store()
    try:

        def seed(tx: Tx) -> None:
            team_sql.TASKS.insert(tx, _task("T1"))
            team_sql.TASKS.insert(tx, _task("T2", parent="T1", created_at="2026-12-02T00:00:01Z"))
            team_sql.TASKS.insert(tx, _task("T3", parent="T1", state="claimed"))

        await store.write(seed)
        # A guarded update applies once: the second writer's guard no longer matches.
        first = await store.write(
            lambda tx: team_sql.TASKS.update(
                tx, "T1", {"state": "claimed", "version": 2}, guard={"version": 1}
            )
        )
        second = await store.write(
            lambda tx: team_sql.TASKS.update(
                tx, "T1", {"state": "settled", "version": 2}, guard={"version": 1}
            )
        )
        assert (first, second) == (1, 0)

        def read(tx: Tx) -> tuple[list[str], list[str], int, bool]:
            children = [r[0] for r in team_sql.children_of(tx, "T1")]
            claimed = [r[0] for r in team_sql.tasks_in_states(tx, ["claimed"])]
            row = team_sql.TASKS.get(tx, "T1")
            assert row is not None
            by_name = dict(zip(team_sql.TASK_COLUMNS, row, strict=True))
            return children, claimed, by_name["version"], bool(by_name["for_human"])

        children, claimed, version, for_human = store.read_tx(read)
        assert children == ["T3", "T2"]  # created_at order
        assert claimed == ["T1", "T3"]
        assert version == 2 and for_human is False
    finally:
        store.close()


async def test_turns_have_a_two_column_key_and_a_state_guard(open_store: StoreFactory) -> None:
    store = open_store()
    try:

        def seed(tx: Tx) -> None:
            for dispatch in (1, 2):
                team_sql.TURNS.insert(
                    tx,
                    {
                        "task_id": "T1",
                        "dispatch": dispatch,
                        "slot": "dev-1",
                        "role": "dev",
                        "kind": "work",
                        "state": "dispatched",
                        "started_at": AT,
                    },
                )

        await store.write(seed)
        moved = await store.write(
            lambda tx: team_sql.TURNS.update_turn(
                tx, "T1", 2, {"state": "finished", "outcome": "ok"}, state="dispatched"
            )
        )
        again = await store.write(
            lambda tx: team_sql.TURNS.update_turn(
                tx, "T1", 2, {"state": "interrupted"}, state="dispatched"
            )
        )
        assert (moved, again) == (1, 0)

        def read(tx: Tx) -> tuple[list[int], Any, list[int]]:
            last = team_sql.TURNS.last(tx, "T1")
            assert last is not None
            return (
                [r[1] for r in team_sql.open_turns(tx)],
                last[team_sql.TURN_COLUMNS.index("outcome")],
                [r[1] for r in team_sql.turns_of(tx, "T1")],
            )

        assert store.read_tx(read) == ([1], "ok", [1, 2])
    finally:
        store.close()


async def test_the_outbox_rings_the_team_topic_and_is_consumed_once(
    open_store: StoreFactory,
) -> None:
    store = open_store()
    other = open_store()  # another process (on PostgreSQL: another host)
    try:
        listener = await store.listener()
        rung = listener.subscribe(team_sql.TEAM_TOPIC)

        def post(tx: Tx) -> int:
            tx.wake(team_sql.TEAM_TOPIC)
            return team_sql.insert_outbox(
                tx,
                {
                    "kind": "report",
                    "slot": "dev-1",
                    "role": "dev",
                    "data": json.dumps({"n": 1}),
                    "created_at": AT,
                },
            )

        first = await other.write(post)
        await asyncio.wait_for(rung.wait(), 10)
        second = await other.write(post)
        assert second == first + 1
        assert [r[0] for r in store.read_tx(team_sql.open_outbox)] == [first, second]
        consumed = await store.write(lambda tx: team_sql.consume_outbox(tx, first, AT))
        twice = await store.write(lambda tx: team_sql.consume_outbox(tx, first, AT))
        assert (consumed, twice) == (1, 0)
        assert [r[0] for r in store.read_tx(team_sql.open_outbox)] == [second]
    finally:
        other.close()
        store.close()


async def test_slots_roles_refusals_and_meta(open_store: StoreFactory) -> None:
    store = open_store()
    breaker = 1764633600.123456  # a wall-clock float: REAL must keep it to the microsecond
    try:
        idle = {"slot": "dev-1", "role": "dev", "agent": "a", "state": "idle"}
        await store.write(
            lambda tx: team_sql.SLOTS.upsert(tx, {**idle, "binding": "{}", "updated_at": AT})
        )
        await store.write(
            lambda tx: team_sql.SLOTS.upsert(
                tx, {**idle, "state": "ready", "binding": "{}", "updated_at": AT}
            )
        )

        def rest(tx: Tx) -> None:
            team_sql.ROLES.upsert(tx, {"role": "dev", "breaker_until": breaker, "updated_at": AT})
            for name, in_place in (("a.md", True), ("b.md", False), ("c.md", True)):
                team_sql.insert_refusal(
                    tx,
                    {"name": name, "reason": "bad", "message": "m", "in_place": in_place, "at": AT},
                )
            team_sql.set_meta(tx, "k", "v1")
            team_sql.set_meta(tx, "k", "v2")

        await store.write(rest)
        cleared = await store.write(lambda tx: team_sql.clear_refusals(tx, ["a.md", "b.md"]))

        def read(tx: Tx) -> dict[str, Any]:
            return {
                "slots": [(r[0], r[3]) for r in team_sql.all_slots(tx)],
                "breaker": team_sql.all_roles(tx)[0][1],
                "in_place": [r[1] for r in team_sql.refused_in_place(tx)],
                "recent": [r[1] for r in team_sql.recent_refusals(tx, limit=2)],
                "count": team_sql.count_refusals(tx),
                "meta": team_sql.meta(tx, "k"),
                "missing": team_sql.meta(tx, "nope"),
            }

        assert cleared == 1  # only a.md was refused in place
        assert store.read_tx(read) == {
            "slots": [("dev-1", "ready")],
            "breaker": breaker,
            "in_place": ["c.md"],
            "recent": ["b.md", "c.md"],
            "count": 3,
            "meta": "v2",
            "missing": None,
        }
    finally:
        store.close()


async def test_services_and_web_sessions(open_store: StoreFactory) -> None:
    store = open_store()
    try:
        service = ServiceRecord("s1", "serve", 42, "h", "boot", AT, "http://x", 8080, {"a": 1})
        await store.write(lambda tx: register_service(tx, service))
        assert store.read_tx(lambda tx: list_services(tx, "serve")) == [service]

        now = 1764633600.25
        await web_sessions.insert_code(store, "c" * 64, now=now, expires_at=now + 60)
        assert await web_sessions.consume_code(store, "c" * 64, now=now + 1) is True
        assert await web_sessions.consume_code(store, "c" * 64, now=now + 2) is False
        row = web_sessions.SessionRow("s" * 64, "http://x", now, now, now + 3600, "ua")
        await web_sessions.insert_session(store, row)
        assert web_sessions.find_session(store, "s" * 64) == row
        assert await web_sessions.revoke_all(store) == 1
    finally:
        store.close()


async def test_history_reads_json_fields(open_store: StoreFactory) -> None:
    """``json_extract`` and ``GROUP BY`` over the event log mean the same on both backends."""
    store = open_store()
    try:
        store.create_run(run_record("run-h"))
        payloads = [
            TurnSubmitted(prompt_preview="fix the bug", prompt_bytes=11, prompt_sha256="0" * 64),
            *(
                ToolExecutionCompleted(tool_call_id=f"c{i}", title="t", kind="edit", status=status)
                for i, status in enumerate(("completed", "completed", "failed"))
            ),
            TurnCompleted(stop_reason="end_turn", duration_ms=5),
        ]
        for seq, payload in enumerate(payloads, start=1):
            store.append(event(seq, "run-h", payload))
        await store.flush()
        assert [r.run_id for r in history.runs_page(store, history.RunFilter(), 10)] == ["run-h"]
        assert history.run_tool_counts(store, ["run-h"]) == {
            "run-h": {"tool.completed": 2, "tool.failed": 1, "turn.completed": 1}
        }
        assert history.run_prompts(store, ["run-h"]) == {"run-h": "fix the bug"}
    finally:
        store.close()
