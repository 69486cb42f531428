"""The review card and the task page over a real task tree (issue 26 items 3 and 4): the
team loop over fake role sessions, a real git repository, the web app in-process.

What a card's buttons send is read from the card's HTML, as the page's script reads it,
and posted to the same API; the team loop then acts on the answer and the role's next
prompt is what the agent reads."""

from __future__ import annotations

import html
import json
import re
from collections.abc import AsyncIterator
from typing import Any

import httpx
import pytest

from baton.fcop_port.port import FcopPort
from baton.fcop_port.project import CoordinationPaths
from baton.requests.ledger import Ledger
from baton.requests.states import State
from baton.team_config import default_team_toml
from baton.web.app import create_app
from tests.team.conftest import KEY, Team
from tests.team.test_loop import review_request
from tests.team.test_worktrees import git_project, writes
from tests.web.conftest import BASE_URL
from tests.web.webbuild import TOKEN


@pytest.fixture
async def web(team: Team) -> AsyncIterator[httpx.AsyncClient]:
    """The dashboard over the team's store, for its project (a git repository) with the
    team's ``baton.toml`` and authority key (the board reads the same FCoP workspace)."""
    (team.root / "baton.toml").write_text(default_team_toml(), encoding="utf-8")
    key = CoordinationPaths(team.state_dir).authority_key
    key.parent.mkdir(parents=True, exist_ok=True)
    key.write_text(KEY.hex() + "\n", encoding="ascii")
    key.chmod(0o600)
    ledger = Ledger(team.store)
    app = create_app(team.store, ledger, token=TOKEN, project_dir=team.root, poll_interval=0.05)
    try:
        async with httpx.AsyncClient(
            transport=httpx.ASGITransport(app=app),
            base_url=BASE_URL,
            headers={"Authorization": f"Bearer {TOKEN}"},
        ) as client:
            yield client
    finally:
        await app.state.baton_close()
        await ledger.aclose()


async def _card(web: httpx.AsyncClient, request_id: str) -> str:
    response = await web.get(f"/fragments/requests/{request_id}")
    assert response.status_code == 200, response.text
    assert "script-src 'self'" in response.headers["content-security-policy"]
    return response.text


def _button_answer(card: str, label: str) -> dict[str, Any]:
    found = re.search(rf'data-answer="([^"]*)"[^>]*>{re.escape(label)}</button>', card)
    assert found is not None, f"no {label!r} button on the card"
    answer: dict[str, Any] = json.loads(html.unescape(found.group(1)))
    return answer


async def _two_trees_on_one_file(team: Team, port: FcopPort) -> tuple[str, str]:
    git_project(team.root)
    first = port.create_task(sender="ADMIN", recipient="DEV", subject="one", body="b")
    await team.run_idle(team.loop(team.factory({"DEV": writes("app.py", "print('one')\n")})))
    second = port.create_task(sender="ADMIN", recipient="DEV", subject="two", body="b")
    await team.run_idle(team.loop(team.factory({"DEV": writes("app.py", "print('two')\n")})))
    return first.task_id, second.task_id


async def test_the_card_follows_the_preflight_and_sends_back_to_rebase(
    team: Team, port: FcopPort, web: httpx.AsyncClient
) -> None:
    first, second = await _two_trees_on_one_file(team, port)
    first_request = (await review_request(team, first)).request_id
    second_request = (await review_request(team, second)).request_id
    card = await _card(web, second_request)
    assert "overlaps live branch <code>baton/" in card and "-one</code> in <code>app.py" in card
    assert "✓ merges cleanly into <code>main</code>" in card and "checked just now" in card
    assert "Send back to rebase" not in card
    assert '<details class="file-diff" id="req-' in card and "+print(&#x27;two&#x27;)" in card

    # Accept the first as the page does; the card says the merge waits for baton up.
    card_of_first = await _card(web, first_request)
    assert "Send back to rebase" not in card_of_first  # it merges cleanly
    accept = _button_answer(card_of_first, "Accept")
    accepted = await web.post(f"/api/requests/{first_request}/answer", json=accept)
    assert accepted.status_code == 200, accepted.text
    settled = await _card(web, first_request)
    assert "is merged into main when `baton up` runs." in settled
    assert 'data-merge="waiting" data-state="answered"' in settled
    await team.run_idle(team.loop(team.factory()))
    assert (team.root / "app.py").read_text() == "print('one')\n"
    merged = await _card(web, first_request)
    assert "Merged into main (" in merged and 'data-merge="waiting"' not in merged

    # The second's card, drawn again, shows the conflict with main now and offers the rebase.
    card = await _card(web, second_request)
    assert "✗ conflicts with <code>main</code> in <code>app.py</code>" in card
    assert "overlaps live branch" not in card  # the first is merged: no longer live
    assert "Changes: 1 file(s)" not in card  # the summary's stale one-line account is left out
    refused = await web.post(
        f"/api/requests/{second_request}/answer", json={"kind": "review", "decision": "approve"}
    )  # approving it could not merge: refused, the review stays pending
    assert refused.status_code == 422 and "not merged: baton/" in refused.text
    assert (await review_request(team, second)).state is State.PENDING
    rebase = _button_answer(card, "Send back to rebase")
    assert rebase["decision"] == "reject" and "git merge main" in rebase["reason"]
    rebase["reason"] += "\n\nKeep the greeting short."  # what the script adds from the box
    sent = await web.post(f"/api/requests/{second_request}/answer", json=rebase)
    assert sent.status_code == 200, sent.text
    assert sent.json()["decision"].startswith("sent back by a human (web dashboard): Your branch")

    # The role owning the branch reads the prompt, the files and the note, in its worktree.
    factory = team.factory({"DEV": writes("app.py", "print('two')\n")})
    await team.run_idle(team.loop(factory))
    [prompt] = factory.prompts_for("DEV")
    assert "ADMIN sent your last report back. Their reason:" in prompt
    assert (
        "> Your branch conflicts with main, which moved since you branched, in: app.py." in prompt
    )
    assert "(`git merge main`)" in prompt and "> Keep the greeting short." in prompt
    again = await review_request(team, second)
    assert again.request_id != second_request and again.state is State.PENDING


async def test_a_send_back_reason_reaches_the_roles_revision_prompt(
    team: Team, port: FcopPort, web: httpx.AsyncClient
) -> None:
    git_project(team.root)
    task = port.create_task(sender="ADMIN", recipient="DEV", subject="greet", body="b")
    await team.run_idle(team.loop(team.factory({"DEV": writes("hello.py", "print('hi')\n")})))
    request = await review_request(team, task.task_id)
    card = await _card(web, request.request_id)
    answer = _button_answer(card, "Send back") | {"reason": "Also print the date."}
    assert (await web.post(f"/api/requests/{request.request_id}/answer", json=answer)).is_success
    factory = team.factory({"DEV": writes("hello.py", "print('hi, today')\n")})
    await team.run_idle(team.loop(factory))
    [prompt] = factory.prompts_for("DEV")
    assert "ADMIN sent your last report back. Their reason:\n> Also print the date." in prompt


async def test_the_task_page_shows_its_trees_change_then_what_was_merged(
    team: Team, port: FcopPort, web: httpx.AsyncClient
) -> None:
    git_project(team.root)
    task = port.create_task(sender="ADMIN", recipient="DEV", subject="feature", body="b")
    await team.run_idle(team.loop(team.factory({"DEV": writes("feature.py", "x = 1\n")})))
    detail = (await web.get(f"/api/tasks/{task.task_id}")).json()
    tree = detail["tree"]
    assert tree["state"] == "live" and tree["base"] == "main" and tree["root_task"] == task.task_id
    assert [(f["status"], f["path"], f["added"]) for f in tree["changes"]["files"]] == [
        ("A", "feature.py", 1)
    ]
    assert "+x = 1" in tree["changes"]["diff"] and tree["preflight"] == "checked just now"
    page = (await web.get(f"/tasks/{task.task_id}")).text
    assert '<section class="changes tree"' in page and "<code>feature.py</code>" in page
    assert "merges cleanly into <code>main</code>" in page

    request = await review_request(team, task.task_id)
    await web.post(
        f"/api/requests/{request.request_id}/answer", json={"kind": "review", "decision": "approve"}
    )
    await team.run_idle(team.loop(team.factory()))
    assert (team.root / "feature.py").read_text() == "x = 1\n"
    detail = (await web.get(f"/api/tasks/{task.task_id}")).json()
    tree = detail["tree"]
    assert tree["state"] == "removed" and tree["merge"].startswith("Merged into main (")
    # what it brought is still shown (its head against where it started), no preflight
    assert "+x = 1" in tree["changes"]["diff"] and tree["preflight"] is None
    page = (await web.get(f"/tasks/{task.task_id}")).text
    assert "Merged into main (" in page and "merge preflight" not in page
