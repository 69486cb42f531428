"""Entry point of ``benches/run``: every benchmark, one table each, baselines in the same run."""

from __future__ import annotations

import argparse
from pathlib import Path

from benches import (
    answers,
    cold_start,
    concurrent,
    doorbell,
    ingest,
    intake,
    slots,
    task_new,
    transports,
    web_latency,
    worktrees,
)
from benches.common import cpu_note

ONLY = (
    "ingest",
    "cold-start",
    "concurrent",
    "answers",
    "doorbell",
    "task-new",
    "web",
    "transports",
    "intake",
    "slots",
    "worktrees",
)


def main() -> None:
    parser = argparse.ArgumentParser(description="baton benchmarks")
    parser.add_argument("--quick", action="store_true", help="small sizes, one repeat")
    parser.add_argument("--only", choices=ONLY, action="append", default=None)
    parser.add_argument(
        "--repeat",
        type=int,
        default=None,
        help="repeats of ingest (default: 1 quick, 3 full) and of the worktrees bench's "
        "dispatches and checkpoints (default: 2 quick, 5 full)",
    )
    parser.add_argument(
        "--sizes",
        type=int,
        nargs="+",
        default=None,
        help="settled-task sizes of doorbell and task-new (default: 10 1000 10000; quick: 10 1000)",
    )
    parser.add_argument(
        "--fcop-samples",
        type=int,
        default=None,
        help="at most this many fcop-writer probes/samples per size in doorbell and task-new "
        "(fcop's are minutes each at 10,000; 0 skips the baseline)",
    )
    parser.add_argument(
        "--worktrees-dir",
        type=Path,
        default=None,
        help="where the worktrees bench clones its 50,000-file repository "
        "(default: /dev/shm when it has room, else the temp folder)",
    )
    args = parser.parse_args()
    chosen = set(args.only or ONLY)
    quick = args.quick
    sizes = args.sizes or (doorbell.QUICK_SIZES if quick else doorbell.SIZES)
    print(f"# baton benchmarks ({cpu_note()})")
    if "ingest" in chosen:
        repeats = args.repeat or (1 if quick else 3)
        ingest.run(20_000 if quick else 200_000, repeats)
    if "cold-start" in chosen:
        cold_start.run(3 if quick else 7)
    if "concurrent" in chosen:
        concurrent.run(
            concurrent.QUICK_SIZES if quick else concurrent.SIZES,
            1_000 if quick else 5_000,
            1 if quick else 3,
        )
    if "answers" in chosen:
        answers.run(50 if quick else 200, 1 if quick else 3)
    if "doorbell" in chosen:
        doorbell.run(
            sizes,
            doorbell.QUICK_PROBES if quick else doorbell.PROBES,
            args.fcop_samples,
        )
    if "task-new" in chosen:
        task_new.run(
            sizes,
            task_new.QUICK_SAMPLES if quick else task_new.SAMPLES,
            args.fcop_samples,
        )
    if "web" in chosen:
        web_latency.run(300 if quick else 1000)
    if "transports" in chosen:
        transports.run(3 if quick else 10)
    if "intake" in chosen:
        intake.run(quick=quick)
    if "slots" in chosen:
        slots.run(1 if quick else 3)
    if "worktrees" in chosen:
        worktrees.run(quick=quick, repeats=args.repeat, directory=args.worktrees_dir)


if __name__ == "__main__":
    main()
