"""The pages tell the truth: live cards converge to the server, plans show what failed,
reviews and the board read by subject (Chromium against a real ``baton up --serve``)."""

from __future__ import annotations

import json
import os
import re
import shutil
import time
from pathlib import Path
from typing import Any

import pytest

from tests.web.browser.conftest import ARTIFACTS, Team, baton, goto, login, playwright_api, shoot

pytestmark = pytest.mark.slow

ASKS = """Two steps that ask first.

```sh
echo "first step"
```

```sh
echo "second step"
```
"""

RELEASE = """Release check for the project.

- [ ] @QA Run the smoke tests
  ```sh
  python3 --version
  echo "running smoke tests"
  test -f baton.toml && echo "config present"
  ```
- [ ] @OPS Check the build environment
  ```sh
  uname -s
  git --version
  ```
"""


def _card(page: Any, kind: str, timeout: float = 60_000) -> Any:
    """The next pending card of ``kind``, located by its id (it moves once decided)."""
    card = page.locator(f"#cards article.kind-{kind}:not(.done)").first
    card.wait_for(timeout=timeout)
    return page.locator(f'article[data-request-id="{card.get_attribute("data-request-id")}"]')


def _pending(team: Team) -> list[dict[str, Any]]:
    out = baton(team.root, "inbox", "--json")
    return [json.loads(line) for line in out.splitlines() if line.strip()]


def _wait_pending(team: Team, kind: str, deadline_s: float = 120) -> dict[str, Any]:
    """The first pending request of ``kind``, read with ``baton inbox`` (no page open)."""
    end = time.monotonic() + deadline_s
    while time.monotonic() < end:
        for request in _pending(team):
            if request["kind"] == kind:
                return request
        time.sleep(0.5)
    raise AssertionError(f"no pending {kind} request within {deadline_s}s")


def test_a_page_opened_after_a_quiet_spell_shows_pending_cards_and_converges(
    team: Team, browser: Any
) -> None:
    url = team.start()
    first = login(browser, url)
    goto(first, team.origin + "/team")
    first.locator('#roles article[data-role="QA"]').wait_for()
    first.context.close()  # the hub's last state has no request; then a quiet spell
    team.task("QA", "Asks while nobody looks", ASKS)
    request = _wait_pending(team, "permission")

    leader = login(browser, team.new_login_url())  # the tab that streams
    goto(leader, team.origin + "/team")
    leader.locator("#live-state.on").wait_for()
    page = leader.context.new_page()  # a second tab: it hears the leader's rebroadcast
    goto(page, team.origin + "/")
    card = page.locator(f'article[data-request-id="{request["request_id"]}"]')
    card.get_by_role("button", name="Allow once").wait_for()
    # The first live message this page applies is newer than its own HTML ...
    rendered = page.locator("#requests").get_attribute("data-as-of") or ""
    playwright_api.expect(page.locator("#requests")).not_to_have_attribute(
        "data-as-of", rendered, timeout=60_000
    )
    assert float(page.locator("#requests").get_attribute("data-as-of") or 0) > float(rendered)
    # ... and still has the request pending (the bug: a stale first message settled it).
    assert "done" not in (card.get_attribute("class") or "")
    assert card.get_by_role("button", name="Allow once").is_visible()

    # A stale state on the channel: older than what the page shows, it is ignored.
    stale = {"pending": [], "settled": []}

    def rebroadcast(as_of: float) -> None:
        data = json.dumps({"as_of": as_of, **stale})
        leader.evaluate(
            "data => new BroadcastChannel('baton-live')"
            ".postMessage({type: 'event', topic: 'inbox', data})",
            data,
        )

    rebroadcast(1.0)
    page.wait_for_timeout(300)  # nothing to wait for: an ignored message changes nothing
    assert card.get_by_role("button", name="Allow once").is_visible()
    # A state that looks newer but says the request is over: the card asks the server,
    # which says it is pending, and comes back with its controls (it converges).
    shown = float(page.locator("#requests").get_attribute("data-as-of") or 0)
    rebroadcast(shown + 1e-6)
    back = page.locator(f'#cards article[data-request-id="{request["request_id"]}"]:not(.done)')
    back.get_by_role("button", name="Allow once").wait_for()
    back.get_by_role("button", name="Allow once").click()
    card = page.locator(f'article[data-request-id="{request["request_id"]}"]')
    card.locator(".status", has_text="allowed once").wait_for()


def test_the_plan_shows_a_denied_step_as_failed(team: Team, browser: Any) -> None:
    url = team.start()
    page = login(browser, url)
    team.task("QA", "One allowed, one denied", ASKS)
    first = _card(page, "permission")
    first.get_by_role("button", name="Allow once").click()
    first.locator(".status", has_text="allowed once").wait_for()
    second = _card(page, "permission")
    run_href = second.locator("a[href^='/runs/']").first.get_attribute("href")
    second.get_by_role("button", name="Deny").click()
    second.locator(".status", has_text="denied").wait_for()

    goto(page, team.origin + run_href)
    plan = page.locator('.plan[data-plan-role="QA"]')
    plan.locator("li.step-failed").first.wait_for()
    failed = plan.locator("li.step-failed").first.inner_text()
    assert "second step" in failed and "✘" in failed and "☑" not in failed
    assert plan.locator("li.step-completed", has_text="first step").count() == 1
    assert "☑" in plan.locator("li.step-completed", has_text="first step").inner_text()
    # The tool card and the plan agree.
    tool = page.locator('.lane[data-lane="QA"] details.tool.status-failed').first
    assert "second step" in tool.inner_text()


def _shots_dir() -> Path | None:
    where = os.environ.get("BATON_SHOTS_DIR")
    return Path(where) if where else None


def _keep(page: Any, name: str) -> None:
    # From the top: a full-page shot of a page scrolled to its end draws the sticky header
    # in the middle (the run view follows the end of the page).
    page.evaluate("window.scrollTo(0, 0)")
    page.wait_for_timeout(200)  # one frame for the scroll to land; nothing to wait on
    path = shoot(page, name)
    target = _shots_dir()
    if target is not None:
        target.mkdir(parents=True, exist_ok=True)
        shutil.copy(path, target / path.name)


def test_review_board_and_run_read_by_subject_at_both_widths(team: Team, browser: Any) -> None:
    url = team.start()
    desktop = login(browser, url)
    phone = login(browser, team.new_login_url(), width=390, height=844)
    task_id = team.task("PM", "Release check", RELEASE)
    # QA asks before each command (the fixture's team): allow its one step.
    ask = _card(desktop, "permission", timeout=120_000)
    assert "running smoke tests" in ask.locator("header h3").inner_text()  # titled by what it does
    ask.get_by_role("button", name="Allow once").click()
    ask.locator(".status", has_text="allowed once").wait_for()

    review = _card(desktop, "review", timeout=180_000)
    # Titled by its subject, the report rendered as Markdown (a table, not raw pipes).
    assert review.locator("header h3").inner_text() == "Review: Release check"
    assert review.locator(".review-report .markdown table, .review-report .markdown p").count()
    assert "| " not in review.locator(".review-report").inner_text()
    assert "required to send back" in review.locator("label.reason").inner_text()
    _keep(desktop, "review-1280")
    goto(phone, team.origin + "/")
    phone.locator("#cards article.kind-review").first.wait_for()
    _keep(phone, "review-390")

    goto(desktop, team.origin + "/team")
    board = desktop.locator(f'#stages [data-task="{task_id}"]')
    board.wait_for()
    assert board.locator(".subject").inner_text() == "Release check"
    child = desktop.locator('#stages [data-stage="done"] .task').first
    child.wait_for()
    assert "part of" in child.inner_text() and "Release check" in child.inner_text()
    _keep(desktop, "board-1280")
    goto(phone, team.origin + "/team")
    phone.locator(f'#stages [data-task="{task_id}"]').wait_for()
    _keep(phone, "board-390")

    goto(desktop, team.origin + "/runs")
    row = desktop.locator("table.history tbody tr").first
    assert re.search(r"PM: Release check", row.inner_text()), row.inner_text()
    row.locator("a").first.click()
    desktop.locator('.plan[data-plan-role="QA"]').wait_for()
    desktop.locator('.plan[data-plan-role="PM"]').wait_for()
    prompt = desktop.locator('.lane[data-lane="QA"] details.role-context').first
    assert prompt.locator("summary").inner_text().startswith("prompt QA:")
    assert not prompt.get_attribute("open")
    # The QA step is titled by what it does, not by its first line.
    steps = desktop.locator('.plan[data-plan-role="QA"] li').all_inner_texts()
    assert any("running smoke tests" in s or "test -f" in s for s in steps), steps
    _keep(desktop, "run-1280")
    goto(phone, desktop.url)
    phone.locator('.plan[data-plan-role="QA"]').wait_for()
    _keep(phone, "run-390")
    assert (ARTIFACTS / "run-390.png").exists()
