"""The dashboard's threat model (docs/security.md) where only a real browser can show it.

A local server on another port plays the attacker of the first version: it knows the
project path, sends the browser to the dashboard's host name on its own port (cookies
ignore ports) and replays what it receives with forged ``Host`` and ``Origin``.
"""

from __future__ import annotations

import hashlib
import http.server
import json
import re
import threading
from collections.abc import Iterator
from typing import Any, ClassVar

import httpx
import pytest

from tests.web.browser.conftest import Team, baton, goto, login, shoot

pytestmark = pytest.mark.slow

ASKS = """Two steps that ask first.

```sh
echo "first step"
```

```sh
echo "second step"
```
"""


class _Thief(http.server.BaseHTTPRequestHandler):
    """Records the Cookie header of every request (what a cooperating server receives)."""

    seen: ClassVar[list[dict[str, str]]] = []

    def do_GET(self) -> None:
        _Thief.seen.append(
            {"host": self.headers.get("host", ""), "cookie": self.headers.get("cookie", "")}
        )
        self.send_response(200)
        self.send_header("content-type", "text/plain")
        self.end_headers()
        self.wfile.write(b"a dev server")

    def log_message(self, *args: Any) -> None:
        pass


@pytest.fixture
def thief() -> Iterator[int]:
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _Thief)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    _Thief.seen.clear()
    try:
        yield server.server_address[1]
    finally:
        server.shutdown()
        server.server_close()


def _pending_card(page: Any) -> Any:
    card = page.locator("#cards article.kind-permission:not(.done)").first
    card.wait_for()
    request_id = card.get_attribute("data-request-id")
    return page.locator(f'article[data-request-id="{request_id}"]'), request_id


def test_o3_o4_a_server_that_knows_the_path_gets_no_cookie_and_a_replay_opens_nothing(
    team: Team, browser: Any, thief: int
) -> None:
    url = team.start()
    page = login(browser, url)
    host = team.origin.split("//", 1)[1].rsplit(":", 1)[0]
    assert re.fullmatch(r"baton-proj-[a-z2-7]{13}\.localhost", host), host
    # O3: the first version's name, computable from the project path, and a guess with the
    # right prefix: the browser sends neither server the session cookie.
    digest = hashlib.sha256(str(team.root.resolve()).encode()).hexdigest()[:6]
    for guessed in (f"baton-proj-{digest}.localhost", "baton-proj-aaaaaaaaaaaaa.localhost"):
        page.goto(f"http://{guessed}:{thief}/")
        assert "a dev server" in page.inner_text("body")
    assert _Thief.seen and all("baton_session" not in s["cookie"] for s in _Thief.seen)

    # O4: a server that has the name anyway gets the cookie (cookies ignore ports) ...
    page.goto(f"http://{host}:{thief}/")
    stolen = _Thief.seen[-1]["cookie"]
    assert "baton_session_" in stolen
    # ... and replays it, with Host and Origin forged exactly, against a pending request.
    goto(page, team.origin + "/")
    team.task("QA", "Two asking steps", ASKS)
    card, request_id = _pending_card(page)
    forged = {"Cookie": stolen, "Host": f"{host}:{team.port}", "Origin": team.origin}
    with httpx.Client(base_url=f"http://127.0.0.1:{team.port}", timeout=30) as replay:
        answer = replay.post(
            f"/api/requests/{request_id}/answer",
            json={"kind": "permission", "decision": "allow"},
            headers=forged,
        )
        assert answer.status_code == 401, answer.text
        assert replay.get("/api/requests", headers=forged).status_code == 401
        shell = replay.get("/", headers=forged)
        assert "first step" not in shell.text and request_id not in shell.text
    # The request still waits; the browser (which holds the proof) answers it.
    assert "Allow once" in card.inner_text()
    card.get_by_role("button", name="Allow once").click()
    card.locator(".status", has_text="allowed once by a human").wait_for()


def test_r1_logout_all_ends_the_open_page(team: Team, browser: Any) -> None:
    url = team.start()
    page = login(browser, url)
    page.locator("#live-state.on").wait_for()
    run = page.context.new_page()
    team.task("QA", "Before the logout", ASKS)
    card, request_id = _pending_card(page)
    goto(run, team.origin + card.locator("a[href^='/runs/']").first.get_attribute("href"))
    run.locator("#stream-state", has_text="live").wait_for()

    out = baton(team.root, "serve", "--logout-all")
    assert "ended 1 browser session" in out
    # Both open streams end; each page says why and offers the way back.
    page.locator("#live-state a", has_text="log in again").wait_for()
    run.locator("#stream-state a", has_text="log in again").wait_for()
    shoot(page, "logged-out-desktop")

    # Work that arrives after the logout reaches a new login, never the ended page.
    card.get_by_role("button", name="Allow once").click()
    card.locator(".status.error").wait_for()  # the answer is refused too
    other = login(browser, team.new_login_url())
    fresh, _ = _pending_card(other)
    fresh.get_by_role("button", name="Allow once").click()
    fresh.locator(".status", has_text="allowed once").wait_for()
    _, second_id = _pending_card(other)
    assert second_id != request_id
    assert page.locator(f'article[data-request-id="{second_id}"]').count() == 0
    page.reload()
    page.wait_for_url(re.compile(r"/login$"))


def test_w6_o4_the_proof_stays_in_the_dashboards_origin(
    team: Team, browser: Any, thief: int
) -> None:
    url = team.start()
    page = login(browser, url)
    proof = page.evaluate("localStorage.getItem('baton-proof')")
    assert isinstance(proof, str) and len(proof) >= 43
    assert proof not in json.dumps(page.context.cookies())
    # The same host name on another port is another origin: its own, empty storage, and
    # nothing the browser sends there by itself carries the proof.
    host = team.origin.split("//", 1)[1].rsplit(":", 1)[0]
    page.goto(f"http://{host}:{thief}/")
    assert page.evaluate("localStorage.getItem('baton-proof')") is None
    assert all(proof not in s["cookie"] for s in _Thief.seen)
