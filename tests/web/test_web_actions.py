"""Acting from the page through the same validated paths as the CLI: a task for a role
(FCoP T1 as the human), a one-off ``baton run`` child, cancelling its turn."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from pathlib import Path

import httpx
import pytest
from starlette.applications import Starlette

from baton.app.recovery import open_store
from baton.config import load_config
from baton.fcop_port.project import init_project, open_context
from baton.requests.ledger import Ledger
from baton.requests.states import State
from baton.store.store import Store
from baton.web.app import create_app
from tests.web.conftest import BASE_URL
from tests.web.webbuild import TOKEN

AUTH = {"Authorization": f"Bearer {TOKEN}"}


@pytest.fixture
def project(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    root = tmp_path / "proj"
    root.mkdir()
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    monkeypatch.setenv("XDG_STATE_HOME", str(tmp_path / "xdg"))
    monkeypatch.delenv("BATON_STATE_DIR", raising=False)
    init_project(root)
    return root


@pytest.fixture
async def project_app(project: Path) -> AsyncIterator[tuple[Starlette, Store, Ledger]]:
    store = open_store(load_config(project).db_path)
    ledger = Ledger(store)
    app = create_app(store, ledger, token=TOKEN, project_dir=project, poll_interval=0.05)
    try:
        yield app, store, ledger
    finally:
        await app.state.baton_close()
        await ledger.aclose()
        await store.aclose()


async def test_create_a_task_for_a_role(
    project: Path, project_app: tuple[Starlette, Store, Ledger]
) -> None:
    app, _, _ = project_app
    async with httpx.AsyncClient(
        transport=httpx.ASGITransport(app=app), base_url=BASE_URL, headers=AUTH
    ) as client:
        body = {"to": "QA", "subject": "Check the build", "body": "do it", "operation_id": "w-1"}
        created = await client.post("/api/tasks", json=body)
        assert created.status_code == 201, created.text
        task_id = created.json()["task_id"]
        again = await client.post("/api/tasks", json=body)  # a retried submit: same task
        assert again.status_code == 200 and again.json()["task_id"] == task_id
        task = open_context(project).port.read_task(task_id)
        assert (task.sender, task.recipient, task.stage) == ("ADMIN", "QA", "inbox")
        nobody = await client.post("/api/tasks", json=body | {"to": "CEO", "operation_id": "w-2"})
        assert nobody.status_code == 422 and "not a role" in nobody.json()["message"]
        two_lines = await client.post("/api/tasks", json=body | {"subject": "a\nb"})
        assert two_lines.status_code == 422
        board = (await client.get("/api/tasks?stage=inbox")).json()["tasks"]
        assert [t["task_id"] for t in board] == [task_id]
        detail = (await client.get(f"/api/tasks/{task_id}")).json()
        assert detail["documents"][0]["kind"] == "TASK"
        assert "<p>do it</p>" in detail["documents"][0]["html"]


async def test_start_a_run_then_cancel_its_turn(
    project_app: tuple[Starlette, Store, Ledger],
) -> None:
    app, store, ledger = project_app
    async with httpx.AsyncClient(
        transport=httpx.ASGITransport(app=app), base_url=BASE_URL, headers=AUTH
    ) as client:
        assert "builtin" in (await client.get("/api/agents")).json()["agents"]
        bad = await client.post("/api/runs", json={"agent": "nope", "prompt": "x"})
        assert bad.status_code == 422
        # An execute step escalates under the default policy: the run waits for a human.
        prompt = "```sh\necho from-the-page\n```\n"
        started = await client.post("/api/runs", json={"agent": "builtin", "prompt": prompt})
        assert started.status_code == 201, started.text
        run_id = started.json()["run_id"]
        async with asyncio.timeout(120):
            while not await ledger.pending():
                await asyncio.sleep(0.05)  # polling another process's writes
        (waiting,) = await ledger.pending()
        assert waiting.run_id == run_id and waiting.state is State.PENDING
        run = (await client.get(f"/api/runs/{run_id}")).json()
        assert run["outcome"]["label"] == "waiting for you (1)"
        cancelled = await client.post(f"/api/runs/{run_id}/cancel")
        assert cancelled.status_code == 202, cancelled.text
        async with asyncio.timeout(120):
            while (await asyncio.to_thread(store.get_run, run_id)).status == "running":  # type: ignore[union-attr]
                await asyncio.sleep(0.05)
        assert (await asyncio.to_thread(store.get_run, run_id)).status == "cancelled"  # type: ignore[union-attr]
        assert (await ledger.get(waiting.request_id)).state is State.CANCELLED
        again = await client.post(f"/api/runs/{run_id}/cancel")
        assert again.status_code == 409


async def test_cancelling_a_role_turn_is_refused_clearly_when_nothing_runs(
    project_app: tuple[Starlette, Store, Ledger],
) -> None:
    """The team board's Cancel turn (issue 14): what the page can get wrong is a 4xx."""
    app, store, _ = project_app
    async with httpx.AsyncClient(
        transport=httpx.ASGITransport(app=app), base_url=BASE_URL, headers=AUTH
    ) as client:
        url = "/api/team/slots/QA/cancel"
        none = await client.post(url, json={})
        assert none.status_code == 409 and "no baton up is running" in none.json()["message"]
        assert (await client.post(url, content=b"{}")).status_code == 415
        bad = await client.post(url, json={"reason": 3})
        assert bad.status_code == 422
        assert "POST /api/team/slots/" in (await _up_run_cancel(client, store)).json()["message"]


async def _up_run_cancel(client: httpx.AsyncClient, store: Store) -> httpx.Response:
    from tests.support.records import run_record

    await asyncio.to_thread(store.create_run, run_record("run-up", kind="up"))
    answer = await client.post("/api/runs/run-up/cancel")
    assert answer.status_code == 409
    return answer


async def test_the_raise_button_raises_a_limit_as_baton_budget_raise_does(
    project: Path, project_app: tuple[Starlette, Store, Ledger]
) -> None:
    from baton.budgets.rules import ScopeKey
    from baton.store import budget_sql

    with (project / "baton.toml").open("a", encoding="utf-8") as toml:
        toml.write("\n[budget]\nper_task = { cost_usd = 1.0 }\n")
    app, store, _ = project_app
    async with httpx.AsyncClient(
        transport=httpx.ASGITransport(app=app), base_url=BASE_URL, headers=AUTH
    ) as client:
        body = {"scope": "task", "key": "T-1", "dimension": "cost_usd", "value": 5}
        raised = await client.post("/api/budget/raise", json=body)
        assert raised.status_code == 200, raised.text
        [event] = raised.json()["raised"]
        assert (event["previous"], event["limit"], event["by"]) == (1.0, 5.0, "dashboard")
        stored = store.read_tx(lambda tx: budget_sql.raised(tx, ScopeKey("task", "T-1")))
        assert stored == {"cost_usd": 5.0}
        lower = await client.post("/api/budget/raise", json=body | {"value": 2})
        assert lower.status_code == 422 and "would not raise" in lower.text, lower.text
        wrong = await client.post("/api/budget/raise", json=body | {"scope": "planet"})
        assert wrong.status_code == 422 and "not a budget scope" in wrong.text, wrong.text
    assert store.read_tx(lambda tx: budget_sql.raised(tx, ScopeKey("task", "T-1"))) == {
        "cost_usd": 5.0
    }, "a refused raise changes nothing"
