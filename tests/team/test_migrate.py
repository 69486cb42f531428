"""A project made by the pre-store baton (``fixtures/legacy-project-0.1.tar.gz``) keeps working.

The fixture is what ``baton init; task new …; baton up --until-idle`` left with the
code of commit 68e9c1e: a PM → QA/OPS flow waiting for ADMIN's review, a DEV task
that asked ADMIN a question (and reported), a TASK for an unknown recipient
(refused in place), and the side files ``state.json``, ``bindings/``,
``spool.jsonl`` and ``refused.json``.
"""

from __future__ import annotations

import json
import tarfile
from pathlib import Path

import pytest

from tests.support.project import baton_in

FIXTURE = Path(__file__).parent / "fixtures" / "legacy-project-0.1.tar.gz"


@pytest.fixture
def legacy(tmp_path: Path) -> Path:
    with tarfile.open(FIXTURE) as archive:
        archive.extractall(tmp_path, filter="data")
    return tmp_path / "proj"


def test_the_first_up_moves_the_side_files_into_the_store_and_the_flow_goes_on(
    legacy: Path,
) -> None:
    coordination = legacy / ".baton" / "coordination"
    assert (coordination / "state.json").exists() and (coordination / "spool.jsonl").exists()
    up = baton_in(legacy, "up", "--until-idle")
    assert up.returncode == 0, up.stderr[-3000:]
    for name in ("state.json", "spool.jsonl", "refused.json", "bindings"):
        assert not (coordination / name).exists(), name
    (retired,) = coordination.glob("migrated-*")
    assert (retired / "state.json").exists()

    status = json.loads(baton_in(legacy, "status", "--json").stdout)
    reviews = {r["subject"]: r for r in status["pending_reviews"]}
    assert set(reviews) == {"Release", "Ask the human"}
    # The reviews are the very requests the old daemon opened, still answerable.
    inbox = [json.loads(line) for line in baton_in(legacy, "inbox", "--json").stdout.splitlines()]
    open_reviews = {r["request_id"] for r in inbox if r["kind"] == "review"}
    assert {r["request_id"] for r in reviews.values()} == open_reviews
    (question,) = status["questions"]
    assert question["question"] == "Which cluster?" and question["role"] == "DEV"
    refused = [r for r in status["refusals"] if r["reason"] == "unknown_recipient"]
    assert refused and refused[0]["in_place"]
    issues_before = len(list((legacy / "fcop" / "issues").glob("ISSUE-*.md")))
    listed = baton_in(legacy, "sessions", "--json").stdout.splitlines()  # NDJSON
    sessions = {s["name"]: s for s in map(json.loads, listed)}
    assert sessions["PM"]["turns"] == 2  # the old counters came along

    release = reviews["Release"]["request_id"]
    answered = baton_in(legacy, "answer", release, "--accept", "--reason", "ship it")
    assert answered.returncode == 0, answered.stderr
    again = baton_in(legacy, "up", "--until-idle")
    assert again.returncode == 0, again.stderr[-3000:]
    status = json.loads(baton_in(legacy, "status", "--json").stdout)
    assert status["board"]["counts"]["done"] == 3
    assert {r["subject"] for r in status["pending_reviews"]} == {"Ask the human"}
    # The unknown recipient was reported once, before the migration: not again.
    assert len(list((legacy / "fcop" / "issues").glob("ISSUE-*.md"))) == issues_before
