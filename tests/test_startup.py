"""The start-up GC policy: only a process's own entry point changes the collector."""

from __future__ import annotations

import subprocess
import sys

PROBE = """
import gc, sys
from baton.startup import importing, own_process
if sys.argv[1] == "owned":
    own_process()
with importing():
    during = gc.isenabled()
    import json
print(during, gc.isenabled(), gc.get_freeze_count() > 0)
"""


def _run(mode: str) -> str:
    done = subprocess.run(
        [sys.executable, "-c", PROBE, mode], capture_output=True, text=True, check=True
    )
    return done.stdout.strip()


def test_an_owned_process_imports_without_the_collector_and_freezes_after() -> None:
    assert _run("owned") == "False True True"


def test_as_a_library_nothing_changes_the_hosts_collector() -> None:
    assert _run("library") == "True True False"
