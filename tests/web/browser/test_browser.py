"""The dashboard in a real browser against a real ``baton up --serve`` on the built-in agents."""

from __future__ import annotations

import http.server
import re
import threading
from collections.abc import Iterator
from typing import Any, ClassVar

import pytest

from tests.web.browser.conftest import Team, goto, login, shoot

pytestmark = pytest.mark.slow

QA_TASK = """Smoke test the project.

```sh
echo "smoke: ok"
test -f baton.toml && echo "config present"
```

```file notes/smoke.txt
smoke checked
```
"""


def _allow(page: Any, count: int) -> None:
    """Answer the next ``count`` permission cards with "Allow once", as they arrive."""
    for _ in range(count):
        card = _card(page, "permission")
        card.get_by_role("button", name="Allow once").click()
        card.locator(".status", has_text="allowed once").wait_for()


def _card(page: Any, kind: str) -> Any:
    """The next pending card of this kind, by its id (it moves once it is decided).

    Callers wait for the previous card's decision first, so "the first pending card"
    is never one whose answer is still on its way.
    """
    card = page.locator(f"#cards article.kind-{kind}:not(.done)").first
    card.wait_for()
    request_id = card.get_attribute("data-request-id")
    return page.locator(f'article[data-request-id="{request_id}"]')


def test_team_works_live_permission_and_review_round_trip(team: Team, browser: Any) -> None:
    url = team.start()
    inbox = login(browser, url)
    board = inbox.context.new_page()
    goto(board, team.origin + "/team")
    board.locator('#roles article[data-role="QA"]').wait_for()
    shoot(board, "team-idle-desktop")

    task_id = team.task("QA", "Smoke test", QA_TASK)
    # The board follows live: the task appears, QA waits for the human.
    board.locator(f'#stages [data-task="{task_id}"]').wait_for()
    board.locator('#roles article[data-role="QA"] .badge', has_text="waiting for you").wait_for()
    assert re.match(r"\(1\) ", inbox.title()) or inbox.locator("#pending-count").inner_text() == "1"
    shoot(board, "team-desktop")

    # A permission appears without a reload and is answered by clicking.
    card = _card(inbox, "permission")
    assert "smoke: ok" in card.locator("pre.command").inner_text()
    inbox.locator("#banner").wait_for(state="visible")
    shoot(inbox, "inbox-permission-desktop")
    card.get_by_role("button", name="Allow once").click()
    card.locator(".status", has_text="allowed once").wait_for()
    _allow(inbox, 1)  # the file step

    # The agent goes on: QA reports to the human, a review card arrives with the summary,
    # the changed files and the full diff.
    review = _card(inbox, "review")
    assert task_id in review.inner_text()
    assert "notes/smoke.txt" in review.locator("ul.files").inner_text()
    assert "+smoke checked" in review.locator("table.diff-lines").inner_text().replace("\n", "")
    shoot(inbox, "inbox-review-desktop")
    review.locator("textarea[data-reason]").fill("Also print the date, please.")
    review.get_by_role("button", name="Send back").click()
    review.locator(".status", has_text="sent back").wait_for()

    # Sent back with the reason: QA works again (new permissions), then the human accepts.
    _allow(inbox, 2)
    again = _card(inbox, "review")
    again.get_by_role("button", name="Accept").click()
    again.locator(".status", has_text="accepted").wait_for()
    board.locator(f'#stages [data-stage="done"] [data-task="{task_id}"]').wait_for()
    board.locator('#roles article[data-role="QA"] .badge', has_text="idle").wait_for()

    # The task page renders its documents; the run view reads as a transcript.
    goto(board, team.origin + f"/tasks/{task_id}")
    board.locator("article.doc.kind-review").first.wait_for()  # the shell fetched the page
    assert board.locator("article.doc.kind-report").count() >= 2
    assert board.locator("article.doc.kind-review").count() >= 1
    shoot(board, "task-desktop")
    goto(board, team.origin + "/runs")
    board.locator("table.history a").first.click()
    board.locator('.lane[data-lane="QA"] details.tool').first.wait_for()
    # Every request of this run was answered: no line of it still says "waiting for you".
    board.locator("p.notice.request[data-request].cleared").first.wait_for()
    assert board.locator("p.notice.request[data-request]:not(.cleared)").count() == 0
    assert (
        board.locator('.lane[data-lane="QA"] details.tool .badge', has_text="completed").count()
        >= 2
    )
    board.locator('.lane[data-lane="PM"], .lane[data-lane="QA"]').first.wait_for()
    shoot(board, "run-desktop")
    goto(board, team.origin + "/decisions?decided_by=human")
    assert board.locator("table.history tbody tr").count() >= 4
    assert "web dashboard" in board.locator("table.history").inner_text()
    kinds = board.locator('table.history td[data-label="kind"]')
    # one line per kind cell: a word like "permission" never breaks inside itself
    lines = board.evaluate(
        "cells => cells.map(c => { const r = document.createRange(); r.selectNodeContents(c);"
        " return r.getClientRects().length; })",
        kinds.element_handles(),
    )
    assert lines and set(lines) == {1}, lines
    shoot(board, "decisions-desktop")


def test_phone_width_can_answer(team: Team, browser: Any) -> None:
    url = team.start()
    phone = login(browser, url, width=390, height=844)
    task_id = team.task("QA", "Phone check", QA_TASK)
    card = _card(phone, "permission")
    shoot(phone, "inbox-permission-phone")
    button = card.get_by_role("button", name="Allow once")
    box = button.bounding_box()
    assert box is not None and box["width"] >= 300  # full-width buttons on a phone
    assert phone.evaluate("document.documentElement.scrollWidth") <= 390
    button.click()
    card.locator(".status", has_text="allowed once").wait_for()
    _allow(phone, 1)
    review = _card(phone, "review")
    shoot(phone, "inbox-review-phone")
    review.get_by_role("button", name="Accept").click()
    review.locator(".status", has_text="accepted").wait_for()
    for path, name in (
        ("/team", "team"),
        ("/runs", "runs"),
        ("/decisions", "decisions"),
        (f"/tasks/{task_id}", "task"),
    ):
        goto(phone, team.origin + path)
        if name == "team":
            phone.locator(f'#stages [data-task="{task_id}"]').wait_for()
        assert phone.evaluate("document.documentElement.scrollWidth") <= 390, name
        shoot(phone, f"{name}-phone")
    goto(phone, team.origin + "/runs")
    phone.locator("table.history a").first.click()
    phone.locator("details.tool").first.wait_for()
    shoot(phone, "run-phone")
    desktop = login(browser, team.new_login_url())
    goto(desktop, team.origin + "/runs")
    shoot(desktop, "runs-desktop")


def test_a_page_open_across_a_restart_keeps_working_and_catches_up(
    team: Team, browser: Any
) -> None:
    url = team.start()
    page = login(browser, url)
    page.locator("#live-state.on").wait_for()
    team.stop()
    page.locator("#live-state.off").wait_for()
    # While the server is down, work arrives; the open page catches up on reconnect.
    team.task("QA", "While you were away", QA_TASK)
    team.start()
    card = _card(page, "permission")  # no reload: the stored session still works
    page.locator("#live-state.on").wait_for()
    card.get_by_role("button", name="Allow once").click()
    card.locator(".status", has_text="allowed once").wait_for()
    _allow(page, 1)
    _card(page, "review")


class _Recorder(http.server.BaseHTTPRequestHandler):
    seen: ClassVar[list[dict[str, str]]] = []

    def do_GET(self) -> None:
        _Recorder.seen.append(
            {"host": self.headers.get("host", ""), "cookie": self.headers.get("cookie", "")}
        )
        self.send_response(200)
        self.send_header("content-type", "text/plain")
        self.end_headers()
        self.wfile.write(b"another local server")

    def log_message(self, *args: Any) -> None:
        pass


@pytest.fixture
def other_server() -> Iterator[int]:
    """A second local web server on another port (a dev server an agent started)."""
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _Recorder)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    _Recorder.seen.clear()
    try:
        yield server.server_address[1]
    finally:
        server.shutdown()
        server.server_close()


def test_login_code_is_single_use_and_other_servers_get_nothing(
    team: Team, browser: Any, other_server: int
) -> None:
    url = team.start()
    page = login(browser, url)
    assert "#code=" not in page.url
    cookies = page.context.cookies()
    (session,) = [c for c in cookies if c["name"].startswith("baton_session_")]
    assert session["httpOnly"] and session["sameSite"] == "Strict"
    assert session["domain"].endswith(".localhost") and session["domain"].startswith("baton-")
    # Another local server, opened in the same browser, receives no usable cookie.
    for host in ("127.0.0.1", "localhost"):
        page.goto(f"http://{host}:{other_server}/")
        assert "another local server" in page.inner_text("body")
    assert _Recorder.seen and all("baton_session" not in s["cookie"] for s in _Recorder.seen)
    # The printed URL again (from history, or another person): the code is spent.
    replay = browser.new_context()
    other = replay.new_page()
    other.goto(url)
    other.locator("#login-status.error").wait_for()
    assert "not valid" in other.inner_text("#login-status")
    assert not [c for c in replay.cookies() if c["name"].startswith("baton_session_")]
    assert "#code=" not in other.url
    shoot(other, "login-desktop")
    goto(other, team.origin + "/")
    assert other.url.endswith("/login")
    replay.close()
    # The same login through 127.0.0.1 is moved to the project's own host name first.
    moved = browser.new_context().new_page()
    goto(moved, team.new_login_url().replace(team.origin.split("//")[1].split(":")[0], "127.0.0.1"))
    moved.wait_for_url(re.compile(r"baton-.*\.localhost:\d+/$"))


# Control and bidi characters never reach a subject (intake refuses them at every entry
# point, docs/intake.md); markup does, and must stay text.
HOSTILE_SUBJECT = 'Check <img src=x onerror="window.__xss=1"> exe.txt'
HOSTILE_BODY = """<script>window.__xss = 1</script>

[click me](javascript:window.__xss=1) <img src=x onerror="window.__xss=1">

```sh
echo '<script>window.__xss=1</script>' && printf '\\033[2J\\033]0;pwned\\007'
```
"""


def test_hostile_agent_text_stays_inert_on_every_view(team: Team, browser: Any) -> None:
    """Agent-controlled text (a task, its runbook output, its report) on the live board,
    the inbox cards, the task page and the run view: shown as text, never run."""
    url = team.start()
    page = login(browser, url)
    board = page.context.new_page()
    goto(board, team.origin + "/team")
    task_id = team.task("QA", HOSTILE_SUBJECT, HOSTILE_BODY)
    board.locator(f'#stages [data-task="{task_id}"] .subject').wait_for()
    subject = board.locator(f'#stages [data-task="{task_id}"] .subject').inner_text()
    assert "<img src=x" in subject
    _allow(page, 1)
    review = _card(page, "review")
    assert "<script>window.__xss=1</script>" in review.inner_text()
    pages = [page, board]
    for path in (f"/tasks/{task_id}", "/runs", "/decisions"):
        extra = page.context.new_page()
        goto(extra, team.origin + path)
        pages.append(extra)
    run = page.context.new_page()
    goto(run, team.origin + "/runs")
    run.locator("table.history a").first.click()
    run.locator('.lane[data-lane="QA"] details.tool').first.wait_for()
    run.locator('.lane[data-lane="QA"] .msg.assistant', has_text="step").first.wait_for()
    output = run.locator('.lane[data-lane="QA"] pre.output').first.text_content() or ""
    assert "<script>" in output and "␛[2J" in output
    pages.append(run)
    for p in pages:
        assert p.evaluate("window.__xss") is None, p.url
        assert p.locator("img").count() == 0, p.url
        assert p.locator('a[href^="javascript:"]').count() == 0, p.url


def test_cancel_a_role_turn_from_the_board_and_from_its_lane(team: Team, browser: Any) -> None:
    """Issue 14: a team run's turn is cancelled from the page; the task needs attention."""
    url = team.start()
    inbox = login(browser, url)
    board = inbox.context.new_page()
    goto(board, team.origin + "/team")
    qa = board.locator('#roles article[data-role="QA"]')
    qa.wait_for()
    assert qa.locator("button[data-action=cancel-turn]").count() == 0  # idle: nothing to cancel
    first = team.task("QA", "Smoke test", QA_TASK)
    permission = _card(inbox, "permission")  # QA's turn waits for the human
    qa.locator(".badge", has_text="waiting for you").wait_for()
    shoot(board, "team-cancel-desktop")
    qa.get_by_role("button", name="Cancel turn").click()
    # The daemon cancels the turn: its permission is withdrawn, the task needs attention
    # (not re-prompted), and the button is gone with the turn.
    request_id = permission.get_attribute("data-request-id")
    inbox.locator(f'article.done[data-request-id="{request_id}"]').wait_for()
    assert "cancel" in permission.locator(".status").inner_text()
    qa.locator(".badge", has_text="needs attention").wait_for()
    assert qa.locator("button[data-action=cancel-turn]").count() == 0
    board.locator(f'#stages [data-task="{first}"] .meta', has_text="needs_attention").wait_for()

    # The same from the run's lane, for the next task.
    second = team.task("QA", "Smoke test again", QA_TASK)
    _card(inbox, "permission")
    run = inbox.context.new_page()
    goto(run, team.origin + "/runs?kind=up")
    run.locator("table.history a").first.click()
    lane = run.locator('.lane[data-lane="QA"]')
    said = lane.locator("p.notice.turn", has_text="ADMIN cancelled the turn from the dashboard")
    lane.locator(".lane-title button.lane-cancel").wait_for()
    before = said.count()  # the first turn's notice, once the page has caught up
    lane.locator(".lane-title button.lane-cancel").click()
    said.nth(before).wait_for()
    board.locator(f'#stages [data-task="{second}"] .meta', has_text="needs_attention").wait_for()
    shoot(run, "run-cancelled-lane-desktop")
