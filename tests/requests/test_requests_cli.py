"""``baton inbox`` / ``baton answer`` through typer's CliRunner."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from baton.cli.app import app
from baton.request_model.documents import DiffPreview, RequestDocument
from baton.requests.ledger import Ledger, RequestRecord
from tests.requests.reqbuild import (
    META,
    cursor_plan,
    cursor_questions,
    elicitation,
    permission,
    review,
)

runner = CliRunner()


def _create(db: Path, *docs: RequestDocument) -> list[RequestRecord]:
    async def go() -> list[RequestRecord]:
        ledger = Ledger.open(db)
        try:
            return [await ledger.create(d, jsonrpc_id=i, **META) for i, d in enumerate(docs)]
        finally:
            await ledger.aclose()

    return asyncio.run(go())


def _get(db: Path, request_id: str) -> RequestRecord:
    async def go() -> RequestRecord:
        ledger = Ledger.open(db)
        try:
            return await ledger.get(request_id)
        finally:
            await ledger.aclose()

    return asyncio.run(go())


def _answer(db: Path, *args: str) -> Any:
    result = runner.invoke(app, ["answer", *args, "--db", str(db)])
    return result


def test_inbox_renders_each_kind(db_path: Path) -> None:
    diff = DiffPreview(path="src/a.py", old_text="x = 1\n", new_text="x = 2\n")
    _create(
        db_path,
        permission("edit", command=None, diff=diff),
        permission("execute", command="rm -rf build \x1b[2J"),
        cursor_questions(),
        cursor_plan("# The plan\n\n- **bold** step\n"),
        elicitation(),
        review(),
    )
    result = runner.invoke(app, ["inbox", "--db", str(db_path)])
    assert result.exit_code == 0, result.output
    out = result.output
    assert "+x = 2" in out and "-x = 1" in out
    assert "rm -rf build ␛[2J" in out and "\x1b[2J" not in out  # escapes made visible
    assert "question-2" in out and "option-3" in out and "Billing" in out
    assert "The plan" in out and "bold step" in out and "revision" in out
    assert "retries" in out and "TASK-1" in out
    assert "baton answer req-" in out


def test_inbox_json_is_ndjson_of_pending(db_path: Path) -> None:
    a, b = _create(db_path, permission(), cursor_plan())
    assert _answer(db_path, a.request_id, "--deny").exit_code == 0
    result = runner.invoke(app, ["inbox", "--json", "--db", str(db_path)])
    rows = [json.loads(line) for line in result.output.splitlines()]
    assert [r["request_id"] for r in rows] == [b.request_id]
    assert rows[0]["document"]["markdown"] == "# Plan\n\n1. Do it\n"
    every = runner.invoke(app, ["inbox", "--json", "--all", "--db", str(db_path)])
    assert [json.loads(line)["state"] for line in every.output.splitlines()] == [
        "answered",
        "pending",
    ]


def test_answer_permission(db_path: Path) -> None:
    (r,) = _create(db_path, permission())
    bad = _answer(db_path, r.request_id, "--select", "option-1")
    assert bad.exit_code == 1 and "takes --allow or --deny, not --select" in bad.output
    ok = _answer(db_path, r.request_id, "--approve", "--json")  # one vocabulary: yes
    assert ok.exit_code == 0
    assert json.loads(ok.output)["answer"]["option_id"] == "allow-once"
    again = _answer(db_path, r.request_id, "--allow", "--json")
    assert json.loads(again.output)["replayed"] is True


def test_answer_questions(db_path: Path) -> None:
    (r,) = _create(db_path, cursor_questions())
    forged = _answer(
        db_path, r.request_id, "--select", "question-1=option-7", "--select", "question-2=option-1"
    )
    assert forged.exit_code == 1 and "unknown option id 'option-7'" in forged.output
    missing = _answer(db_path, r.request_id, "--select", "question-1=option-1")
    assert missing.exit_code == 1 and "missing answers for question-2" in missing.output
    too_many = _answer(
        db_path,
        r.request_id,
        "--select",
        "question-1=option-1,option-2",
        "--select",
        "question-2=option-1",
    )
    assert too_many.exit_code == 1 and "takes exactly one option" in too_many.output
    ok = _answer(
        db_path,
        r.request_id,
        "--select",
        "question-1=option-2",
        "--select",
        "question-2=option-3",
        "--select",
        "question-2=option-1",
    )
    assert ok.exit_code == 0, ok.output
    answer = _get(db_path, r.request_id).answer
    assert answer is not None and answer.model_dump(mode="json")["selections"] == [
        {"question_id": "question-1", "option_ids": ["option-2"]},
        {"question_id": "question-2", "option_ids": ["option-1", "option-3"]},
    ]


def test_answer_plan_with_revision_binding(db_path: Path) -> None:
    plan = cursor_plan()
    (r,) = _create(db_path, plan)
    stale = _answer(db_path, r.request_id, "--accept", "--revision", "0" * 64)
    assert (
        stale.exit_code == 1 and "stale plan answer" in stale.output and "Stale" not in stale.output
    )
    ok = _answer(
        db_path, r.request_id, "--reject", "--reason", "too big", "--revision", plan.revision[:12]
    )
    assert ok.exit_code == 0, ok.output
    assert _get(db_path, r.request_id).answer.model_dump()["reason"] == "too big"  # type: ignore[union-attr]


def test_answer_form_and_review(db_path: Path) -> None:
    form, rev = _create(db_path, elicitation(), review())
    bad = _answer(
        db_path, form.request_id, "--accept", "--text", "version=1.2", "--text", "retries=many"
    )
    assert bad.exit_code == 1 and "wants an integer" in bad.output
    ok = _answer(
        db_path,
        form.request_id,
        "--accept",
        "--text",
        "version=1.2",
        "--text",
        "channel=beta",
        "--text",
        "dry_run=yes",
        "--text",
        "targets=win,linux",
    )
    assert ok.exit_code == 0, ok.output
    content = _get(db_path, form.request_id).answer.model_dump()["content"]  # type: ignore[union-attr]
    assert content == {
        "version": "1.2",
        "dry_run": True,
        "channel": "beta",
        "targets": ("linux", "win"),
    }
    assert _answer(db_path, rev.request_id, "--reject", "--reason", "no tests").exit_code == 0


@pytest.mark.parametrize("args", [["--allow", "--deny"], []])
def test_answer_needs_exactly_one_decision(db_path: Path, args: list[str]) -> None:
    (r,) = _create(db_path, permission())
    result = _answer(db_path, r.request_id, *args)
    assert result.exit_code == 1 and result.output.startswith("baton: ")
    assert "InvalidAnswer" not in result.output  # plain words, no class names


def test_unknown_id(db_path: Path) -> None:
    _create(db_path, permission())
    result = _answer(db_path, "req-nope", "--allow")
    assert result.exit_code == 1 and "no request with id" in result.output
