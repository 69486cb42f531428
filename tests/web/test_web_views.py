"""The new views and their API: history filters and paging, honest run outcomes, live
inbox, the board's state rule, the OpenAPI document, and hostile text in task documents."""

from __future__ import annotations

import asyncio
import json

import httpx
from starlette.applications import Starlette

from baton.events.model import CanonicalEvent, ToolExecutionCompleted
from baton.request_model.documents import PermissionAnswer
from baton.requests.ledger import Ledger
from baton.store.store import Store
from baton.web.board import session_state
from baton.web.dashboard import render_task_page
from baton.web.markdown import render_markdown
from baton.web.summaries import run_outcome
from tests.support.records import TS, run_record
from tests.web.conftest import BASE_URL
from tests.web.streaming import StreamingASGITransport
from tests.web.test_web_dashboard import BREAKOUT, HOSTILE, RLO, SCRIPT
from tests.web.webbuild import TOKEN, create, permission_doc


def test_session_state_rule() -> None:
    base = {"status": "working", "task_status": None, "waiting": False, "breaker_open": False}
    assert session_state(**base) == "working"
    assert session_state(**base | {"waiting": True}) == "waiting"
    assert session_state(**base | {"task_status": "stalled"}) == "stalled"
    assert session_state(**base | {"breaker_open": True}) == "stalled"
    assert session_state(**base | {"status": "failed"}) == "attention"
    assert session_state(**base | {"status": "ready"}) == "idle"


def test_run_outcome_is_honest() -> None:
    assert run_outcome("completed", {"tool.failed": 3}, 0)["label"].startswith("failed")
    assert run_outcome("completed", {"tool.failed": 1, "tool.completed": 2}, 0)["tone"] == "warn"
    assert run_outcome("completed", {"tool.completed": 2}, 0) == {
        "label": "completed",
        "tone": "ok",
    }
    assert run_outcome("running", {}, 2)["label"] == "waiting for you (2)"
    assert run_outcome("running", {}, 0)["label"] == "running"


async def test_runs_api_filters_pages_and_shows_failed_steps(
    client: httpx.AsyncClient, store: Store
) -> None:
    for i in range(5):
        store.create_run(
            run_record(
                f"run-x{i}",
                agent="builtin" if i % 2 else "opencode",
                created_at=f"2026-02-0{i + 1}T00:00:00.000Z",
            )
        )
    failed = ToolExecutionCompleted(tool_call_id="c", title="t", kind="execute", status="failed")
    store.append(
        CanonicalEvent(
            type=failed.TYPE,
            seq=1,
            run_id="run-x1",
            session_id="s",
            turn_id="t",
            ts=TS,
            payload=failed,
        )
    )
    await store.flush()
    store.finish_run("run-x1", "completed", TS)
    first = (await client.get("/api/runs?agent=builtin&limit=1")).json()
    assert [r["run_id"] for r in first["runs"]] == ["run-x3"]
    second = (await client.get(f"/api/runs?agent=builtin&limit=1&before={first['next']}")).json()
    assert [r["run_id"] for r in second["runs"]] == ["run-x1"]
    assert second["runs"][0]["outcome"]["label"].startswith("failed: every step failed")
    assert second["next"] is None
    dated = (await client.get("/api/runs?since=2026-02-02&until=2026-02-04")).json()
    assert {r["run_id"] for r in dated["runs"]} == {"run-x1", "run-x2"}
    page = (await client.get("/runs?agent=builtin")).text
    assert "run-x3" in page and "run-x0" not in page
    assert (await client.get("/api/runs?before=garbage")).status_code == 400


async def test_decisions_say_who_decided_by_which_rule(
    client: httpx.AsyncClient, ledger: Ledger
) -> None:
    asked = await create(ledger, permission_doc("make a"))
    by_policy = await create(ledger, permission_doc("make b"))
    await ledger.answer(
        by_policy.request_id,
        PermissionAnswer(decision="deny"),
        decided_by="policy",
        rule="deny-all",
    )
    answered = await client.post(
        f"/api/requests/{asked.request_id}/answer", json={"kind": "permission", "decision": "allow"}
    )
    assert answered.json()["decision"] == "allowed once by a human (web dashboard)"
    human = (await client.get("/api/decisions?decided_by=human")).json()["decisions"]
    assert [d["request_id"] for d in human] == [asked.request_id]
    policy = (await client.get("/api/decisions?decided_by=policy")).json()["decisions"]
    assert policy[0]["decision"] == "denied by policy (deny-all)"
    page = (await client.get("/decisions?kind=permission")).text
    assert "web dashboard" in page and "deny-all" in page


async def test_live_inbox_is_the_whole_state_each_time(
    client: httpx.AsyncClient, app: Starlette, ledger: Ledger
) -> None:
    record = await create(ledger, permission_doc(SCRIPT))
    live = httpx.AsyncClient(
        transport=StreamingASGITransport(app),
        base_url=BASE_URL,
        headers={"Authorization": f"Bearer {TOKEN}"},
    )
    async with (
        live,
        asyncio.timeout(30),
        live.stream("GET", "/api/live?topics=inbox") as stream,
    ):
        event = None
        async for line in stream.aiter_lines():
            if line.startswith("event: "):
                event = line[7:]
            elif line.startswith("data: ") and event == "inbox":
                data = json.loads(line[6:])
                break
    assert [p["request_id"] for p in data["pending"]] == [record.request_id]
    assert data["pending"][0]["title"] == SCRIPT  # JSON; the page shows it as text
    fragment = await client.get(f"/fragments/requests/{record.request_id}")
    assert "<script>" not in fragment.text and "&lt;script&gt;" in fragment.text
    assert (await client.get("/api/live?topics=nope")).status_code == 400


async def test_openapi_describes_the_board(client: httpx.AsyncClient) -> None:
    doc = (await client.get("/api/openapi.json")).json()
    assert doc["openapi"].startswith("3.1")
    board = doc["components"]["schemas"]["BoardSnapshot"]
    assert {"roles", "tasks", "counts", "daemon"} <= set(board["properties"])
    role = doc["components"]["schemas"]["RoleView"]["properties"]["state"]
    assert role["enum"] == ["idle", "working", "waiting", "stalled", "attention"]
    assert "/api/team" in doc["paths"] and "/api/decisions" in doc["paths"]


def test_task_documents_are_rendered_but_inert() -> None:
    hostile_md = (
        f"# Report {HOSTILE}\n\n[click](javascript:alert(1)) <img src=x onerror=alert(1)>\n"
    )
    detail = {
        "task_id": "TASK-1",
        "task": {
            "subject": HOSTILE,
            "stage": "review",
            "parent": f"TASK-{BREAKOUT}",
            "children": [],
            "status": None,
        },
        "documents": [
            {
                "kind": "TASK",
                "doc_id": "TASK-1",
                "sender": HOSTILE,
                "recipient": "QA",
                "created_at": "",
                "fields": {"subject": HOSTILE},
                "refused": None,
                "html": render_markdown(hostile_md),
            },
            {
                "kind": "REPORT",
                "doc_id": f"REPORT-{BREAKOUT}",
                "sender": "QA",
                "recipient": "ADMIN",
                "created_at": "",
                "fields": {},
                "refused": HOSTILE,
                "html": "",
            },
        ],
        "changes": {
            "files": [HOSTILE],
            "diff": f"+++ b/x\n@@ -0,0 +1 @@\n+{SCRIPT}\n",
            "note": HOSTILE,
        },
    }
    page = render_task_page(detail)
    assert page.count("<script") == 1  # ours
    assert "<img" not in page and "javascript:" not in page.replace("javascript:alert", "")
    assert 'href="javascript' not in page
    assert RLO not in page and "\x1b" not in page
    assert "&lt;script&gt;" in page


def test_expiry_comes_from_the_request_only() -> None:
    from types import SimpleNamespace

    from baton.requests.states import State
    from baton.web.summaries import expires_at

    deadline = "2026-02-01T00:10:00.000Z"
    assert expires_at(SimpleNamespace(state=State.PENDING, expires_at=deadline)) == deadline  # type: ignore[arg-type]
    assert expires_at(SimpleNamespace(state=State.ANSWERED, expires_at=deadline)) is None  # type: ignore[arg-type]
    assert expires_at(SimpleNamespace(state=State.PENDING, expires_at="soon")) is None  # type: ignore[arg-type]
    assert expires_at(SimpleNamespace(state=State.PENDING)) is None  # type: ignore[arg-type]


async def test_runs_filter_by_role(client: httpx.AsyncClient, store: Store) -> None:
    from baton.events.model import SessionStarted
    from baton.store.records import SessionRecord

    for run_id in ("run-old", "run-new", "run-other"):
        store.create_run(run_record(run_id, kind="up"))
    store.upsert_session(
        SessionRecord(
            session_id="role-QA",
            agent="builtin",
            agent_session_id="as-qa",
            cwd="/w",
            identity_key="k",
            created_at=TS,
            updated_at=TS,
            role="QA",
            run_id="run-new",
        )
    )
    started = SessionStarted(
        agent="builtin", how="new", agent_session_id="as-qa", cwd="/w", protocol_version=1
    )
    store.append(
        CanonicalEvent(
            type=started.TYPE,
            seq=1,
            run_id="run-old",
            session_id="as-qa",
            turn_id=None,
            ts=TS,
            payload=started,
        )
    )
    await store.flush()
    found = (await client.get("/api/runs?role=QA")).json()["runs"]
    assert {r["run_id"] for r in found} == {"run-old", "run-new"}
    assert (await client.get("/api/runs?role=PM")).json()["runs"] == []


def test_the_board_reads_the_team_loops_view() -> None:
    """``baton.team.views.TeamView`` (team's read model) maps onto the board's snapshot."""
    from types import SimpleNamespace as NS

    from baton.web.board import snapshot_from_team_view

    def task(task_id: str, stage: str, **extra: object) -> NS:
        fields = {
            "task_id": task_id,
            "stage": stage,
            "sender": "ADMIN",
            "recipient": "PM",
            "subject": f"do {task_id}",
            "parent": None,
            "children": (),
            "baton_status": None,
            "role": "PM",
            "turns": 0,
            "report_ref": None,
            "note": "",
            "result": None,
        }
        return NS(**(fields | extra))

    slot = {
        "usage": {"availability": "unavailable"},
        "files_changed": (),
        "turns": 2,
        "tool_calls_count": 3,
        "updated_at": "t",
    }
    view = NS(
        team_loop="running",
        updated_at="t",
        team={"name": "default", "leader": "PM", "human": "ADMIN"},
        roles=(
            NS(role="PM", agent="builtin", leader=True, paused_for_s=0.0),
            NS(role="QA", agent="builtin", leader=False, paused_for_s=0.0),
            NS(role="OPS", agent="builtin", leader=False, paused_for_s=30.0),
        ),
        slots=(
            NS(
                name="PM",
                role="PM",
                agent="builtin",
                status="working",
                session_id="as-pm",
                current_task="T-1",
                **slot,
            ),
            NS(
                name="QA",
                role="QA",
                agent="builtin",
                status="ready",
                session_id="as-qa",
                current_task="T-2",
                **slot,
            ),
        ),
        counts={"inbox": 0, "active": 2},
        refusals=(),
        tasks=(
            task("T-1", "active", children=("T-2",), baton_status="waiting_children"),
            task(
                "T-2",
                "active",
                parent="T-1",
                recipient="QA",
                role="QA",
                baton_status="needs_attention",
                result="blocked",
            ),
        ),
        attention=(task("T-2", "active", note="no report after the reminder"),),
    )
    snap = snapshot_from_team_view(view, project="/p", done=(), pending=(), descriptions={})
    states = {r.name: r.state for r in snap.roles}
    assert states == {"PM": "working", "QA": "attention", "OPS": "stalled"}
    assert [t.children for t in snap.tasks] == [("T-2",), ()]
    assert snap.roles[1].usage is None and snap.roles[1].tool_calls == 3
    assert snap.stalls[0]["reason"] == "no report after the reminder"
    # A report's result reaches the board (a blocked child would sit in done unmarked).
    assert [t.result for t in snap.tasks] == [None, "blocked"]
