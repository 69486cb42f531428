"""Role-slot memory: baton's own memory in ``baton up`` with 1, 2 and 4 busy role slots.

Each measurement is a fresh child process playing ``baton up``: ``baton init``'s
project (every role on the built-in agent), one TASK per measured role (DEV, then QA,
OPS, PM) whose runbook makes the agent call ``read_task`` through baton's role MCP tools
and then file its report with ``write_report``, and the real
:func:`~baton.team.service.run_team` (team loop, real ACP sessions, reaper). Once every
TASK has reached review, the sessions are still open (a role session is long-lived, and
the built-in agent keeps its MCP connection for the session), and the child reads
``/proc/<pid>/smaps_rollup`` of baton's processes: the daemon itself plus the role MCP
processes the agents started (``stdio_shim.py`` or ``baton.role_tools.slot_server``); the
agents themselves are not counted. RSS counts shared pages in every process; PSS divides
them among the processes sharing them (what the slots really add).

Two modes in the same run, interleaved: ``server`` (before: one ``role_mcp`` Python
process per slot, each with the ``mcp`` SDK, the store and ``fcop``) and ``hub`` (now:
every slot's tools in the daemon, a stdlib-only shim per slot). Per extra slot is
``(total at 4 - total at 1) / 3`` of the medians. Target (issue 15): ≤ 15 MiB.
"""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from benches.common import median, print_table

SIZES = (1, 2, 4)
ROLES = ("DEV", "QA", "OPS", "PM")
MODES = ("server", "hub")
TARGET_MIB = 15.0
MARKERS = (b"stdio_shim.py", b"baton.role_tools.slot_server")
PROBE_BODY = (
    "Role-slot probe: read the task through baton's MCP tools, then report.\n\n"
    "```mcp read_task\n```\n"
)
TIMEOUT = 300.0


def _rollup(pid: int) -> tuple[float, float]:
    """(RSS, PSS) of ``pid`` in MiB, from ``/proc/<pid>/smaps_rollup``."""
    rss = pss = 0
    with open(f"/proc/{pid}/smaps_rollup", encoding="ascii") as handle:
        for line in handle:
            if line.startswith("Rss:"):
                rss = int(line.split()[1])
            elif line.startswith("Pss:"):
                pss = int(line.split()[1])
    return rss / 1024, pss / 1024


def _descendants(root: int) -> list[int]:
    children: dict[int, list[int]] = {}
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            stat = Path(f"/proc/{entry}/stat").read_text()
        except OSError:
            continue
        ppid = int(stat.rpartition(")")[2].split()[1])
        children.setdefault(ppid, []).append(int(entry))
    found, todo = [], [root]
    while todo:
        for child in children.get(todo.pop(), []):
            found.append(child)
            todo.append(child)
    return found


def _mcp_processes() -> list[int]:
    pids = []
    for pid in _descendants(os.getpid()):
        try:
            cmdline = Path(f"/proc/{pid}/cmdline").read_bytes()
        except OSError:
            continue
        if any(marker in cmdline for marker in MARKERS):
            pids.append(pid)
    return pids


async def _child(mode: str, slots: int, tmp: Path) -> dict[str, Any]:
    """One ``baton up`` with ``slots`` busy role slots; baton's memory once all reported."""
    from baton.app import Baton
    from baton.events.model import CanonicalEvent, TeamTaskChanged
    from baton.fcop_port.project import init_project, open_context
    from baton.team.loop import TeamLoop
    from baton.team.service import run_team
    from baton.team.states import TaskState

    project = tmp / "ws"
    project.mkdir()
    env = {**os.environ, "BATON_STATE_DIR": str(tmp / "state"), "XDG_STATE_HOME": str(tmp)}
    os.environ["XDG_STATE_HOME"] = str(tmp)
    init_project(project, environ=env)
    ctx = open_context(project, environ=env)
    tasks = {
        ctx.port.create_task(
            sender="ADMIN", recipient=role, subject=f"slot probe {role}", body=PROBE_BODY
        ).task_id
        for role in ROLES[:slots]
    }
    in_review: set[str] = set()
    changed = asyncio.Event()

    def on_committed(event: CanonicalEvent) -> None:
        payload = event.payload
        if isinstance(payload, TeamTaskChanged) and payload.to_state == TaskState.IN_REVIEW.value:
            in_review.add(payload.task_id)
            changed.set()

    loops: list[TeamLoop] = []
    async with (
        Baton.open(project, environ=env) as baton,
        baton.run(kind="up", agent="team", cwd=project, run_id=f"bench-slots-{mode}") as run,
    ):
        run.status = "completed"
        run.emitter.listeners.append(on_committed)
        team = asyncio.create_task(
            run_team(
                ctx,
                baton.config,
                store=baton.store,
                ledger=baton.ledger,
                emitter=run.emitter,
                until_idle=False,
                on_loop=loops.append,
                role_mcp=mode,  # type: ignore[arg-type]
            )
        )
        deadline = time.monotonic() + TIMEOUT
        while not tasks <= in_review:
            if team.done():
                team.result()
                raise RuntimeError("the team loop ended before every probe reported")
            changed.clear()
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                raise TimeoutError(f"{len(tasks - in_review)} probes did not reach review")
            try:
                await asyncio.wait_for(changed.wait(), min(remaining, 1.0))
            except TimeoutError:
                continue
        mcp = _mcp_processes()
        daemon = _rollup(os.getpid())
        side = [_rollup(pid) for pid in mcp]
        loops[0].stop("bench done")
        await asyncio.wait_for(team, 60)
    return {
        "mode": mode,
        "slots": slots,
        "mcp_processes": len(mcp),
        "daemon_rss": daemon[0],
        "daemon_pss": daemon[1],
        "mcp_rss": sum(s[0] for s in side),
        "mcp_pss": sum(s[1] for s in side),
    }


def _measure(mode: str, slots: int) -> dict[str, Any]:
    with tempfile.TemporaryDirectory(prefix="baton-slots-") as tmp:
        out = subprocess.run(
            [sys.executable, "-m", "benches.slots", mode, str(slots), tmp],
            capture_output=True,
            text=True,
            timeout=TIMEOUT + 120,
            check=False,
        )
    if out.returncode != 0:
        raise RuntimeError(f"slots bench child ({mode}, {slots}) failed:\n{out.stderr[-4000:]}")
    result: dict[str, Any] = json.loads(out.stdout.strip().splitlines()[-1])
    return result


def run(repeats: int = 3, sizes: Sequence[int] = SIZES) -> dict[str, Any]:
    """Measure both modes, interleaved, ``repeats`` times each; print the table."""
    samples: dict[tuple[str, int], list[dict[str, Any]]] = {}
    loads = []
    for _ in range(repeats):
        for slots in sizes:
            for mode in MODES:
                loads.append(os.getloadavg()[0])
                samples.setdefault((mode, slots), []).append(_measure(mode, slots))
    rows = []
    totals: dict[tuple[str, int], tuple[float, float]] = {}
    for mode in MODES:
        for slots in sizes:
            got = samples[(mode, slots)]
            d_rss = median([s["daemon_rss"] for s in got])
            d_pss = median([s["daemon_pss"] for s in got])
            m_rss = median([s["mcp_rss"] for s in got])
            m_pss = median([s["mcp_pss"] for s in got])
            t_rss = median([s["daemon_rss"] + s["mcp_rss"] for s in got])
            t_pss = median([s["daemon_pss"] + s["mcp_pss"] for s in got])
            totals[(mode, slots)] = (t_rss, t_pss)
            rows.append(
                [
                    mode,
                    str(slots),
                    str(got[0]["mcp_processes"]),
                    f"{d_rss:.1f} / {d_pss:.1f}",
                    f"{m_rss:.1f} / {m_pss:.1f}",
                    f"{t_rss:.1f} / {t_pss:.1f}",
                ]
            )
    lo, hi = min(sizes), max(sizes)
    per_slot = {
        mode: tuple((totals[(mode, hi)][i] - totals[(mode, lo)][i]) / (hi - lo) for i in range(2))
        for mode in MODES
    }
    for mode in MODES:
        rss, pss = per_slot[mode]
        rows.append([mode, "per extra slot", "", "", "", f"{rss:.1f} / {pss:.1f}"])
    hub_pss = per_slot["hub"][1]
    print_table(
        f"Role slots: baton's memory in MiB, RSS / PSS, median of {repeats} "
        f"(load {min(loads):.2f}–{max(loads):.2f}); hub per extra slot {hub_pss:.1f} MiB PSS, "
        f"{per_slot['hub'][0]:.1f} RSS (target ≤ {TARGET_MIB:g}); "
        f"{per_slot['server'][1] / max(hub_pss, 0.01):.1f}× less than the per-slot server",
        ["mode", "slots", "MCP processes", "daemon", "MCP processes'", "baton total"],
        rows,
    )
    return {"per_slot": per_slot, "totals": {f"{m}:{n}": v for (m, n), v in totals.items()}}


if __name__ == "__main__":
    if len(sys.argv) == 4:
        print(json.dumps(asyncio.run(_child(sys.argv[1], int(sys.argv[2]), Path(sys.argv[3])))))
    else:
        run(int(sys.argv[1]) if len(sys.argv) > 1 else 3)
