"""The notification hook fires only on escalation; failures become diagnostics."""

from __future__ import annotations

import http.server
import json
import sys
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import ClassVar

import pytest

from baton.errors import ConfigError
from baton.requests.ledger import Ledger, RequestRecord
from baton.requests.notify import NotifyConfig, notify, notify_if_escalated
from baton.requests.policy import Policy
from tests.requests.reqbuild import META, permission

WRITE_STDIN = "import sys, pathlib; pathlib.Path(sys.argv[1]).write_bytes(sys.stdin.buffer.read())"


@pytest.fixture
async def record(ledger: Ledger) -> RequestRecord:
    return await ledger.create(permission("execute"), jsonrpc_id=1, **META)


class _Hook(http.server.BaseHTTPRequestHandler):
    bodies: ClassVar[list[bytes]] = []
    status = 204

    def do_POST(self) -> None:
        self.bodies.append(self.rfile.read(int(self.headers["Content-Length"])))
        self.send_response(self.status)
        self.end_headers()

    def log_message(self, *args: object) -> None:
        pass


@pytest.fixture
def webhook() -> Iterator[tuple[str, type[_Hook]]]:
    handler = type("Hook", (_Hook,), {"bodies": [], "status": 204})
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}/hook", handler
    finally:
        server.shutdown()
        server.server_close()
        thread.join()


async def test_command_gets_the_request_json_on_stdin(
    record: RequestRecord, tmp_path: Path
) -> None:
    out = tmp_path / "got.json"
    config = NotifyConfig(command=(sys.executable, "-c", WRITE_STDIN, str(out)))
    assert await notify(record, config) == []
    data = json.loads(out.read_text(encoding="utf-8"))
    assert data["request_id"] == record.request_id and data["kind"] == "permission"
    assert data["document"]["tool_call"]["command"] == "rm -rf build"


async def test_only_escalations_notify(record: RequestRecord, tmp_path: Path) -> None:
    out = tmp_path / "got.json"
    config = NotifyConfig(command=(sys.executable, "-c", WRITE_STDIN, str(out)))
    ws = tmp_path
    auto = Policy().decision_for(
        permission("read", command=None), workspace=ws, human_available=True
    )
    denied = Policy.preset("none").decision_for(
        permission("execute"), workspace=ws, human_available=True
    )
    for decision in (auto, denied):
        assert await notify_if_escalated(decision, record, config) == []
        assert not out.exists()
    escalated = Policy().decision_for(permission("execute"), workspace=ws, human_available=True)
    assert await notify_if_escalated(escalated, record, config) == []
    assert out.exists()


async def test_command_failures_become_diagnostics(record: RequestRecord) -> None:
    failing = NotifyConfig(
        command=(sys.executable, "-c", "import sys; sys.stderr.write('boom'); sys.exit(3)")
    )
    (diag,) = await notify(record, failing)
    assert diag.category == "notification" and diag.exit_code == 3 and diag.stderr_preview == "boom"
    missing = NotifyConfig(command=("/nonexistent/notify-me",))
    (diag,) = await notify(record, missing)
    assert "could not start" in diag.summary
    slow = NotifyConfig(command=(sys.executable, "-c", "import time; time.sleep(60)"), timeout=0.3)
    (diag,) = await notify(record, slow)
    assert "timed out" in diag.summary


async def test_webhook_posts_the_request(
    record: RequestRecord, webhook: tuple[str, type[_Hook]]
) -> None:
    url, handler = webhook
    assert await notify(record, NotifyConfig(webhook=url)) == []
    (body,) = handler.bodies
    assert json.loads(body)["request_id"] == record.request_id
    handler.status = 500
    (diag,) = await notify(record, NotifyConfig(webhook=url))
    assert "HTTP 500" in diag.summary
    handler.status = 302
    (diag,) = await notify(record, NotifyConfig(webhook=url))
    assert "HTTP 302" in diag.summary  # redirects are not followed


async def test_unreachable_webhook_is_a_diagnostic(record: RequestRecord) -> None:
    (diag,) = await notify(record, NotifyConfig(webhook="http://127.0.0.1:9/none", timeout=2))
    assert "webhook failed" in diag.summary


async def test_desktop_without_notify_send(
    record: RequestRecord, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr("shutil.which", lambda name: None)
    (diag,) = await notify(record, NotifyConfig(desktop=True))
    assert "notify-send not found" in diag.summary


def test_config_validation() -> None:
    assert NotifyConfig.from_table({"command": ["notify", "--x"], "timeout": 3}).command == (
        "notify",
        "--x",
    )
    with pytest.raises(ConfigError, match="argv"):
        NotifyConfig.from_table({"command": "notify --x"})
    with pytest.raises(ConfigError, match="http"):
        NotifyConfig.from_table({"webhook": "file:///etc/passwd"})
    with pytest.raises(ConfigError, match="unknown keys"):
        NotifyConfig.from_table({"shell": "x"})
    assert not NotifyConfig().enabled
