"""Cold start: how long a fresh ``baton`` process takes, beside the interpreter and acpx.

Each row is a whole process, spawned and waited for, median of the repeats:

* ``python -c pass`` (the interpreter's floor) and ``python -c 'import acp'`` (the ACP
  SDK's models alone, which the run path no longer imports);
* ``baton --version``, and the import of the command line
  (``python -c 'import baton.cli.app'``);
* ``baton run --json`` of a trivial prompt (the flood agent, one message chunk) end to
  end: start, project, store, agent spawn, handshake, turn, close;
* ``acpx --version`` when acpx is installed (the peer's start).

The target: issue 15 asks for ≤ 0.35 s on a machine where ``acpx --version`` took
0.20 s. Absolute times differ by machine and load, so the verdict is the ratio to
``acpx --version`` in the same run: ``baton run`` ≤ 1.75 × acpx.

Then a timeline of a trivial run (median of 3 per mark), from inside the process (audit hooks and the
events' own timestamps): interpreter start, imports of the command line and of
``baton run``, store open, agent spawn, handshake (``session.started``), turn, close,
exit.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from datetime import datetime
from pathlib import Path

from benches.common import median, print_table
from benches.ingest import BATON, Project, acpx_command

TARGET_RATIO = 1.75
"""``baton run`` trivial ÷ ``acpx --version``: 0.35 s ÷ 0.20 s on the issue's machine."""

_TIMELINE = """
import json, sys, time
marks = {"python started": time.time()}
FIRST = {
    ("import", "baton.cli.app"): "imports started",
    ("import", "baton.app"): "command line imported (run command importing)",
    ("sqlite3.connect", None): "run command imported, store opening",
    ("subprocess.Popen", None): "agent spawning",
}
def hook(event, args):
    key = (event, args[0] if event == "import" else None)
    name = FIRST.get(key)
    if name and name not in marks:
        marks[name] = time.time()
sys.addaudithook(hook)
from baton.cli.entry import main
try:
    main(sys.argv[1:])
finally:
    marks["run returned"] = time.time()
    sys.stderr.write("\\nMARKS " + json.dumps(marks) + "\\n")
"""


def _time(args: list[str], **kwargs: object) -> float:
    start = time.perf_counter()
    subprocess.run(args, check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, **kwargs)  # type: ignore[call-overload]
    return time.perf_counter() - start


def timeline(project: Project) -> list[tuple[str, float]]:
    """One trivial run's phases: (mark, seconds since the process was spawned)."""
    args = [sys.executable, "-c", _TIMELINE, "run", "--agent", "flood-message-1", "--json", "go"]
    spawned = time.time()
    done = subprocess.run(args, cwd=project.root, env=project.env, capture_output=True, text=True)
    ended = time.time()
    line = [x for x in done.stderr.splitlines() if x.startswith("MARKS ")]
    if done.returncode != 0 or not line:
        raise RuntimeError(f"timeline run failed: {done.stderr[-500:]}")
    marks: dict[str, float] = json.loads(line[-1].removeprefix("MARKS "))
    for event in map(json.loads, done.stdout.splitlines()):
        if event["type"] in ("session.started", "turn.completed", "session.closed"):
            stamp = datetime.fromisoformat(event["ts"].replace("Z", "+00:00"))
            marks[event["type"]] = stamp.timestamp()
    marks["process exited"] = ended
    return sorted(((name, at - spawned) for name, at in marks.items()), key=lambda m: m[1])


def run(repeats: int) -> None:
    load_start = os.getloadavg()[0]
    acpx = acpx_command()
    tmp = Path(tempfile.mkdtemp(prefix="baton-bench-cold-"))
    py = sys.executable
    rows: dict[str, list[float]] = {}
    try:
        project = Project(tmp, (1,))
        # The baton that PYTHONPATH selects (an A/B run against another checkout's src).
        project.env.update({k: os.environ[k] for k in ("PYTHONPATH",) if k in os.environ})
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
        samples = [dict(timeline(project)) for _ in range(3)]
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    floor = median(rows["python -c pass"])
    peer = median(rows["acpx --version"]) if "acpx --version" in rows else None
    table = []
    for name, values in rows.items():
        med = median(values)
        target = "–"
        if name.startswith("baton run") and peer:
            verdict = "MET" if med / peer <= TARGET_RATIO else "NOT MET"
            target = f"≤ {TARGET_RATIO}× acpx: {verdict}"
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
    phases = sorted(
        ((name, median([t[name] for t in samples if name in t])) for name in samples[0]),
        key=lambda m: m[1],
    )
    marks, previous = [], 0.0
    for name, at in phases:
        marks.append([name, f"{at:.3f}", f"{at - previous:.3f}"])
        previous = at
    print_table(
        "cold start: a trivial `baton run --json` from inside (s since spawn, median of 3 per mark)",
        ["mark", "at s", "since the previous mark s"],
        marks,
    )
