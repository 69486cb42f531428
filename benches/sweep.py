"""The intake sweeper over a long history: a pass over unchanged files, full vs feed.

Issue 15: every sweeper pass (start, every 5 s, after every turn) listed and
``lstat``\\ ed the whole screened surface, ~7 files per settled task. This builds
that surface (``--files``, default 70,000: 10,000 settled tasks) under a temporary
``fcop/``, primes a sweeper with every file passed (a stand-in worker that passes
every file it is asked about: the passes measured open nothing either way), then
times passes over the unchanged workspace:

* **full**: ``Sweeper(watch=False)``, today's pass (the baseline);
* **feed**: ``Sweeper(watch=True)``, the change feed's pass (inotify read, nothing
  reported, nothing listed);
* **feed, 10 changed**: the same after 10 files were rewritten in place.

Wall and process CPU time per pass, median of ``--repeat`` (5), with the machine's
load. Run: ``.venv/bin/python -m benches.sweep``; with ``PYTHONPATH=<an older
baton's src>:.`` it times that baton's full pass alone (the before figure).
"""

from __future__ import annotations

import argparse
import inspect
import os
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

from baton.intake.screen import Screened
from baton.intake.stability import FileFacts
from baton.intake.sweep import APPEND_BUCKETS, Sweeper
from baton.intake.worker import ParseWorker, WorkerResult
from benches.common import cpu_note, median, print_table

STAGES = ("active", "review", "done", "archive")


class PassEverything(ParseWorker):
    """Screens nothing: every file passes with its own facts (opened, never parsed)."""

    def _result(self, path: Path) -> WorkerResult:
        facts = FileFacts.of(path.lstat())
        return WorkerResult(Screened("bench", path.stem, "", facts.size), facts, facts)

    def screen_envelope(self, path: Path, **kwargs: object) -> WorkerResult:
        return self._result(path)

    def screen_json(self, path: Path) -> WorkerResult:
        return self._result(path)


def build(root: Path, files: int) -> list[Path]:
    """``files`` files spread over the screened directories, in Core's names."""
    fcop = root / "fcop"
    directories = [(fcop / "_lifecycle" / s, "TASK-", ".md") for s in STAGES]
    directories += [(fcop / d, p, ".md") for d, p in APPEND_BUCKETS]
    directories.append((fcop / "operations", "op-", ".json"))
    made: list[Path] = []
    for n in range(files):
        directory, prefix, suffix = directories[n % len(directories)]
        directory.mkdir(parents=True, exist_ok=True)
        path = directory / f"{prefix}{n:08d}{suffix}"
        path.write_bytes(b"---\ntype: X\n---\n" if suffix == ".md" else b"{}")
        made.append(path)
    old = time.time() - 3600  # past the settle window
    for path in made:
        os.utime(path, (old, old))
    return made


def timed(sweep: Callable[[], object], repeat: int) -> tuple[float, float]:
    walls, cpus = [], []
    for _ in range(repeat):
        wall, cpu = time.perf_counter(), time.process_time()
        sweep()
        walls.append(time.perf_counter() - wall)
        cpus.append(time.process_time() - cpu)
    return median(walls), median(cpus)


def run(files: int, repeat: int) -> None:
    with tempfile.TemporaryDirectory(prefix="baton-sweep-") as tmp:
        root = Path(tmp)
        made = build(root, files)
        worker = PassEverything()
        full = Sweeper(root, worker=worker, wall_clock=lambda: time.time() + 10)
        assert full.sweep().seen == files
        load_before = os.getloadavg()[0]
        full_wall, full_cpu = timed(full.sweep, repeat)
        if "watch" not in inspect.signature(Sweeper).parameters:  # an older baton's src
            print(
                f"full pass only (no feed here): {full_wall * 1e3:.1f} ms wall, "
                f"{full_cpu * 1e3:.1f} ms CPU, load {load_before:.2f}"
            )
            return
        feed = Sweeper(root, worker=worker, wall_clock=lambda: time.time() + 10, watch=True)
        try:
            assert feed.sweep().seen == files
            feed_wall, feed_cpu = timed(feed.sweep, repeat)
            quiet = feed.sweep()
            assert not quiet.full and quiet.seen == 0, quiet

            def changed() -> object:
                for path in made[:10]:
                    with path.open("ab") as handle:
                        handle.write(b"\n")
                result = feed.sweep(require_stable=False)
                assert not result.full and result.screened == 10, result
                return result

            ten_wall, ten_cpu = timed(changed, repeat)
            load_after = os.getloadavg()[0]
        finally:
            feed.close()
    rows = [
        [
            "full (start, backstop, no inotify)",
            f"{full_wall * 1e3:.1f}",
            f"{full_cpu * 1e3:.1f}",
            "1",
        ],
        [
            "feed, unchanged",
            f"{feed_wall * 1e3:.3f}",
            f"{feed_cpu * 1e3:.3f}",
            f"{full_wall / feed_wall:,.0f}",
        ],
        [
            "feed, 10 changed (incl. the writes)",
            f"{ten_wall * 1e3:.2f}",
            f"{ten_cpu * 1e3:.2f}",
            f"{full_wall / ten_wall:,.0f}",
        ],
    ]
    print_table(
        f"intake sweeper, one pass over {files:,} files (median of {repeat}, "
        f"load {load_before:.2f} -> {load_after:.2f})",
        ["pass", "wall ms", "CPU ms", "full wall / this"],
        rows,
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--files", type=int, default=70_000)
    parser.add_argument("--repeat", type=int, default=5)
    args = parser.parse_args()
    print(f"# baton intake sweep ({cpu_note()})")
    run(args.files, args.repeat)


if __name__ == "__main__":
    main()
