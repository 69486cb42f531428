"""Host, origin, token and session rules (see ``baton.web.auth`` and ``baton.web.sessions``)."""

from __future__ import annotations

from collections.abc import AsyncIterator

import httpx
import pytest
from starlette.applications import Starlette

from baton.requests.ledger import Ledger
from baton.store.store import Store
from baton.store.web_sessions import revoke_all
from baton.web.app import create_app
from baton.web.auth import COOKIE_PREFIX, is_loopback_host, tokens_match
from baton.web.sessions import CODE_TTL_S, SessionAuth, normalize_code
from tests.web.conftest import BASE_URL
from tests.web.webbuild import TOKEN, create, permission_doc

LOGIN_HOST = "baton-proj-abc123.localhost"
LOGIN_URL = f"http://{LOGIN_HOST}:8765"
COOKIE = f"{COOKIE_PREFIX}_8765"
ALLOW = {"kind": "permission", "decision": "allow"}


def _app(store: Store, ledger: Ledger, token: str | None = TOKEN) -> Starlette:
    return create_app(store, ledger, token=token, login_host=LOGIN_HOST, poll_interval=0.02)


def _client(app: Starlette, base_url: str = LOGIN_URL) -> httpx.AsyncClient:
    return httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url=base_url)


@pytest.fixture
async def anonymous(store: Store, ledger: Ledger) -> AsyncIterator[httpx.AsyncClient]:
    """A browser-like client on the login host (it keeps the cookies it is given)."""
    async with _client(_app(store, ledger)) as client:
        yield client


async def _login(client: httpx.AsyncClient, store: Store) -> str:
    code = await SessionAuth(store).issue_code()
    response = await client.post("/api/login", json={"code": code}, headers={"Origin": LOGIN_URL})
    assert response.status_code == 200, response.text
    return code


@pytest.mark.parametrize("path", ["/api/runs", "/api/requests", "/api/runs/run-1/stream"])
async def test_api_without_credentials_is_401(anonymous: httpx.AsyncClient, path: str) -> None:
    response = await anonymous.get(path)
    assert response.status_code == 401
    assert response.headers["www-authenticate"].startswith("Bearer")


@pytest.mark.parametrize("path", ["/", "/team", "/runs/run-1"])
async def test_pages_without_a_session_go_to_login(anonymous: httpx.AsyncClient, path: str) -> None:
    response = await anonymous.get(path)
    assert response.status_code == 303
    assert response.headers["location"] == "/login"
    login = await anonymous.get("/login")
    assert login.status_code == 200
    assert "login code" in login.text.lower()


async def test_bearer_token(anonymous: httpx.AsyncClient) -> None:
    wrong = await anonymous.get("/api/runs", headers={"Authorization": "Bearer nope"})
    assert wrong.status_code == 401
    basic = await anonymous.get("/api/runs", headers={"Authorization": f"Basic {TOKEN}"})
    assert basic.status_code == 401
    right = await anonymous.get("/api/runs", headers={"Authorization": f"Bearer {TOKEN}"})
    assert right.status_code == 200


async def test_a_code_opens_one_session_whose_cookie_is_not_the_token(
    anonymous: httpx.AsyncClient, store: Store, ledger: Ledger
) -> None:
    code = await SessionAuth(store).issue_code()
    response = await anonymous.post(
        "/api/login", json={"code": code.lower()}, headers={"Origin": LOGIN_URL}
    )
    assert response.status_code == 200, response.text
    cookie = response.headers["set-cookie"]
    assert cookie.startswith(f"{COOKIE}=")
    assert TOKEN not in cookie
    assert "HttpOnly" in cookie and "samesite=strict" in cookie.lower()
    assert (await anonymous.get("/")).status_code == 200
    assert (await anonymous.get("/api/requests")).status_code == 200
    record = await create(ledger, permission_doc())
    url = f"/api/requests/{record.request_id}/answer"
    cross = await anonymous.post(url, json=ALLOW, headers={"Origin": "http://127.0.0.1:5173"})
    assert cross.status_code == 403
    same = await anonymous.post(url, json=ALLOW, headers={"Origin": LOGIN_URL})
    assert same.status_code == 200
    # Replaying the used code fails, from this client or any other.
    again = await anonymous.post("/api/login", json={"code": code}, headers={"Origin": LOGIN_URL})
    assert again.status_code == 401
    assert again.json()["error"] == "InvalidLogin"


async def test_codes_expire_and_garbage_is_refused(store: Store, ledger: Ledger) -> None:
    now = [1_000_000.0]
    auth = SessionAuth(store, clock=lambda: now[0])
    code = await auth.issue_code()
    now[0] += CODE_TTL_S + 1
    assert await auth.exchange(code, origin=LOGIN_URL) is None
    assert await auth.exchange("not a code", origin=LOGIN_URL) is None
    assert normalize_code("abcd-efgh-jkmn") == "ABCDEFGHJKMN"
    assert normalize_code("ABCD-EFGH-JKM0") is None  # 0 is not in the alphabet


async def test_the_token_as_a_cookie_is_no_credential(anonymous: httpx.AsyncClient) -> None:
    for name in (COOKIE, "baton_token_8765"):
        response = await anonymous.get("/api/runs", headers={"Cookie": f"{name}={TOKEN}"})
        assert response.status_code == 401


async def test_a_session_only_works_on_the_origin_it_was_opened_on(
    anonymous: httpx.AsyncClient, store: Store, ledger: Ledger
) -> None:
    await _login(anonymous, store)
    secret = anonymous.cookies[COOKIE]
    app = _app(store, ledger)
    # What another local server would have to replay it with: another host or port.
    for base in ("http://127.0.0.1:8765", "http://localhost:8765", f"http://{LOGIN_HOST}:5173"):
        async with _client(app, base) as other:
            stolen = await other.get("/api/runs", headers={"Cookie": f"{COOKIE}={secret}"})
            assert stolen.status_code == 401, base


async def test_login_is_refused_on_a_shared_host_name(store: Store, ledger: Ledger) -> None:
    async with _client(_app(store, ledger), BASE_URL) as client:
        code = await SessionAuth(store).issue_code()
        response = await client.post(
            "/api/login", json={"code": code}, headers={"Origin": BASE_URL}
        )
        assert response.status_code == 403
        assert LOGIN_HOST in response.json()["message"]
        # The code was not spent by the refused attempt.
        assert await SessionAuth(store).exchange(code, origin=LOGIN_URL) is not None


async def test_sessions_survive_a_restart_and_are_revocable(
    anonymous: httpx.AsyncClient, store: Store, ledger: Ledger
) -> None:
    await _login(anonymous, store)
    secret = anonymous.cookies[COOKIE]
    async with _client(
        create_app(store, ledger, token="another-token-after-restart", login_host=LOGIN_HOST)
    ) as restarted:
        restarted.cookies.set(COOKIE, secret)
        assert (await restarted.get("/api/requests")).status_code == 200
        assert await revoke_all(store) == 1
    async with _client(_app(store, ledger)) as fresh:
        fresh.cookies.set(COOKIE, secret)
        assert (await fresh.get("/api/requests")).status_code == 401


@pytest.mark.parametrize("token", [TOKEN, None])
async def test_origin_is_checked_on_every_write_in_every_mode(
    store: Store, ledger: Ledger, token: str | None
) -> None:
    record = await create(ledger, permission_doc())
    url = f"/api/requests/{record.request_id}/answer"
    headers = {"Authorization": f"Bearer {TOKEN}"} if token else {}
    async with _client(_app(store, ledger, token), BASE_URL) as client:
        for origin in ("http://127.0.0.1:5173", "null", "https://evil.example"):
            response = await client.post(url, json=ALLOW, headers=headers | {"Origin": origin})
            assert response.status_code == 403, origin
        site = await client.post(
            url, json=ALLOW, headers=headers | {"Sec-Fetch-Site": "cross-site"}
        )
        assert site.status_code == 403
        ok = await client.post(url, json=ALLOW, headers=headers | {"Origin": BASE_URL})
        assert ok.status_code == 200


@pytest.mark.parametrize(
    ("host", "status"),
    [
        ("127.0.0.1:8765", 200),
        ("localhost:8765", 200),
        ("[::1]:8765", 200),
        (f"{LOGIN_HOST}:8765", 200),
        ("evil.example", 403),
        ("evil.example:8765", 403),
        ("192.168.1.5:8765", 403),
        ("x.localhost:8765", 403),
    ],
)
@pytest.mark.parametrize("token", [TOKEN, None])
async def test_host_is_checked_in_every_mode(
    store: Store, ledger: Ledger, host: str, status: int, token: str | None
) -> None:
    headers = {"Host": host} | ({"Authorization": f"Bearer {token}"} if token else {})
    async with _client(_app(store, ledger, token), BASE_URL) as client:
        response = await client.get("/api/runs", headers=headers)
    assert response.status_code == status


async def test_assets_are_public(anonymous: httpx.AsyncClient) -> None:
    script = await anonymous.get("/assets/dashboard.js")
    assert script.status_code == 200
    assert script.headers["content-type"].startswith("text/javascript")
    assert "innerHTML" not in script.text and "outerHTML" not in script.text
    assert "insertAdjacentHTML" not in script.text and "document.write" not in script.text
    assert (await anonymous.get("/assets/dashboard.css")).status_code == 200


def test_helpers() -> None:
    assert tokens_match(TOKEN, TOKEN)
    assert not tokens_match(None, TOKEN)
    assert not tokens_match(TOKEN + "x", TOKEN)
    assert not tokens_match("é", TOKEN)  # non-ASCII input does not raise
    assert is_loopback_host("LOCALHOST.")
    assert not is_loopback_host("localhost.evil.example")
    assert not is_loopback_host("")


@pytest.mark.parametrize("cookie", [f'{COOKIE}="abc', "\x00;;==", f"{COOKIE}=" + "x" * 500])
async def test_bad_cookies_are_no_credential(anonymous: httpx.AsyncClient, cookie: str) -> None:
    response = await anonymous.get("/api/runs", headers={"Cookie": cookie})
    assert response.status_code == 401
