"""The start-up GC policy: only a process's own entry point changes the collector."""

from __future__ import annotations

import subprocess
import sys

from baton.import_gc import YOUNG_THRESHOLD

PROBE = """
import gc, sys
from baton.import_gc import importing, own_process
if sys.argv[1] == "owned":
    own_process()
with importing():
    during = gc.isenabled()
    import json
print(during, gc.isenabled(), gc.get_freeze_count() > 0, gc.get_threshold()[0])
"""


def _run(mode: str) -> str:
    done = subprocess.run(
        [sys.executable, "-c", PROBE, mode], capture_output=True, text=True, check=True
    )
    return done.stdout.strip()


def test_an_owned_process_imports_without_the_collector_and_freezes_after() -> None:
    assert _run("owned") == f"False True True {YOUNG_THRESHOLD}"


def test_as_a_library_nothing_changes_the_hosts_collector() -> None:
    assert _run("library") == "True True False 700"  # CPython's own threshold


def test_the_command_line_is_an_owned_process() -> None:
    probe = (
        "import gc, sys; from baton.cli import entry; sys.argv = ['baton', '--help'];"
        "\ntry: entry.main()\nexcept SystemExit: pass\nprint(gc.get_threshold()[0])"
    )
    done = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True)
    assert done.stdout.strip().splitlines()[-1] == str(YOUNG_THRESHOLD), done.stderr
