"""The single-machine path never imports cluster mode: no Ray, no psycopg, no baton.cluster."""

from __future__ import annotations

import json
import subprocess
import sys

PROBE = """
import json, sys
import baton.cli.app, baton.app, baton.team.service, baton.team.loop, baton.store.store
from baton.cli.mount import COMMANDS
import importlib
for module in dict.fromkeys(COMMANDS.values()):
    importlib.import_module(module)  # every command module, cluster_cmds included
watched = ("ray", "psycopg", "baton.cluster")
print(json.dumps(sorted(m for m in sys.modules if m.split(".")[0] in watched or m.startswith("baton.cluster"))))
"""


def test_no_command_module_imports_cluster_mode() -> None:
    done = subprocess.run(
        [sys.executable, "-c", PROBE], capture_output=True, text=True, timeout=120, check=True
    )
    assert json.loads(done.stdout.strip().splitlines()[-1]) == []
