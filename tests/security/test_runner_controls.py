"""Security controls where they matter: on the runner's launch path and in its store."""

from __future__ import annotations

import dataclasses
import os
import sys
from pathlib import Path

import pytest

from baton.agent_profile import CredentialBinding
from baton.errors import SecurityError
from baton.providers.catalog import BUILTIN
from baton.security.distribution import manifest_path, save_manifest
from baton.security.pinning import pin_tree
from tests.security.corpus import BOUND_SECRETS, SHAPES, leaks
from tests.support.harness import Harness, fake

pytestmark = pytest.mark.asyncio


def _git_workspace(harness: Harness) -> Path:
    ws = harness.workspace
    (ws / ".git").mkdir(exist_ok=True)
    return ws


async def test_workspace_mcp_config_refuses_the_launch(harness: Harness) -> None:
    ws = _git_workspace(harness)
    (ws / ".cursor").mkdir()
    (ws / ".cursor" / "mcp.json").write_text('{"mcpServers": {"x": {"command": "evil"}}}')
    with pytest.raises(SecurityError) as info:
        await harness.open(fake("ok"), admission=("cursor",))
    assert ".cursor/mcp.json" in str(info.value)
    refused = harness.of("security.admission_refused")
    assert refused and refused[0].subject == ".cursor/mcp.json"
    assert not harness.sessions, "nothing was launched"
    session = await harness.open(fake("ok"), admission=("cursor",), allow_workspace_config=True)
    assert (await session.prompt("hi")).status == "completed"
    overrides = [r for r in harness.of("security.admission_refused") if "override" in r.control]
    assert overrides, "the override is still reported"


def _agent_tree(root: Path) -> Path:
    """A tiny 'npm-installed' agent: package.json + a launcher that runs the fake agent."""
    (root / "bin").mkdir(parents=True)
    (root / "package.json").write_text('{"name": "tiny-agent", "version": "1.0.0"}')
    launcher = root / "bin" / "tiny-agent"
    launcher.write_text(
        f"#!/bin/sh\nexec {sys.executable} -m baton.testing.fake_agent --scenario ok\n"
    )
    launcher.chmod(0o755)
    return root


async def test_a_tampered_file_in_a_pinned_tree_blocks_the_launch(harness: Harness) -> None:
    tree = _agent_tree(harness.tmp / "agent-tree")
    environ = {"PATH": f"{tree / 'bin'}:{os.environ['PATH']}"}
    manifest = pin_tree(tree, "bin/tiny-agent", agent="tiny", version="1.0.0")
    profile_fields = {"name": "tiny"}
    state = harness.tmp / "state"
    profile = dataclasses.replace(BUILTIN, name="tiny", command=("tiny-agent",), family="generic")
    save_manifest(manifest_path(profile, state), manifest)
    session = await harness.open(["tiny-agent"], environ=environ, **profile_fields)
    assert session.argv[0] == str(tree / "bin" / "tiny-agent"), "the verified file is launched"
    await session.close()
    with (tree / "package.json").open("a") as fh:
        fh.write(" ")
    with pytest.raises(SecurityError) as info:
        await harness.open(["tiny-agent"], environ=environ, **profile_fields)
    assert "package.json" in str(info.value)
    mismatch = harness.of("security.pin_mismatch")
    assert mismatch and "package.json" in mismatch[0].reason


async def test_secrets_never_reach_the_store_or_the_stream(harness: Harness) -> None:
    """A bound credential and ≥30 secret shapes flow through a real agent's tool input,
    output, diff and messages; none survives into the stored or emitted events."""
    shapes = [s for s in SHAPES if "\n" not in s.text and "'" not in s.text]
    assert len(shapes) >= 30
    body = "\n".join(s.text for s in shapes)
    prompt = (
        "Leak test.\n\n```file secrets.txt\n" + body + "\n```\n\n"
        '```sh\ncat secrets.txt\necho "token=$MY_TOKEN"\n```\n'
    )
    bound = BOUND_SECRETS[0]
    names = [f"MY_TOKEN_{i}" if i else "MY_TOKEN" for i in range(len(BOUND_SECRETS))]
    session = await harness.open(
        [sys.executable, "-m", "baton.agents.builtin"],
        name="builtin",
        family="builtin",
        preset="all",
        credentials=tuple(CredentialBinding(n) for n in names),
        environ={"PATH": os.environ["PATH"], **dict(zip(names, BOUND_SECRETS, strict=True))},
    )
    outcome = await session.prompt(prompt)
    assert outcome.status == "completed"
    await session.close()
    await harness.store.flush()
    stored = "\n".join(harness.store.iter_event_json("run-test"))
    emitted = "\n".join(e.to_json() for e in harness.events)
    assert "secrets.txt" in stored and "cat secrets.txt" in stored  # the work is visible
    assert leaks(stored, shapes) == [] and leaks(emitted, shapes) == []
    assert bound not in stored and bound not in emitted
    assert (harness.workspace / "secrets.txt").read_text().count("\n") >= 30  # the file is real
