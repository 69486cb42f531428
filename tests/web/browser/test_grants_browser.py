"""Grants in a real browser: "Allow and grant" on a permission card, the grant answering the
same command prefix later (never a compound line), the Grants page and its Revoke button."""

from __future__ import annotations

import json
import sys
from typing import Any

import pytest

from tests.web.browser.conftest import Team, login, shoot
from tests.web.browser.test_browser import _card

pytestmark = pytest.mark.slow

STEPS = """Echo three times.

```sh
echo "first"
```

```sh
echo "second"
```

```sh
echo "third" && touch pwned.txt
```
"""


NOTIFY = (
    "import json, sys\n"
    "data = json.load(sys.stdin)\n"
    "open(sys.argv[1], 'a').write(json.dumps([data['id'], data['kind'], data['title']]) + '\\n')\n"
)


def test_allow_and_grant_then_revoke(team: Team, browser: Any) -> None:
    log = team.root.parent / "notices.ndjson"
    argv = json.dumps([sys.executable, "-c", NOTIFY, str(log)])
    config = team.root / "baton.toml"
    config.write_text(config.read_text() + f"\n[notify]\ncommand = {argv}\n")
    url = team.start()
    inbox = login(browser, url)
    team.task("QA", "Echoes", STEPS)

    card = _card(inbox, "permission")
    assert 'echo "first"' in card.locator("pre.command").inner_text()
    subject = card.locator('input[data-grant="subject"]')
    assert subject.input_value() == "echo first", "the narrow default: program and first word"
    assert card.locator('select[data-grant="scope"]').input_value() == "task"
    subject.fill("echo")
    card.locator('input[data-grant="uses"]').fill("3")
    shoot(inbox, "inbox-permission-grant-desktop")
    card.get_by_role("button", name="Allow and grant").click()
    card.locator(".status", has_text="granted for this task").wait_for()

    # The second echo is answered by the grant; the compound line asks, and is denied.
    pending = inbox.locator("#cards article.kind-permission:not(.done)", has_text="pwned.txt")
    pending.wait_for()
    third = inbox.locator(f'article[data-request-id="{pending.get_attribute("data-request-id")}"]')
    assert third.locator('input[data-grant="subject"]').count() == 0, "no grant for a && line"
    third.get_by_role("button", name="Deny").click()
    third.locator(".status", has_text="denied").wait_for()
    assert not (team.root / "pwned.txt").exists()

    grants = inbox.context.new_page()
    grants.goto(team.origin + "/grants")
    row = grants.locator("table.grants tbody tr").first
    row.wait_for()
    cells = row.inner_text()
    assert "execute" in cells and "echo" in cells and "active" in cells
    assert "1 used, 2 left" in cells, cells
    shoot(grants, "grants-desktop")
    row.get_by_role("button", name="Revoke").click()
    row.locator(".status", has_text="revoked").wait_for()
    grants.reload()
    assert "revoked" in grants.locator("table.grants tbody tr").first.inner_text()
    decisions = inbox.context.new_page()
    decisions.goto(team.origin + "/decisions?decided_by=policy")
    decisions.locator("table.history tbody tr").first.wait_for()
    assert "by your grant grant-" in decisions.locator("table.history").inner_text()
    # baton up ran [notify] for each permission that waited for a human, once each: not for
    # the one the grant answered.
    notices = [json.loads(line) for line in log.read_text().splitlines()]
    titles = [title for _, kind, title in notices if kind == "permission"]
    assert len(titles) == 2 and len({rid for rid, _, _ in notices}) == len(notices), notices
    assert "first" in titles[0] and "pwned.txt" in titles[1]
