"""The page tells the truth (issue 32): live states are stamped and never go back, a fresh
stream starts from a fresh state, cards say what they ask in words a person reads."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

import httpx
import pytest
from starlette.applications import Starlette

from baton.request_model.documents import parse_document
from baton.requests.ledger import Ledger
from baton.store.store import Store
from baton.web.app import create_app
from baton.web.dashboard import request_card, shown_path
from baton.web.live import LiveHub
from baton.web.summaries import prompt_summary
from baton.workflow.header import PromptContext, reminder_prompt, task_prompt
from tests.web.conftest import BASE_URL
from tests.web.streaming import StreamingASGITransport
from tests.web.webbuild import TOKEN, create, permission_doc

AUTH = {"Authorization": f"Bearer {TOKEN}"}


async def _inbox_messages(app: Starlette, count: int) -> list[dict[str, Any]]:
    """The first ``count`` inbox messages of a fresh live stream."""
    messages: list[dict[str, Any]] = []
    async with (
        httpx.AsyncClient(
            transport=StreamingASGITransport(app), base_url=BASE_URL, headers=AUTH
        ) as client,
        asyncio.timeout(30),
        client.stream("GET", "/api/live?topics=inbox") as stream,
    ):
        event = None
        async for line in stream.aiter_lines():
            if line.startswith("event: "):
                event = line[7:]
            elif line.startswith("data: ") and event == "inbox":
                messages.append(json.loads(line[6:]))
                if len(messages) == count:
                    break
    return messages


async def test_a_fresh_stream_never_starts_from_a_state_cached_before_it(
    store: Store, ledger: Ledger
) -> None:
    app = create_app(store, ledger, token=TOKEN, poll_interval=0.02, keepalive=0.05)
    (first,) = await _inbox_messages(app, 1)
    assert first["pending"] == []
    # A quiet spell: nobody watches, a request arrives, then a page opens.
    record = await create(ledger, permission_doc("make release"))
    opened = __import__("time").time()
    messages = await _inbox_messages(app, 3)
    # Its first message already has the request, and is newer than the page that opened it.
    assert [p["request_id"] for p in messages[0]["pending"]] == [record.request_id]
    assert messages[0]["as_of"] > first["as_of"]
    assert messages[0]["as_of"] >= opened - 1
    # Idle: the newest state again (a page that skipped one catches up), never older.
    stamps = [m["as_of"] for m in messages]
    assert stamps == sorted(stamps)
    assert all(m["pending"] == messages[0]["pending"] for m in messages)
    await app.state.baton_close()


async def test_stamps_strictly_increase_even_when_the_clock_goes_back(
    store: Store, ledger: Ledger, monkeypatch: pytest.MonkeyPatch
) -> None:
    hub = LiveHub(store=store, ledger=ledger, board=None, poll_interval=60)
    clock = iter([100.0, 50.0, 50.0])
    monkeypatch.setattr("baton.web.live.time.time", lambda: next(clock))
    stamps = []
    for _ in range(3):
        await hub._publish()
        stamps.append(hub._as_of)
    assert stamps[0] == 100.0 and stamps[0] < stamps[1] < stamps[2]


async def test_the_inbox_page_carries_its_render_time(
    client: httpx.AsyncClient, ledger: Ledger
) -> None:
    page = (await client.get("/")).text
    stamp = float(page.split('data-as-of="', 1)[1].split('"', 1)[0])
    assert stamp > 1_600_000_000


def _review(summary: str) -> Any:
    return parse_document(
        {
            "kind": "review",
            "task_id": "TASK-0123456789abcdef0123456789abcdef",
            "report_ref": "REPORT-1",
            "summary": summary,
            "role": "PM",
        }
    )


async def test_a_review_card_is_titled_by_subject_and_renders_the_report(
    ledger: Ledger,
) -> None:
    summary = "# Release check\n\n| Task | Result |\n| --- | --- |\n| smoke | done |\n\n<script>x</script>"
    record = await create(ledger, _review(summary))
    html = request_card(record, subject="Release check", changes=None)
    assert "<h3>Review: Release check</h3>" in html
    assert "<table>" in html and "<td>smoke</td>" in html  # rendered, not raw pipes
    assert "<pre" not in html.split('class="review-report"', 1)[1].split("</section>", 1)[0]
    assert "<script>" not in html and "&lt;script&gt;" in html
    assert "required to send back" in html and "optional" not in html
    assert 'class="review-report"' in html  # sections a diff section can join
    untitled = request_card(record, subject=None, changes=None)
    assert "<h3>Review of TASK-0123456789abcdef0123456789abcdef</h3>" in untitled


@pytest.mark.parametrize(
    ("title", "accept", "decline"),
    [
        ("Retry?", "Retry", "Leave it as it is"),
        ("Answer", "Send answer", "Decline"),
        ("Release version", "Release version", "Decline"),
        (None, "Send", "Decline"),
    ],
)
async def test_forms_say_what_their_buttons_do(
    ledger: Ledger, title: str | None, accept: str, decline: str
) -> None:
    schema: dict[str, Any] = {"fields": [{"name": "note", "type": "string"}]}
    if title is not None:
        schema["title"] = title
    doc = parse_document({"kind": "elicitation", "message": "m", "requested_schema": schema})
    html = request_card(await create(ledger, doc))
    assert "Submit form" not in html
    assert f'data-action="form">{accept}</button>' in html
    assert f">{decline}</button>" in html


async def test_card_paths_are_relative_to_the_workspace(ledger: Ledger, tmp_path: Path) -> None:
    doc = parse_document(
        {
            "kind": "permission",
            "tool_call": {
                "tool_call_id": "c1",
                "title": "edit",
                "kind": "edit",
                "locations": [{"path": str(tmp_path / "src" / "app.py")}, {"path": "/etc/passwd"}],
                "diffs": [
                    {"path": str(tmp_path / "src" / "app.py"), "old_text": "a", "new_text": "b"}
                ],
            },
            "options": [{"option_id": "allow-once", "name": "Allow", "kind": "allow_once"}],
        }
    )
    html = request_card(await create(ledger, doc), workspace=tmp_path)
    assert str(tmp_path) not in html
    assert "paths: src/app.py, /etc/passwd (outside workspace)" in html
    assert "<figcaption>src/app.py</figcaption>" in html
    assert shown_path(None, "/x/y") == "/x/y"


def test_a_role_prompt_reads_as_its_role_and_subject() -> None:
    ctx = PromptContext(
        role="QA",
        team="default",
        leader="PM",
        human="ADMIN",
        team_roles=("PM", "QA"),
        tools=("write_report",),
        task_id="TASK-1",
        attempt_id="a1",
        subject="Run the smoke tests",
        sender="PM",
        body="```sh\npytest\n```",
    )
    preview = task_prompt(ctx)[:400]  # what turn.submitted keeps
    assert prompt_summary(preview) == "QA: Run the smoke tests"
    assert prompt_summary(reminder_prompt(ctx, turns_left=1)) == "reminder · Run the smoke tests"
    assert prompt_summary("fix the failing test") == "fix the failing test"


async def test_runs_list_a_team_runs_prompt_by_role_and_subject(
    client: httpx.AsyncClient, store: Store
) -> None:
    from baton.events.model import CanonicalEvent, TurnSubmitted
    from tests.support.records import TS

    prompt = (
        '[baton] FCoP role context\nYou are PM in team "t" (you lead it).\n\nSubject: Ship it\n'
    )
    payload = TurnSubmitted(prompt_preview=prompt, prompt_bytes=len(prompt), prompt_sha256="0" * 64)
    store.append(
        CanonicalEvent(
            type=payload.TYPE,
            seq=1,
            run_id="run-1",
            session_id="s",
            turn_id="t1",
            ts=TS,
            payload=payload,
        )
    )
    await store.flush()
    runs = (await client.get("/api/runs")).json()["runs"]
    assert runs[0]["prompt"] == "PM: Ship it"
    assert "role context" not in (await client.get("/runs")).text


async def test_the_favicon_is_served(client: httpx.AsyncClient) -> None:
    icon = await client.get("/favicon.ico")
    assert icon.status_code == 200 and b"<svg" in icon.content
    assert 'rel="icon"' in (await client.get("/")).text
