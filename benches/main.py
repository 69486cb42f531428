"""Entry point of ``benches/run``."""

from __future__ import annotations

import argparse

from benches import answers, doorbell, ingest, web_latency
from benches.common import cpu_note


def main() -> None:
    parser = argparse.ArgumentParser(description="baton benchmarks")
    parser.add_argument("--quick", action="store_true", help="small sizes, one repeat")
    parser.add_argument("--only", choices=["ingest", "answers", "doorbell", "web"], default=None)
    args = parser.parse_args()
    print(f"# baton benchmarks ({cpu_note()})")
    if args.only in (None, "ingest"):
        ingest.run(20_000 if args.quick else 200_000, 1 if args.quick else 3)
    if args.only in (None, "answers"):
        answers.run(50 if args.quick else 200, 1 if args.quick else 3)
    if args.only in (None, "doorbell"):
        doorbell.run(
            doorbell.QUICK_SIZES if args.quick else doorbell.SIZES,
            doorbell.QUICK_PROBES if args.quick else doorbell.PROBES,
        )
    if args.only in (None, "web"):
        web_latency.run(300 if args.quick else 1000)


if __name__ == "__main__":
    main()
