"""A stalled turn on the dashboard (issue 12 item 4): the runs list and the run page say
"stalled" with how long while the agent is silent, the team board shows the role as
stalled with the silence in words, and all of it clears once ``turn.resumed`` is stored."""

from __future__ import annotations

from datetime import datetime, timedelta
from types import SimpleNamespace as NS

import httpx

from baton.events.model import (
    CanonicalEvent,
    Payload,
    TurnResumed,
    TurnStalled,
    TurnSubmitted,
)
from baton.store.live_turns import LiveTurn
from baton.store.store import Store
from baton.web.board import session_state, snapshot_from_team_view
from baton.web.summaries import run_outcome
from tests.support.records import TS


async def _put(store: Store, payload: Payload) -> None:
    store.append(
        CanonicalEvent(
            type=payload.TYPE,
            seq=store.last_seq("run-1") + 1,
            run_id="run-1",
            session_id="as-dev",
            turn_id="turn-1",
            ts=TS,
            payload=payload,
        )
    )
    await store.flush()


def test_a_stalled_turn_makes_the_session_and_the_run_stalled() -> None:
    base = {"status": "working", "task_status": None, "waiting": False, "breaker_open": False}
    assert session_state(**base | {"turn_stalled": True}) == "stalled"
    assert session_state(**base | {"turn_stalled": True, "waiting": True}) == "waiting"
    assert run_outcome("running", {}, 0, 61_000) == {
        "label": "stalled: the agent has said nothing for 1m 1s",
        "tone": "warn",
    }
    assert run_outcome("running", {}, 0)["label"] == "running"


def test_the_board_shows_the_silent_role_as_stalled() -> None:
    slot = NS(
        name="DEV",
        role="DEV",
        agent="builtin",
        status="working",
        session_id="as-dev",
        current_task=None,
        usage={"availability": "unavailable"},
        files_changed=(),
        turns=1,
        tool_calls_count=0,
        updated_at="t",
    )
    view = NS(
        team_loop="running",
        updated_at="t",
        team={"name": "default", "leader": "DEV", "human": "ADMIN"},
        roles=(NS(role="DEV", agent="builtin", leader=True, paused_for_s=0.0),),
        slots=(slot,),
        counts={},
        refusals=(),
        tasks=(),
        attention=(),
    )
    at = datetime.fromisoformat(TS.replace("Z", "+00:00"))
    stalled = LiveTurn("run-1", "as-dev", "turn-1", started_at=TS, stalled_at=TS, silent_ms=60_000)
    args = {"project": "/p", "done": (), "pending": (), "descriptions": {}}
    [role] = snapshot_from_team_view(
        view, **args, live=[stalled], now=at + timedelta(seconds=5)
    ).roles
    assert role.state == "stalled" and role.silence == "the agent has said nothing for 1m 5s"
    talking = LiveTurn("run-1", "as-dev", "turn-1", started_at=TS)
    [role] = snapshot_from_team_view(view, **args, live=[talking], now=at).roles
    assert role.state == "working" and role.silence == ""


async def test_the_runs_api_and_run_page_say_stalled_until_the_agent_speaks(
    client: httpx.AsyncClient, store: Store
) -> None:
    await _put(store, TurnSubmitted(prompt_preview="go", prompt_bytes=2, prompt_sha256="0" * 64))
    assert (await client.get("/api/runs/run-1")).json()["outcome"]["label"] == "running"
    await _put(store, TurnStalled(silent_ms=60_000, threshold_ms=60_000, timeout_in_ms=1_000))
    detail = (await client.get("/api/runs/run-1")).json()
    assert detail["outcome"]["label"].startswith("stalled: the agent has said nothing for")
    [turn] = detail["turns"]
    assert turn["stalled"] and turn["silent_ms"] >= 60_000 and turn["turn_id"] == "turn-1"
    [row] = (await client.get("/api/runs")).json()["runs"]
    assert row["outcome"]["label"].startswith("stalled:") and row["outcome"]["tone"] == "warn"
    page = (await client.get("/runs/run-1")).text
    assert "stalled: the agent has said nothing for" in page
    assert "stalled:" in (await client.get("/runs")).text
    await _put(store, TurnResumed(silent_ms=65_000))
    detail = (await client.get("/api/runs/run-1")).json()
    assert detail["outcome"]["label"] == "running" and not detail["turns"][0]["stalled"]
    assert "stalled:" not in (await client.get("/runs/run-1")).text
