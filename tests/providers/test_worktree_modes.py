"""In a task tree's worktree the agent edits unasked: the table, the profile, the verdict, the docs.

Pure checks of :mod:`baton.providers.worktree_modes`: which mode each family runs in a tree's
worktree, that it is ``contained_edits`` there and still refused anywhere else, that only the
asking setup baton selects is switched (a mode or permission of the profile's own stays), and
that the table in ``docs/agents.md`` and ``docs/worktrees.md`` is the generated one.
"""

from __future__ import annotations

import dataclasses
import json
import os
import re
from pathlib import Path
from types import MappingProxyType
from typing import Any

import pytest

from baton.agent_profile import AgentProfile
from baton.config import load_config
from baton.providers.approval import APPROVAL_TABLES, OPENCODE_ASK, permission_env, verify
from baton.providers.catalog import BUILTIN_PROFILES, CLAUDE, CLAUDE_ASK, CODEX, CURSOR, OPENCODE
from baton.providers.worktree_modes import (
    OPENCODE_WORKTREE,
    WORKTREE_MODES,
    in_worktree,
    render_markdown,
    verify_in_worktree,
)

REPO = Path(__file__).resolve().parents[2]
DOCS = ("agents.md", "worktrees.md")
BEGIN, END = "<!-- worktree-modes -->", "<!-- /worktree-modes -->"


def _session(mode: str | None = None, legacy: str | None = None) -> dict[str, Any]:
    result: dict[str, Any] = {}
    if mode is not None:
        result["configOptions"] = [
            {"id": "mode", "category": "mode", "type": "select", "currentValue": mode}
        ]
    if legacy is not None:
        result["modes"] = {"currentModeId": legacy, "availableModes": []}
    return result


def _with_permission(profile: AgentProfile, permission: dict[str, Any]) -> AgentProfile:
    env = {**profile.env, "OPENCODE_PERMISSION": json.dumps(permission)}
    return dataclasses.replace(profile, env=MappingProxyType(env))


@pytest.mark.parametrize("family", sorted(WORKTREE_MODES))
def test_every_row_names_a_mode_that_approves_itself_outside_a_worktree(family: str) -> None:
    row = WORKTREE_MODES[family]
    table = APPROVAL_TABLES[family]
    assert row.unasked and row.still_asks and row.evidence
    assert row.selected or row.why_not, f"{family}: a row not selected says why"
    if row.mode is not None:
        assert table.modes[row.mode].klass == "self_approves", "only a self-approving mode"
        profile = dataclasses.replace(BUILTIN_PROFILES[family], mode=row.mode)
        assert verify(profile, _session(row.mode)).self_approves
        inside = verify_in_worktree(profile, _session(row.mode))
        assert inside.klass == ("contained_edits" if row.selected else "self_approves")


@pytest.mark.parametrize("name", sorted(BUILTIN_PROFILES))
def test_a_builtin_profile_in_a_worktree_runs_the_selected_edit_mode(name: str) -> None:
    profile = BUILTIN_PROFILES[name]
    there = in_worktree(profile)
    row = WORKTREE_MODES.get(profile.family)
    if row is None or not row.selected:
        assert there == profile, f"{name} keeps its asking mode in a worktree"
        return
    assert profile.worktree_edits
    session = _session(there.mode) if there.mode is not None else {}
    assert verify_in_worktree(there, session).klass == "contained_edits"
    # The same profile outside a tree's worktree (the user's checkout, `baton run`): refused.
    assert verify(there, session).self_approves
    assert verify(profile, _session(profile.mode) if profile.mode else {}).klass in (
        "asks",
        "read_only",
    )


def test_the_modes_the_builtin_profiles_switch_to() -> None:
    assert (in_worktree(CLAUDE).mode, in_worktree(CURSOR).mode) == ("acceptEdits", "agent")
    assert in_worktree(CODEX) == CODEX, "Codex's write modes run commands unasked"
    permission = json.loads(in_worktree(OPENCODE).env["OPENCODE_PERMISSION"])
    assert permission == dict(OPENCODE_WORKTREE)
    assert permission == {**OPENCODE_ASK, "edit": "allow"}
    for key in ("bash", "webfetch", "external_directory"):
        assert permission[key] == "ask"


def test_claude_asks_for_every_command_in_every_mode() -> None:
    """acceptEdits alone runs filesystem commands (mkdir, touch…) unasked: the seeded `ask`
    rules keep them asking (observed in tests/integration/test_worktree_agents.py)."""
    [seed] = [f for f in CLAUDE.files if f.path.endswith("settings.json")]
    assert seed.content is not None
    settings = json.loads(seed.content)["permissions"]
    assert settings["defaultMode"] == "default" and tuple(settings["ask"]) == CLAUDE_ASK
    assert "Bash" in settings["ask"]


def test_a_mode_or_permission_of_the_profiles_own_stays() -> None:
    planner = dataclasses.replace(CLAUDE, mode="plan")
    assert in_worktree(planner) == planner
    off = dataclasses.replace(CLAUDE, worktree_edits=False)
    assert in_worktree(off) == off
    own = _with_permission(OPENCODE, {"edit": "ask", "bash": "deny"})
    assert in_worktree(own) == own
    generic = dataclasses.replace(CLAUDE, family="generic")
    assert in_worktree(generic) == generic


def test_worktree_edits_is_a_profile_key(tmp_path: Path) -> None:
    (tmp_path / "baton.toml").write_text(
        '[profiles.careful]\nextends = "claude"\nworktree_edits = false\n'
    )
    config = load_config(tmp_path, environ={})
    assert config.profile("careful").worktree_edits is False
    assert config.profile("claude").worktree_edits is True
    assert in_worktree(config.profile("careful")).mode == "default"


def test_in_a_worktree_every_other_self_approving_mode_is_still_refused() -> None:
    for mode in ("auto", "bypassPermissions", "dontAsk"):
        assert verify_in_worktree(CLAUDE, _session(mode)).self_approves, mode
    assert verify_in_worktree(CURSOR, _session("agent")).klass == "contained_edits"
    assert verify_in_worktree(CODEX, _session("auto")).self_approves
    # Option and legacy object disagree: the less safe one counts, in a worktree too.
    mixed = verify_in_worktree(CLAUDE, _session("acceptEdits", legacy="bypassPermissions"))
    assert mixed.self_approves and mixed.mode == "bypassPermissions"
    # Asking modes stay what they are.
    assert verify_in_worktree(CLAUDE, _session("default")).klass == "asks"
    assert verify_in_worktree(CLAUDE, {}).klass == "unknown"


@pytest.mark.parametrize(
    "permission",
    [
        {"edit": "allow", "bash": "allow", "webfetch": "ask", "external_directory": "ask"},
        {"edit": "allow", "bash": "ask", "webfetch": "allow", "external_directory": "ask"},
        {"edit": "allow", "bash": "ask", "webfetch": "ask"},  # outside paths left unset
        {
            "edit": "allow",
            "bash": {"*": "ask", "git push": "allow"},
            "webfetch": "ask",
            "external_directory": "ask",
        },
        "allow",
    ],
)
def test_opencode_is_contained_only_when_nothing_but_edits_goes_through(
    permission: dict[str, Any] | str,
) -> None:
    profile = dataclasses.replace(
        OPENCODE,
        env=MappingProxyType({**OPENCODE.env, "OPENCODE_PERMISSION": json.dumps(permission)}),
    )
    assert verify_in_worktree(profile, {}).self_approves


def test_opencode_in_its_worktree_permission_is_contained() -> None:
    there = in_worktree(OPENCODE)
    verdict = verify_in_worktree(there, {})
    assert verdict.klass == "contained_edits" and "still ask" in verdict.reason
    assert verify(there, {}).self_approves
    assert verify_in_worktree(OPENCODE, {}).klass == "asks"
    broken = dataclasses.replace(
        OPENCODE, env=MappingProxyType({**OPENCODE.env, "OPENCODE_PERMISSION": "{not json"})
    )
    assert verify_in_worktree(broken, {}).klass == "unknown"
    assert permission_env(OPENCODE_ASK) == OPENCODE.env["OPENCODE_PERMISSION"]


def _block(text: str) -> str:
    found = re.search(rf"{re.escape(BEGIN)}\n(.*?){re.escape(END)}", text, flags=re.DOTALL)
    assert found is not None, f"no {BEGIN} … {END} block"
    return found.group(1)


@pytest.mark.parametrize("doc", DOCS)
def test_the_docs_show_the_generated_table(doc: str) -> None:
    path = REPO / "docs" / doc
    text = path.read_text(encoding="utf-8")
    table = render_markdown()
    if os.environ.get("BATON_REGEN_GOLDEN") == "1":
        text = text.replace(_block(text), table)
        path.write_text(text, encoding="utf-8")
    assert _block(text) == table, (
        f"docs/{doc}: the worktree-modes table is stale; rerun with BATON_REGEN_GOLDEN=1"
    )


def test_the_table_shows_every_family_and_what_still_asks() -> None:
    table = render_markdown()
    for family, row in WORKTREE_MODES.items():
        [line] = [line for line in table.splitlines() if line.startswith(f"| {family} |")]
        assert row.still_asks in line
        assert ("| selected |" in line) == row.selected
