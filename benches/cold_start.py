"""Cold start: how long a fresh ``baton`` process takes, beside the interpreter and acpx.

Each row is a whole process, spawned and waited for, median of the repeats:

* ``python -c pass`` (the interpreter's floor) and ``python -c 'import acp'`` (the ACP
  SDK's models alone);
* ``baton --version``, and the import of everything ``baton run`` loads
  (``python -c 'import baton.cli.app'``);
* ``baton run --json`` of a trivial prompt (the flood agent, one message chunk) end to
  end: start, project, store, agent spawn, handshake, turn, close (target ≤ 0.35 s);
* ``acpx --version`` when acpx is installed (the peer's start).
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from benches.common import median, print_table
from benches.ingest import BATON, Project, acpx_command

TARGET_S = 0.35


def _time(args: list[str], **kwargs: object) -> float:
    start = time.perf_counter()
    subprocess.run(args, check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, **kwargs)  # type: ignore[call-overload]
    return time.perf_counter() - start


def run(repeats: int) -> None:
    load_start = os.getloadavg()[0]
    acpx = acpx_command()
    tmp = Path(tempfile.mkdtemp(prefix="baton-bench-cold-"))
    py = sys.executable
    rows: dict[str, list[float]] = {}
    try:
        project = Project(tmp, (1,))
        cases: dict[str, tuple[list[str], dict[str, object]]] = {
            "python -c pass": ([py, "-c", "pass"], {}),
            "python -c 'import acp'": ([py, "-c", "import acp"], {}),
            "baton --version": ([str(BATON), "--version"], {}),
            "import baton.cli.app": ([py, "-c", "import baton.cli.app"], {}),
            "baton run --json (trivial prompt)": (
                [str(BATON), "run", "--agent", "flood-message-1", "--json", "go"],
                {"cwd": project.root, "env": project.env},
            ),
        }
        if acpx is not None:
            cases["acpx --version"] = ([str(acpx), "--version"], {})
        for _ in range(repeats):
            for name, (args, kwargs) in cases.items():
                rows.setdefault(name, []).append(_time(args, **kwargs))
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    floor = median(rows["python -c pass"])
    peer = median(rows["acpx --version"]) if "acpx --version" in rows else None
    table = []
    for name, values in rows.items():
        med = median(values)
        target = "–"
        if name.startswith("baton run"):
            target = f"≤ {TARGET_S} s: " + ("MET" if med <= TARGET_S else "NOT MET")
        table.append(
            [
                name,
                f"{med:.3f}",
                f"{min(values):.3f}–{max(values):.3f}",
                f"{med / floor:.1f}",
                f"{med / peer:.2f}" if peer else "–",
                target,
            ]
        )
    print_table(
        f"cold start: whole processes, s, median of {repeats}; "
        f"load {load_start:.1f}→{os.getloadavg()[0]:.1f}",
        ["process", "median s", "range", "× python", "× acpx --version", "target"],
        table,
    )
