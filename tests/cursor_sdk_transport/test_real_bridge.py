"""The real bridge bundled in the cursor-sdk wheel, started by baton (no account here).

The built-in ``cursor-sdk`` profile runs ``<wheel>/_vendor/bridge/bin/node`` on the bridge's
script after hashing the whole bridge tree against baton's pin of cursor-sdk 1.1.0. The
bridge starts in its private environment, announces itself, answers ``GetVersion`` (so
``initialize`` succeeds), and then: without a key baton stops at ``session/new`` with ACP's
auth-required (exit 3, one line); with a key the bridge tries Cursor's backend, which is
unreachable here (exit 3, the SDK's reason). No bridge process is left either way.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from baton.security.bridge_pin import BRIDGE_ENTRY, locate_bundled_bridge
from tests.cursor_sdk_transport.support import KEY, events, of_type, run
from tests.support.project import git_repo

pytestmark = pytest.mark.process


def bridges_in(repo: Path) -> list[int]:
    """Live processes running the bundled bridge script with ``repo`` as their cwd."""
    script = str(locate_bundled_bridge().root / BRIDGE_ENTRY)
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            argv = (entry / "cmdline").read_bytes().split(b"\0")
            cwd = os.readlink(entry / "cwd")
        except OSError:
            continue
        if script.encode() in argv and cwd == str(repo):
            found.append(int(entry.name))
    return found


def test_without_a_key_the_real_bridge_starts_and_baton_exits_3(tmp_path: Path) -> None:
    repo = git_repo(tmp_path)
    (repo / "baton.toml").write_text("# the built-in cursor-sdk profile, nothing bound\n")
    done = run(repo, "run", "--agent", "cursor-sdk", "hello", key=None)
    assert done.returncode == 3, done.stderr
    errors = [line for line in done.stderr.splitlines() if "CURSOR_API_KEY" in line]
    assert len(errors) == 1 and errors[0].startswith("baton: "), done.stderr
    assert "session/new" in errors[0]  # initialize succeeded: the bridge answered GetVersion
    assert "cursor-api-key" in errors[0]
    logged = run(repo, "log", "--json", done.stderr.split("baton log ")[-1].strip())
    (failed,) = of_type(events(logged.stdout), "session.failed")
    assert failed["payload"]["error_type"] == "AuthRequired"
    assert "cursor-sdk-bridge ready" in failed["payload"]["stderr_preview"]
    assert not of_type(events(logged.stdout), "security.pin_mismatch")
    assert bridges_in(repo) == []


def test_with_a_key_the_unreachable_backend_is_exit_3_with_the_sdks_reason(
    tmp_path: Path,
) -> None:
    repo = git_repo(tmp_path)
    (repo / "baton.toml").write_text(
        '[profiles.cursor-keyed]\nextends = "cursor-sdk"\ncredentials = ["CURSOR_API_KEY"]\n'
    )
    done = run(repo, "run", "--agent", "cursor-keyed", "--json", "hello", key=KEY)
    assert done.returncode == 3, done.stderr
    (failed,) = of_type(events(done.stdout), "session.failed")
    assert failed["payload"]["error_type"] == "SessionRejected"
    assert "cursor-sdk" in failed["payload"]["message"]
    assert KEY not in done.stdout + done.stderr  # bound credentials are redacted
    assert bridges_in(repo) == []
