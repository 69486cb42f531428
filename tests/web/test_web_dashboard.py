"""The dashboard: what it shows, that its buttons answer, and that agent text stays inert."""

from __future__ import annotations

import html
import json
import re

import httpx

from baton.request_model.documents import parse_document
from baton.requests.ledger import Ledger
from baton.requests.states import State
from baton.store.store import Store
from tests.support.records import run_record
from tests.web.webbuild import create, permission_doc, plan_doc, question_doc

SCRIPT = "<script>alert(1)</script>"
BREAKOUT = '"><img src=x onerror=alert(1)>'
ANSI = "\x1b[2J\x1b]0;pwned\x07\x1b[31mred"
RLO = "\u202e"  # RIGHT-TO-LEFT OVERRIDE ("Trojan Source")
LRI = "\u2066"
HOSTILE = f"{SCRIPT} {BREAKOUT} {ANSI} safe{RLO}txt.exe{LRI} end"


def _data_answers(page: str) -> list[dict[str, object]]:
    """The answer templates of the page's buttons, as the browser would read them."""
    return [json.loads(html.unescape(raw)) for raw in re.findall(r'data-answer="([^"]*)"', page)]


async def test_dashboard_lists_pending_requests_and_runs(
    client: httpx.AsyncClient, ledger: Ledger
) -> None:
    await create(ledger, permission_doc("make test"))
    await create(ledger, question_doc())
    plan = await create(ledger, plan_doc("# Plan\n\n- step *one*\n"))
    response = await client.get("/")
    assert response.status_code == 200
    assert response.headers["content-type"].startswith("text/html")
    page = response.text
    assert 'Waiting for you (<span id="inbox-count">3</span>)' in page
    assert '<pre class="command">make test</pre>' in page
    assert "Which database?" in page and "Postgres" in page and "SQLite" in page
    assert 'type="radio"' in page and 'type="checkbox"' in page  # single and multiple choice
    assert '<pre class="markdown"># Plan\n\n- step *one*\n</pre>' in page  # shown, not rendered
    assert 'href="/runs/run-1"' in page
    kinds = [(a["kind"], a.get("decision")) for a in _data_answers(page)]
    assert ("permission", "allow") in kinds and ("permission", "deny") in kinds
    assert ("permission", "allow") in kinds
    plan_answers = [a for a in _data_answers(page) if a["kind"] == "plan"]
    assert {a["revision"] for a in plan_answers} == {plan.revision}


async def test_button_templates_are_valid_answers(
    client: httpx.AsyncClient, ledger: Ledger
) -> None:
    perm = await create(ledger, permission_doc())
    plan = await create(ledger, plan_doc())
    answers = _data_answers((await client.get("/")).text)
    allow = next(a for a in answers if a["kind"] == "permission" and a["decision"] == "allow")
    accept = next(a for a in answers if a["kind"] == "plan" and a["decision"] == "accept")
    for record, answer in ((perm, allow), (plan, accept)):
        response = await client.post(f"/api/requests/{record.request_id}/answer", json=answer)
        assert response.status_code == 200, response.text
        assert (await ledger.get(record.request_id)).state is State.ANSWERED
    assert "Nothing is waiting for you." in (await client.get("/")).text


async def test_hostile_agent_text_is_escaped(
    client: httpx.AsyncClient, store: Store, ledger: Ledger
) -> None:
    store.create_run(run_record("run-2", agent=HOSTILE, cwd=HOSTILE))
    await create(ledger, permission_doc(HOSTILE, title=HOSTILE), run_id="run-2")
    await create(ledger, plan_doc(f"# Plan\n\n{HOSTILE}\n", name=HOSTILE))
    await create(ledger, question_doc(prompt=HOSTILE))
    page = "".join([(await client.get(p)).text for p in ("/", "/runs", "/runs/run-2")])
    # Our one script tag per page, and no other markup from the agent.
    assert page.count("<script") == 3
    assert "<img" not in page
    assert BREAKOUT not in page
    assert "\x1b" not in page and "\x07" not in page
    assert RLO not in page and LRI not in page
    # What is there instead: the text, visibly.
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in page
    assert "&quot;&gt;&lt;img src=x onerror=alert(1)&gt;" in page
    assert "␛[2J" in page
    assert "&lt;U+202E&gt;" in page and "&lt;U+2066&gt;" in page
    assert page.count("&lt;script&gt;alert(1)") >= 6  # title, command, plan, prompt, agent, cwd


async def test_run_page_and_unknown_run(client: httpx.AsyncClient, store: Store) -> None:
    store.create_run(run_record(f"run-{BREAKOUT}"))
    page = await client.get("/runs/run-1")
    assert page.status_code == 200
    assert 'data-run-id="run-1"' in page.text
    assert (await client.get("/runs/nope")).status_code == 404
    quoted = "run-%22%3E%3Cimg%20src%3Dx%20onerror%3Dalert%281%29%3E"
    assert f'href="/runs/{quoted}"' in (await client.get("/runs")).text
    hostile = await client.get(f"/runs/{quoted}")
    assert hostile.status_code == 200
    assert "<img" not in hostile.text
    assert 'data-run-id="run-&quot;&gt;&lt;img src=x onerror=alert(1)&gt;"' in hostile.text


async def test_forms_and_reviews_are_rendered_and_answerable(
    client: httpx.AsyncClient, ledger: Ledger
) -> None:
    form = await create(
        ledger,
        parse_document(
            {
                "kind": "elicitation",
                "message": "Configure the release",
                "requested_schema": {
                    "fields": [
                        {"type": "string", "name": "version", "title": "Version"},
                        {
                            "type": "string",
                            "name": "channel",
                            "choices": [{"value": "stable"}, {"value": "beta"}],
                        },
                        {"type": "integer", "name": "retries"},
                        {"type": "boolean", "name": "dry_run"},
                    ],
                    "required": ["version"],
                },
            }
        ),
    )
    review = await create(
        ledger,
        parse_document(
            {"kind": "review", "task_id": "TASK-1", "report_ref": "r/TASK-1.md", "summary": "Done"}
        ),
    )
    page = (await client.get("/")).text
    for field in ('data-field="version"', 'data-field="channel"', 'data-type="integer"'):
        assert field in page
    assert '<option value="beta">beta</option>' in page
    assert 'data-action="form"' in page
    answers = _data_answers(page)
    assert {"kind": "elicitation", "action": "decline"} in answers
    approve = next(a for a in answers if a["kind"] == "review" and a["decision"] == "approve")
    response = await client.post(f"/api/requests/{review.request_id}/answer", json=approve)
    assert response.status_code == 200, response.text
    # What the script's formAnswer() builds from those inputs:
    filled = {
        "kind": "elicitation",
        "action": "accept",
        "content": {"version": "1.2", "channel": "beta", "retries": 2, "dry_run": False},
    }
    response = await client.post(f"/api/requests/{form.request_id}/answer", json=filled)
    assert response.status_code == 200, response.text
