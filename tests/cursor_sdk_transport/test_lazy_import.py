"""Sessions of other agents never import the optional ``cursor-sdk`` transport.

It is ~40 ms of every ``baton run`` start (the face's models, the bridge's discovery),
paid by sessions that never use it; :func:`baton.runner.launch.transport_for` imports it
for a ``cursor-sdk`` profile only.
"""

from __future__ import annotations

import json
import subprocess
import sys

PROBE = """
import json, sys
import baton.cli.run_cmd, baton.cli.up_cmd, baton.runner.session, baton.runner.launch
from baton.providers.catalog import BUILTIN_PROFILES
from baton.runner.launch import transport_for
for profile in BUILTIN_PROFILES.values():
    if profile.transport != "cursor-sdk":
        transport_for(profile)
print(json.dumps(sorted(m for m in sys.modules if m.startswith(("baton.cursor_sdk", "cursor_sdk")))))
"""


def test_no_other_session_imports_the_cursor_sdk_transport() -> None:
    done = subprocess.run(
        [sys.executable, "-c", PROBE], capture_output=True, text=True, timeout=120, check=True
    )
    assert json.loads(done.stdout.strip().splitlines()[-1]) == []
