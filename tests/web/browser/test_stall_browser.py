"""A stalled turn in a real browser (issue 12 item 4): a ``baton run`` whose agent says
nothing, beside ``baton up --serve``. The run page shows the stall live (a lane notice
and the header's status) and clears it when the agent speaks again; the runs list says
"stalled" while it lasts. Waits are on the NDJSON stream and page conditions only."""

from __future__ import annotations

import json
import re
import signal
import subprocess
import sys
from typing import Any

from tests.support.project import project_env
from tests.web.browser.conftest import Team, goto, login, playwright_api, shoot

RUN = (sys.executable, "-m", "baton", "run")


def test_the_run_page_shows_a_stall_and_clears_it_when_the_agent_speaks(
    team: Team, browser: Any
) -> None:
    with (team.root / "baton.toml").open("a") as toml:
        toml.write(
            "\n[profiles.silent]\n"
            f'command = ["{sys.executable}", "-m", "baton.testing.fake_agent", "--scenario", '
            '"silent"]\n'
        )
    page = login(browser, team.start())
    run = subprocess.Popen(
        [*RUN, "--agent", "silent", "--stall-timeout", "0.2", "--timeout", "300", "--json", "go"],
        cwd=team.root,
        env=project_env(team.root),
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        assert run.stdout is not None
        run_id = ""
        for line in run.stdout:  # bounded by the turn timeout
            event = json.loads(line)
            run_id = event["run_id"]
            if event["type"] == "turn.stalled":
                break
        goto(page, team.origin + "/runs")
        row = page.locator("table.history td", has_text="stalled: the agent has said nothing")
        # The runs list is rendered once per load, and stdout can show the stall before its
        # commit lands (under load): load again until the stored run says it, bounded.
        for _ in range(120):
            if row.count():
                break
            page.wait_for_timeout(250)
            page.reload()
        row.wait_for()
        goto(page, team.origin + "/runs/" + run_id)
        stall = page.locator("p.notice.stall")
        stall.wait_for()
        assert "⏳ the agent has said nothing for" in stall.inner_text()
        assert "turn timeout in" in stall.inner_text()
        assert page.locator("#run-status").inner_text().startswith("stalled:")
        shoot(page, "run-stalled")
        run.send_signal(signal.SIGINT)  # session/cancel: the silent agent speaks once
        page.locator("p.notice.turn.resumed", has_text="the agent spoke again").wait_for()
        page.locator("p.notice.stall.cleared").wait_for()
        # (an expectation, not wait_for_function: its polling evals a string, which the
        # dashboard's CSP refuses)
        playwright_api.expect(page.locator("#run-status")).not_to_have_text(re.compile(r"^stalled"))
        shoot(page, "run-resumed")
        run.communicate(timeout=120)
        assert run.returncode == 130
    finally:
        if run.poll() is None:
            run.kill()
            run.communicate()
