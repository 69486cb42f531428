"""The in-memory transport against the subprocess one: the same scenario, the same root.

Issue 10 asks that the in-memory transport (:func:`baton.testing.in_memory`) runs the
runner's work at least 3× faster than real processes. This measures what a runner test
does: open a session on the composition root (``Baton.open`` → ``open_session``), run a few
turns of the fake agent's ``ok`` scenario, close it; once with the scenario script in memory
(:class:`~baton.testing.ScenarioAgent`), once with the same script as a process
(``python -m baton.testing.fake_agent``). Both run in one process, alternating, so the
ratio compares like with like on a loaded machine; the table gives medians.
"""

from __future__ import annotations

import asyncio
import os
import shutil
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

from benches.common import median, print_table

TARGET_RATIO = 3.0
"""In-memory must be at least this many times faster (issue 10)."""

TURNS = 3
"""Prompt turns per session (a runner test opens one session and runs one to a few turns)."""


async def _session(root: Path, transport: str, turns: int) -> float:
    """Seconds for open + ``turns`` turns + close over ``transport``."""
    from baton.acp.transport import TransportFactory, spawn_subprocess
    from baton.agent_profile import AgentProfile
    from baton.app import Baton
    from baton.testing import ScenarioAgent, fake_agent_argv, in_memory

    workspace = root / "ws"
    workspace.mkdir(exist_ok=True)
    factory: TransportFactory = (
        spawn_subprocess if transport == "subprocess" else in_memory(lambda: ScenarioAgent("ok"))
    )
    profile = AgentProfile(
        name="fake", title="fake", command=tuple(fake_agent_argv("ok")), family="generic"
    )
    async with (
        Baton.open(state_dir=root / "state") as baton,
        baton.run(kind="bench", agent="fake", cwd=workspace) as run,
    ):
        run.status = "completed"
        started = time.perf_counter()
        session = await baton.open_session(
            profile,
            run=run,
            requests=baton.broker("reads", wait_timeout=0, notify=False),
            workspace=workspace,
            environ={"PATH": os.environ.get("PATH", "")},
            transport=factory,
        )
        for i in range(turns):
            outcome = await session.prompt(f"turn {i}")
            assert outcome.status == "completed", outcome
        await session.close("bench finished")
        return time.perf_counter() - started


def run(repeats: int, turns: int = TURNS) -> float:
    """Alternate both transports ``repeats`` times; print the table, return the ratio."""
    tmp = Path(tempfile.mkdtemp(prefix="baton-bench-transports-"))
    timings: dict[str, list[float]] = {"memory": [], "subprocess": []}
    try:
        for i in range(repeats):
            for transport in ("memory", "subprocess"):
                root = tmp / f"{transport}-{i}"
                root.mkdir()
                timings[transport].append(asyncio.run(_session(root, transport, turns)))
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    ms: Callable[[float], str] = lambda s: f"{s * 1000:.1f}"  # noqa: E731
    mem, sub = median(timings["memory"]), median(timings["subprocess"])
    ratio = sub / mem
    print_table(
        f"transports: open + {turns} turns + close of the fake agent's 'ok' scenario "
        f"(ms, median of {repeats})",
        ["transport", "median", "min", "max", "ratio", f"≥ {TARGET_RATIO:g}×"],
        [
            [
                "subprocess",
                ms(sub),
                ms(min(timings["subprocess"])),
                ms(max(timings["subprocess"])),
                "1.0×",
                "",
            ],
            [
                "in-memory",
                ms(mem),
                ms(min(timings["memory"])),
                ms(max(timings["memory"])),
                f"{ratio:.1f}× faster",
                "MET" if ratio >= TARGET_RATIO else "NOT MET",
            ],
        ],
    )
    return ratio


__all__ = ["TARGET_RATIO", "run"]
