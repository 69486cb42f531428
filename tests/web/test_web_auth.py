"""Token, cookie and loopback rules (see ``baton.web.auth``)."""

from __future__ import annotations

from collections.abc import AsyncIterator

import httpx
import pytest
from starlette.applications import Starlette

from baton.requests.ledger import Ledger
from baton.store.store import Store
from baton.web.app import create_app
from baton.web.auth import COOKIE_NAME, is_loopback_host, tokens_match
from tests.web.conftest import BASE_URL
from tests.web.webbuild import TOKEN, create, permission_doc


@pytest.fixture
async def anonymous(app: Starlette) -> AsyncIterator[httpx.AsyncClient]:
    """A client without credentials (it keeps cookies the server sets)."""
    async with httpx.AsyncClient(
        transport=httpx.ASGITransport(app=app), base_url=BASE_URL
    ) as client:
        yield client


@pytest.mark.parametrize("path", ["/api/runs", "/api/requests", "/api/runs/run-1/stream", "/"])
async def test_no_credentials_401(anonymous: httpx.AsyncClient, path: str) -> None:
    response = await anonymous.get(path)
    assert response.status_code == 401
    assert response.headers["www-authenticate"].startswith("Bearer")


async def test_bearer_token(anonymous: httpx.AsyncClient) -> None:
    wrong = await anonymous.get("/api/runs", headers={"Authorization": "Bearer nope"})
    assert wrong.status_code == 401
    assert wrong.json()["error"] == "Unauthorized"
    basic = await anonymous.get("/api/runs", headers={"Authorization": f"Basic {TOKEN}"})
    assert basic.status_code == 401
    right = await anonymous.get("/api/runs", headers={"Authorization": f"Bearer {TOKEN}"})
    assert right.status_code == 200


async def test_query_token_sets_a_strict_httponly_cookie(
    anonymous: httpx.AsyncClient, ledger: Ledger
) -> None:
    assert (await anonymous.get("/?token=wrong")).status_code == 401
    assert (await anonymous.get(f"/api/runs?token={TOKEN}")).status_code == 401  # not for the API
    login = await anonymous.get(f"/?token={TOKEN}")
    assert login.status_code == 303
    assert login.headers["location"] == "/"  # the token leaves the address bar
    cookie = login.headers["set-cookie"]
    assert cookie.startswith(f"{COOKIE_NAME}_8765={TOKEN};")  # per port
    assert "HttpOnly" in cookie
    assert "SameSite=strict" in cookie or "SameSite=Strict" in cookie
    assert (await anonymous.get("/")).status_code == 200
    assert (await anonymous.get("/api/requests")).status_code == 200
    # The cookie also answers, from the same origin only.
    record = await create(ledger, permission_doc())
    url = f"/api/requests/{record.request_id}/answer"
    allow = {"kind": "permission", "decision": "allow"}
    cross = await anonymous.post(url, json=allow, headers={"Origin": "https://evil.example"})
    assert cross.status_code == 403
    same = await anonymous.post(url, json=allow, headers={"Origin": BASE_URL})
    assert same.status_code == 200


async def test_login_redirect_keeps_the_path_and_other_query(anonymous: httpx.AsyncClient) -> None:
    login = await anonymous.get(f"{BASE_URL}//evil.example/x?token={TOKEN}&a=1")
    assert login.status_code == 303
    # One leading slash: "//evil.example" would send the browser to another site.
    assert login.headers["location"] == "/evil.example/x?a=1"


async def test_assets_are_public(anonymous: httpx.AsyncClient) -> None:
    script = await anonymous.get("/assets/dashboard.js")
    assert script.status_code == 200
    assert script.headers["content-type"].startswith("text/javascript")
    assert "innerHTML" not in script.text
    assert (await anonymous.get("/assets/dashboard.css")).status_code == 200


@pytest.mark.parametrize(
    ("host", "status"),
    [
        ("127.0.0.1:8765", 200),
        ("localhost:8765", 200),
        ("[::1]:8765", 200),
        ("127.0.0.2", 200),
        ("evil.example", 403),
        ("evil.example:8765", 403),
        ("192.168.1.5:8765", 403),
    ],
)
async def test_without_token_only_loopback_hosts(
    store: Store, ledger: Ledger, host: str, status: int
) -> None:
    app = create_app(store, ledger, token=None)
    async with httpx.AsyncClient(
        transport=httpx.ASGITransport(app=app), base_url=BASE_URL
    ) as client:
        response = await client.get("/api/runs", headers={"Host": host})
    assert response.status_code == status


def test_helpers() -> None:
    assert tokens_match(TOKEN, TOKEN)
    assert not tokens_match(None, TOKEN)
    assert not tokens_match(TOKEN + "x", TOKEN)
    assert not tokens_match("é", TOKEN)  # non-ASCII input does not raise
    assert is_loopback_host("LOCALHOST.")
    assert not is_loopback_host("localhost.evil.example")
    assert not is_loopback_host("")


@pytest.mark.parametrize(
    "cookie",
    [
        f"baton_token_9999={TOKEN}",  # another server's login
        f"{COOKIE_NAME}_8765=wrong",
        f'{COOKIE_NAME}_8765="{TOKEN}',  # malformed
        "\x00;;==",
    ],
)
async def test_bad_cookies_are_no_credential(anonymous: httpx.AsyncClient, cookie: str) -> None:
    response = await anonymous.get("/api/runs", headers={"Cookie": cookie})
    assert response.status_code == 401
