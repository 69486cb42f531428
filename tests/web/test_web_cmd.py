"""``baton serve``: safe defaults, and the served app end to end through a real uvicorn."""

from __future__ import annotations

import asyncio
import json
import re
import socket
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import httpx
import pytest
import typer
import uvicorn
from typer.testing import CliRunner

from baton.cli import web_cmd
from baton.requests.ledger import Ledger
from baton.requests.states import State
from baton.store.store import Store
from baton.web.app import create_app
from baton.web.sessions import SessionAuth
from tests.web.webbuild import TOKEN, append, create, permission_doc


def _root() -> typer.Typer:
    """``web_cmd.app`` mounted the way ``baton.cli.app`` mounts sub-apps."""
    root = typer.Typer()

    @root.callback()
    def main() -> None:
        """baton"""

    root.registered_commands += web_cmd.app.registered_commands
    return root


@pytest.mark.parametrize("host", ["0.0.0.0", "192.168.1.5", "example.com", "::"])
def test_no_token_is_refused_off_loopback(host: str) -> None:
    result = CliRunner().invoke(_root(), ["serve", "--no-token", "--host", host])
    assert result.exit_code == 2
    assert "loopback" in result.output


def test_loopback_binds() -> None:
    for host in ("127.0.0.1", "127.1.2.3", "::1", "[::1]", "localhost"):
        assert web_cmd.is_loopback_bind(host), host
    for host in ("0.0.0.0", "::", "10.0.0.1", "localhost.example.com"):
        assert not web_cmd.is_loopback_bind(host), host


def test_serve_defaults_to_loopback_and_prints_a_one_time_login(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("BATON_STATE_DIR", str(tmp_path / "state"))
    monkeypatch.chdir(tmp_path)
    bound: list[tuple[str, int]] = []

    async def fake_serve(self: uvicorn.Server, sockets: Any = None) -> None:
        bound.append(sockets[0].getsockname()[:2])

    monkeypatch.setattr(uvicorn.Server, "serve", fake_serve)
    result = CliRunner().invoke(_root(), ["serve", "--port", "0"])
    assert result.exit_code == 0, result.output
    ((host, port),) = bound
    assert host == "127.0.0.1"
    match = re.search(
        rf"http://baton-[a-z0-9-]+\.localhost:{port}/login#code=([A-Z0-9]{{4}}-[A-Z0-9]{{4}}-[A-Z0-9]{{4}})",
        result.output,
    )
    assert match is not None, result.output
    assert "?token=" not in result.output  # no secret in a query string
    token = re.search(r"Bearer (\S+)", result.output)
    assert token is not None and len(token.group(1)) >= 40
    assert (tmp_path / "state" / "baton.db").exists()
    again = CliRunner().invoke(_root(), ["serve", "--port", "0"])
    assert match.group(1) not in again.output and token.group(1) not in again.output
    loop = CliRunner().invoke(_root(), ["serve", "--no-token", "--port", "0"])
    assert loop.exit_code == 0
    assert "code=" not in loop.output and "Bearer" not in loop.output
    fresh = CliRunner().invoke(_root(), ["serve", "--login-code"])
    assert re.search(r"login code: [A-Z0-9]{4}-[A-Z0-9]{4}-[A-Z0-9]{4}", fresh.output)
    out = CliRunner().invoke(_root(), ["serve", "--logout-all"])
    assert out.exit_code == 0 and "ended 0 browser session(s)" in out.output


@pytest.fixture
async def live_server(store: Store, ledger: Ledger) -> AsyncIterator[str]:
    """The app under a real uvicorn on a pre-bound port: no waiting for it to start."""
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.bind(("127.0.0.1", 0))
    sock.listen(16)
    port = sock.getsockname()[1]
    app = create_app(store, ledger, token=TOKEN, poll_interval=0.02)
    server = uvicorn.Server(uvicorn.Config(app, log_level="warning", lifespan="off"))
    task = asyncio.create_task(server.serve(sockets=[sock]))
    try:
        yield f"http://127.0.0.1:{port}"
    finally:
        server.should_exit = True
        await asyncio.wait_for(task, 30)
        sock.close()


async def test_over_real_http(live_server: str, store: Store, ledger: Ledger) -> None:
    record = await create(ledger, permission_doc("make deploy"))
    await append(store, range(1, 4))
    async with httpx.AsyncClient(base_url=live_server, follow_redirects=True) as browser:
        assert str((await browser.get("/")).url) == f"{live_server}/login"
        code = await SessionAuth(store).issue_code()
        login = await browser.post(
            "/api/login", json={"code": code}, headers={"Origin": live_server}
        )
        assert login.status_code == 200
        proof = {"X-Baton-Proof": login.json()["proof"]}
        shell = await browser.get("/")  # a navigation carries no proof: the empty shell
        assert shell.status_code == 200 and "make deploy" not in shell.text
        page = await browser.get("/", headers=proof)  # what the shell's script fetches
        assert page.status_code == 200
        assert str(page.url) == f"{live_server}/"
        assert "make deploy" in page.text
        answered = await browser.post(
            f"/api/requests/{record.request_id}/answer",
            json={"kind": "permission", "decision": "allow"},
            headers={"Origin": live_server} | proof,
        )
        assert answered.status_code == 200
        assert (await ledger.get(record.request_id)).state is State.ANSWERED
        ids: list[int] = []
        async with (
            asyncio.timeout(30),
            browser.stream(
                "GET", "/api/runs/run-1/stream", headers={"Last-Event-ID": "1"} | proof
            ) as stream,
        ):
            async for line in stream.aiter_lines():
                if line.startswith("id: "):
                    ids.append(int(line[4:]))
                if line.startswith("data: ") and ids and ids[-1] == 3:
                    assert json.loads(line[6:])["seq"] == 3
                    break
        assert ids == [2, 3]


async def test_the_dashboard_leaves_the_callers_signal_handlers_alone(
    store: Store, ledger: Ledger, tmp_path: Path
) -> None:
    """``baton up --serve`` owns Ctrl-C: serving must not swap its SIGINT/SIGTERM handlers."""
    import signal

    from baton.web.server import DashboardServer

    before = {sig: signal.getsignal(sig) for sig in (signal.SIGINT, signal.SIGTERM)}
    server = DashboardServer(store=store, ledger=ledger, port=0, project_dir=tmp_path)
    await server.start()
    try:
        async with httpx.AsyncClient() as client:
            for _ in range(200):  # serving: it answers
                try:
                    await client.get(f"http://127.0.0.1:{server.port}/healthz")
                    break
                except httpx.TransportError:
                    await asyncio.sleep(0.02)
        during = {sig: signal.getsignal(sig) for sig in before}
    finally:
        await server.stop()
    assert during == before
