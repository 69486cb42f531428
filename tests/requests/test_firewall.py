"""The permission firewall: what a request is, and the per-agent table in docs/agents.md."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from baton.providers.catalog import BUILTIN_PROFILES
from baton.requests.firewall import AGENT_FACTS, agents_table, classify, grantable
from tests.requests.reqbuild import cursor_plan, cursor_questions, elicitation, permission, review

DOC = Path(__file__).resolve().parents[2] / "docs" / "agents.md"


def test_docs_agents_table_is_the_generated_one() -> None:
    text = DOC.read_text(encoding="utf-8")
    found = re.search(r"<!-- agents-table -->\n(.*?)<!-- /agents-table -->", text, re.S)
    assert found, "docs/agents.md lost its generated table"
    assert found.group(1) == agents_table(BUILTIN_PROFILES.values()), (
        "regenerate the table: baton.requests.firewall.agents_table(BUILTIN_PROFILES.values())"
    )


def test_every_built_in_family_has_facts_and_a_row() -> None:
    table = agents_table(BUILTIN_PROFILES.values())
    for profile in BUILTIN_PROFILES.values():
        assert profile.family in AGENT_FACTS
        assert f"| {profile.name} |" in table
        if profile.version:
            assert profile.version in table, "the pinned version is in the row"


@pytest.mark.parametrize(
    ("doc", "klass"),
    [
        (permission("execute"), "tool_call"),
        (permission("edit", command=None), "tool_call"),
        (permission("switch_mode", command=None), "mode_change"),
        (permission("other", command="ExitPlanMode"), "plan_exit"),
        (permission("other", command=None, raw_input={"questions": []}), "question"),
        (cursor_questions(), "question"),
        (cursor_plan(), "plan"),
        (elicitation(), "elicitation"),
        (review(), "review"),
    ],
)
def test_classify(doc: object, klass: str) -> None:
    assert classify(doc) == klass  # type: ignore[arg-type]
    assert grantable(classify(doc)) is (klass == "tool_call")  # type: ignore[arg-type]


def test_a_claude_plan_exit_by_its_title_alone() -> None:
    doc = permission("other", command="Ready to code?")
    assert classify(doc, "claude") == "plan_exit"
