"""Helpers shared by the benchmarks: medians, memory, table printing."""

from __future__ import annotations

import os
import statistics
from collections.abc import Sequence


def rss_mib() -> float:
    """Current resident set size of this process in MiB (Linux)."""
    with open("/proc/self/status", encoding="ascii") as handle:
        for line in handle:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    return float("nan")


def median(values: Sequence[float]) -> float:
    return statistics.median(values)


def print_table(title: str, headers: Sequence[str], rows: Sequence[Sequence[str]]) -> None:
    widths = [max(len(h), *(len(r[i]) for r in rows)) for i, h in enumerate(headers)]
    print(f"\n## {title}\n")
    print("| " + " | ".join(h.ljust(w) for h, w in zip(headers, widths, strict=True)) + " |")
    print("|" + "|".join("-" * (w + 2) for w in widths) + "|")
    for row in rows:
        print("| " + " | ".join(c.ljust(w) for c, w in zip(row, widths, strict=True)) + " |")


def cpu_note() -> str:
    return f"{os.cpu_count()} CPUs, load {os.getloadavg()[0]:.2f}"
