"""Zero leaks on every surface: a real agent process sends the whole secret corpus.

The fault agent (scenario ``secrets``) writes every corpus text as streamed transcript
(split across writes), stderr, tool titles, inputs, outputs and diffs, and a permission
request; two of the shapes are credentials bound to the session from the secrets file.
Then every surface a person or a program reads is searched for every secret, in every
spelling :func:`~baton.security.redact.secret_variants` knows, and for long fragments
of each: the database and its WAL (raw bytes), ``run --json`` (NDJSON), ``run`` (human,
with the stderr preview of a turn whose agent died), ``log`` and ``log --json``,
``inbox --json``, and the dashboard's API and pages.
"""

from __future__ import annotations

import json
import os
import re
import sys
from pathlib import Path

import httpx
import pytest

from baton.app.recovery import open_store
from baton.events.model import CanonicalEvent
from baton.requests.ledger import Ledger
from baton.web.app import create_app
from tests.security.corpus import SHAPES, SecretShape, leaks
from tests.support.project import baton_in

TOKEN = "t" * 32

BOUND = {"FAKE_OPAQUE": s.secret for s in SHAPES if s.bound and "opaque" in s.name} | {
    "FAKE_SPECIAL": next(s.secret for s in SHAPES if s.bound and "json-escaped" in s.name)
}


def _fragments(shape: SecretShape) -> list[str]:
    """Long pieces of a secret: a preview cut in the middle must not show half a key."""
    secret = shape.secret
    if len(secret) < 24:
        return []
    return [secret[i : i + 16] for i in range(0, len(secret) - 16, 4)]


def assert_no_leak(surface: str, text: str) -> None:
    found = leaks(text)
    for shape in SHAPES:
        if shape.name not in found and any(f in text for f in _fragments(shape)):
            found.append(f"{shape.name} (fragment)")
    assert found == [], f"{surface} leaks {found}"


@pytest.fixture(scope="module")
def project(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("leaks")
    ws = root / "ws"
    ws.mkdir()
    texts = root / "texts.json"
    texts.write_text(json.dumps([s.text for s in SHAPES]))
    dying = root / "dying.json"
    dying.write_text(json.dumps({"texts": [s.text for s in SHAPES], "die": True}))
    secrets = root / "secrets.toml"
    secrets.write_text("".join(f"{k} = {json.dumps(v)}\n" for k, v in BOUND.items()))
    os.chmod(secrets, 0o600)
    credentials = ", ".join(f'{{ name = "{k}", source = "file" }}' for k in BOUND)
    agent = f'["{sys.executable}", "-m", "baton.testing.fake_agent", "--scenario", "secrets"'
    (ws / "baton.toml").write_text(
        f'[secrets]\nfile = "{secrets}"\n\n'
        f'[profiles.secrets]\ncommand = {agent}, "--texts", "{texts}"]\n'
        f"credentials = [{credentials}]\n\n"
        f'[profiles.dying]\ncommand = {agent}, "--texts", "{dying}"]\n'
        f"credentials = [{credentials}]\n"
    )
    return ws


@pytest.fixture(scope="module")
def runs(project: Path) -> dict[str, object]:
    """One turn that completes (NDJSON) and one whose agent dies (human output)."""
    streamed = baton_in(project, "run", "--agent", "secrets", "--json", "--wait-timeout", "0", "go")
    events = [CanonicalEvent.model_validate_json(x) for x in streamed.stdout.splitlines()]
    assert any(e.type == "turn.completed" for e in events), streamed.stderr[-2000:]
    human = baton_in(project, "run", "--agent", "dying", "--wait-timeout", "0", "go")
    assert human.returncode != 0
    return {"streamed": streamed, "events": events, "human": human}


def test_the_corpus_really_went_through(runs: dict[str, object]) -> None:
    """The test can fail: the agent's texts arrived, redacted, on the surfaces."""
    events = runs["events"]
    assert isinstance(events, list)
    types = {e.type for e in events}
    assert {"transcript.assistant", "tool.execution.completed", "request.created"} <= types
    text = "".join(e.payload.text for e in events if e.type == "transcript.assistant")
    assert "***REDACTED***" in text and "hooks.slack.com/services/" in text
    human = runs["human"]
    out = human.stdout + human.stderr  # type: ignore[attr-defined]
    assert "dying:" in out, "the stderr preview of the dead agent must be shown"
    # an unredacted control: the corpus would leak without redaction
    assert leaks("\n".join(s.text for s in SHAPES)) != []


def test_ndjson_and_human_run_output_leak_nothing(runs: dict[str, object]) -> None:
    streamed, human = runs["streamed"], runs["human"]
    assert_no_leak("run --json stdout", streamed.stdout)  # type: ignore[attr-defined]
    assert_no_leak("run --json stderr", streamed.stderr)  # type: ignore[attr-defined]
    assert_no_leak("run stdout", human.stdout)  # type: ignore[attr-defined]
    assert_no_leak("run stderr", human.stderr)  # type: ignore[attr-defined]


def test_stderr_previews_leak_nothing(project: Path, runs: dict[str, object]) -> None:
    store = open_store(_db(project))
    try:
        previews = []
        for run in store.list_runs(10):
            for event in store.iter_events(run.run_id):
                preview = getattr(event.payload, "stderr_preview", "")
                if preview:
                    previews.append(preview)
    finally:
        store.close()
    assert previews, "a dead agent's turn carries a stderr preview"
    assert any("dying:" in p for p in previews)
    assert_no_leak("stderr previews", "\n".join(previews))


def test_database_and_wal_bytes_leak_nothing(project: Path, runs: dict[str, object]) -> None:
    db = _db(project)
    files = [p for p in db.parent.iterdir() if p.name.startswith(db.name)]
    assert db in files
    for path in files:
        data = path.read_bytes().decode("utf-8", errors="replace")
        assert_no_leak(path.name, data)


def test_log_and_inbox_leak_nothing(project: Path, runs: dict[str, object]) -> None:
    listed = baton_in(project, "runs", "--json")
    run_ids = [json.loads(x)["run_id"] for x in listed.stdout.splitlines() if x.strip()]
    assert len(run_ids) >= 2
    for run_id in run_ids:
        for args in (("log", run_id), ("log", run_id, "--json")):
            out = baton_in(project, *args)
            assert out.returncode == 0, out.stderr
            assert out.stdout.strip()
            assert_no_leak(" ".join(args), out.stdout + out.stderr)
    inbox = baton_in(project, "inbox", "--json", "--all")
    assert inbox.returncode == 0, inbox.stderr
    assert "request_id" in inbox.stdout
    assert_no_leak("inbox --json", inbox.stdout + inbox.stderr)


async def test_dashboard_api_and_pages_leak_nothing(project: Path, runs: dict[str, object]) -> None:
    store = open_store(_db(project))
    ledger = Ledger(store)
    try:
        app = create_app(store, ledger, token=TOKEN, poll_interval=0.02)
        async with httpx.AsyncClient(
            transport=httpx.ASGITransport(app=app),
            base_url="http://127.0.0.1:8765",
            headers={"Authorization": f"Bearer {TOKEN}"},
        ) as client:
            bodies: dict[str, str] = {}
            listed = await client.get("/api/runs")
            assert listed.status_code == 200
            bodies["/api/runs"] = listed.text
            for run in listed.json()["runs"]:
                for url in (f"/api/runs/{run['run_id']}", f"/api/runs/{run['run_id']}/events"):
                    response = await client.get(url)
                    assert response.status_code == 200, (url, response.text[:200])
                    bodies[url] = response.text
            request_ids: set[str] = set()
            for url in ("/api/requests?state=all", "/api/requests", "/api/decisions"):
                response = await client.get(url)
                bodies[url] = response.text
                if response.status_code == 200:
                    request_ids |= set(re.findall(r"req-[0-9a-f]{8,}", response.text))
            assert request_ids, "the permission request is listed"
            for request_id in request_ids:
                for url in (f"/api/requests/{request_id}", f"/fragments/requests/{request_id}"):
                    response = await client.get(url)
                    assert response.status_code == 200, (url, response.text[:200])
                    bodies[url] = response.text
            pages = ["/", "/runs", "/decisions"]
            pages += [f"/runs/{run['run_id']}" for run in listed.json()["runs"]]
            for url in pages:
                response = await client.get(url)
                assert response.status_code == 200, (url, response.text[:200])
                bodies[url] = response.text
    finally:
        await ledger.aclose()
        store.close()
    assert any("REDACTED" in body for body in bodies.values())
    for url, body in bodies.items():
        assert_no_leak(url, body)


def _db(project: Path) -> Path:
    """The project keeps its store in ``<project>/.baton``."""
    candidates = sorted(project.glob(".baton/**/baton.db"))
    assert candidates, "the project store"
    return candidates[0]
