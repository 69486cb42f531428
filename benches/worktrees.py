"""Task trees on their own branches, on a big repository (issue 26 item 8).

The repository is generated (:mod:`benches.git_repo`: 50,000 files, 5,000 commits and
11 task branches; ``--quick``: 2,000 files, 200 commits), cloned into a temporary
folder as the user's main checkout, and ``baton init``'s project made in it. A child
process plays ``baton up`` on it (a real :class:`~baton.team.loop.TeamLoop`: store,
journal, doorbell, executor and its handlers; ``[team] isolation = "worktree"``, the
default) with an in-memory role session that writes one file in its working folder
and files its report through baton's role tools; so every figure below goes through
baton's own code and git's, and no agent's start is in it. Four measurements, each
against a baseline timed in the same process, interleaved sample by sample:

1. **dispatch → first prompt** with a fresh worktree: from the executor starting the
   task's ``PrepareWorktree`` step (record planned, ``Workspaces.prepare``: branch and
   worktree) through the dispatch commit and the role session opened in the worktree
   to the prompt handed over (``TurnRunner.prompt_started``), for a TASK published
   to DEV while the loop runs. Baseline: ``git worktree add -b`` alone. Target ≤ 1.2×.
2. **checkpoint of a 100-file change** (95 files rewritten across the tree, 5 new):
   ``Workspaces.checkpoint`` as a turn's end calls it (git, then the record's move and
   its event). Baseline: ``git add -A && git commit`` in a worktree of the same
   repository with the same change. Target ≤ 1.5×.
3. **merge preflight against 10 live branches**: ``Repository.preflight`` of one task
   branch against the base tip and ten others (three of which conflict with it).
   Target p99 ≤ 300 ms. Baseline: the same eleven ``git merge-tree`` commands alone.
4. **memory**: the peak RSS of baton's process (``getrusage``) once set up and after
   each measurement, and the largest git process it waited for.

Where the time goes: every git command baton runs is timed by subcommand
(``Git.run`` wrapped in the child), so each figure is split into git's own work, the
other git commands baton adds, and baton's Python (store, events, session).
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import resource
import shutil
import subprocess
import sys
import tempfile
import time
from collections import defaultdict
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from benches.common import median, print_table, rss_mib
from benches.git_repo import BIG, QUICK, Shape, cached_repository, content, git_env, path_of

DISPATCH_TARGET = 1.2
CHECKPOINT_TARGET = 1.5
PREFLIGHT_P99_MS = 300.0
CHANGED = 100
NEW_FILES = 5
ROLE = "DEV"
TIMEOUT = 600.0
PROBE_BODY = "Worktree probe: write one file in your working folder, then report.\n"


class GitTimes:
    """Every ``git`` baton runs, timed by subcommand, under the phase being measured."""

    def __init__(self) -> None:
        self.phase = "setup"
        self.calls: list[tuple[str, str, float]] = []

    def install(self) -> None:
        from baton.worktrees.git import Git

        real = Git.run
        times = self

        def timed(self: Git, *args: str, **kwargs: Any) -> subprocess.CompletedProcess[bytes]:
            started = time.perf_counter()
            try:
                return real(self, *args, **kwargs)
            finally:
                name = " ".join(args[:2]) if args and args[0] == "worktree" else args[0]
                times.calls.append((times.phase, name, time.perf_counter() - started))

        Git.run = timed  # type: ignore[method-assign]

    def mark(self) -> int:
        return len(self.calls)

    def since(self, mark: int) -> list[tuple[str, float]]:
        return [(name, seconds) for _, name, seconds in self.calls[mark:]]


def _git(cwd: Path, *args: str) -> float:
    """A plain ``git`` command (a baseline), its wall time in seconds."""
    started = time.perf_counter()
    done = subprocess.run(
        ["git", *args], cwd=cwd, env=git_env(), stdout=subprocess.DEVNULL, stderr=subprocess.PIPE
    )
    if done.returncode != 0:
        raise RuntimeError(f"git {' '.join(args[:2])} failed: {done.stderr.decode()[-500:]}")
    return time.perf_counter() - started


def _change(worktree: Path, shape: Shape, round_: int) -> None:
    """A 100-file change: 95 files rewritten (spread over the tree), 5 new ones."""
    stride = max(1, shape.files // (CHANGED - NEW_FILES))
    for n in range(CHANGED - NEW_FILES):
        index = (n * stride + round_ * 7) % shape.files
        (worktree / path_of(index)).write_bytes(content(index, 5_000 + round_))
    fresh = worktree / "src" / f"new{round_:03d}"
    fresh.mkdir(parents=True, exist_ok=True)
    for n in range(NEW_FILES):
        (fresh / f"n{n}.py").write_bytes(content(n, round_))


def _maxrss_mib() -> float:
    """Peak RSS of this process (a child's own peak is useless here: Linux counts the
    parent's pages a forked git held before its exec)."""
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


class Probe:
    """An in-memory role session: one file in its working folder, then the report."""

    def __init__(self, store: Any, slot: str, cwd: Path | None, written: list[Path]) -> None:
        self.store = store
        self.slot = slot
        self.cwd = cwd
        self.written = written
        self.prompts = 0

    @property
    def session_id(self) -> str:
        return f"bench-{self.slot}"

    @property
    def process_group(self) -> int | None:
        return None

    async def prompt(self, text: str) -> Any:
        from baton.role_tools.binding import SlotAccess
        from baton.role_tools.server import RoleTools
        from baton.team.contract import TurnResult

        self.prompts += 1

        def work() -> None:
            if self.cwd is not None:
                path = self.cwd / f"probe-{self.slot}-{self.prompts}.txt"
                path.write_text("written by the bench's role session\n")
                self.written.append(path)
            RoleTools(SlotAccess(self.store, self.slot)).call(
                "write_report", {"result": "done", "body": "probe done"}
            )

        await asyncio.to_thread(work)
        return TurnResult("completed", stop_reason="end_turn", tool_calls=1)

    async def cancel(self, reason: str) -> None:
        return None

    async def close(self) -> None:
        return None


@contextlib.contextmanager
def _phase(times: GitTimes, name: str) -> Iterator[None]:
    before = times.phase
    times.phase = name
    try:
        yield
    finally:
        times.phase = before


async def _child(shape: Shape, repeats: int, samples: int, tmp: Path) -> dict[str, Any]:
    times = GitTimes()
    times.install()
    from baton.app import Baton
    from baton.events.model import CanonicalEvent, TeamTaskChanged
    from baton.fcop_port.project import init_project, open_context
    from baton.role_tools.binding import Binding
    from baton.team import steps
    from baton.team.loop import TeamLoop
    from baton.team.states import TaskState
    from baton.team_config import RoleSpec
    from baton.worktrees.model import WorktreeRecord
    from baton.worktrees.states import WorktreeState

    source = cached_repository(shape, log=False)
    main = tmp / "main"
    # A local clone: objects hard-linked from the cache (copied across file systems).
    clone_s = _git(tmp, "clone", "-q", str(source), str(main))
    refs = subprocess.run(
        ["git", "for-each-ref", "--format=%(refname:lstrip=3)", "refs/remotes/origin/bench/"],
        cwd=main,
        env=git_env(),
        capture_output=True,
        text=True,
        check=True,
    ).stdout.split()
    for name in refs:
        _git(main, "branch", "-q", name, f"origin/{name}")
    env = {**os.environ, "BATON_STATE_DIR": str(tmp / "state"), "XDG_STATE_HOME": str(tmp)}
    init_project(main, environ=env)
    ctx = open_context(main, environ=env)
    written: list[Path] = []
    prompted: dict[str, float] = {}
    prepared: dict[str, float] = {}
    prepare_s: dict[str, float] = {}
    states: dict[str, str] = {}
    changed = asyncio.Event()

    stack = contextlib.AsyncExitStack()
    baton = await stack.enter_async_context(Baton.open(main, environ=env))
    run = await stack.enter_async_context(
        baton.run(kind="up", agent="team", cwd=main, run_id="bench-worktrees")
    )
    run.status = "completed"

    async def factory(spec: RoleSpec, binding: Binding, cwd: Path | None) -> Probe:
        return Probe(baton.store, binding.session_name, cwd, written)

    def on_committed(event: CanonicalEvent) -> None:
        if isinstance(event.payload, TeamTaskChanged):
            states[event.payload.task_id] = event.payload.to_state
            changed.set()

    run.emitter.listeners.append(on_committed)
    loop = TeamLoop(
        port=ctx.port,
        team=ctx.team,
        factory=factory,
        store=baton.store,
        journal=run.emitter,
        run_id=run.run_id,
        ledger=baton.ledger,
        state_dir=ctx.state_dir,
    )
    assert loop.workspaces.enabled, "the bench's project is a git repository"
    workspaces = loop.workspaces
    perform = loop.executor.handlers.perform

    async def timed_perform(step: Any, facts: Any, slot: Any) -> Any:
        if isinstance(step, steps.PrepareWorktree):
            prepared.setdefault(step.root, time.monotonic())
        started = time.monotonic()
        try:
            return await perform(step, facts, slot)
        finally:
            if isinstance(step, steps.PrepareWorktree):
                prepare_s.setdefault(step.root, time.monotonic() - started)

    loop.executor.handlers.perform = timed_perform  # type: ignore[method-assign]

    def started(slot: str, task: str, at: float) -> None:
        prompted.setdefault(task, at)
        changed.set()

    loop.turns.prompt_started = started
    running = asyncio.create_task(loop.run())
    result: dict[str, Any] = {"shape": shape.key, "clone_s": clone_s}
    try:
        await asyncio.wait_for(loop.doorbell.ready.wait(), 120)
        await asyncio.wait_for(loop.activity.wait(lambda: loop.activity.busy <= 0), TIMEOUT)
        result["rss_setup"] = _maxrss_mib()
        result["rss_now_setup"] = rss_mib()

        # ---------------------------------------------------------- 1. dispatch
        async def probe(i: int) -> dict[str, Any]:
            mark = times.mark()
            with _phase(times, "dispatch"):
                created = await asyncio.to_thread(
                    ctx.port.create_task,
                    sender="ADMIN",
                    recipient=ROLE,
                    subject=f"worktree probe {i}",
                    body=PROBE_BODY,
                )
                task = created.task_id
                deadline = time.monotonic() + TIMEOUT
                while task not in prompted:
                    changed.clear()
                    await asyncio.wait_for(changed.wait(), deadline - time.monotonic())
            git = times.since(mark)
            times.phase = "turn end and review"
            while states.get(task) != TaskState.IN_REVIEW.value:
                if states.get(task) == TaskState.NEEDS_ATTENTION.value:
                    raise RuntimeError(f"probe {task} needs attention")
                changed.clear()
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(changed.wait(), 1.0)
                if time.monotonic() > deadline:
                    raise TimeoutError(f"probe {task} did not reach review")
            await asyncio.wait_for(
                loop.activity.wait(lambda: loop.activity.busy <= 0 and loop.events.empty()),
                TIMEOUT,
            )
            times.phase = "setup"
            return {
                "task": task,
                "seconds": prompted[task] - prepared[task],
                "prepare": prepare_s[task],
                "git": git,
            }

        dispatch: list[dict[str, Any]] = []
        worktree_add: list[float] = []
        for i in range(repeats):
            order = ("git", "baton") if i % 2 == 0 else ("baton", "git")
            for who in order:
                if who == "git":
                    base = tmp / "plain" / f"b{i}"
                    base.parent.mkdir(exist_ok=True)
                    worktree_add.append(
                        _git(main, "worktree", "add", "-q", "-b", f"plain/b{i}", str(base), "main")
                    )
                else:
                    dispatch.append(await probe(i))
        trees = main / ".baton" / "worktrees"
        assert len(written) == repeats and all(p.is_relative_to(trees) for p in written), (
            "every probe wrote in its own worktree, never in the main checkout"
        )
        result["dispatch"] = dispatch
        result["worktree_add"] = worktree_add
        result["rss_dispatch"] = _maxrss_mib()

        # -------------------------------------------------------- 2. checkpoint
        root = dispatch[-1]["task"]
        record = workspaces.get(root)
        assert record is not None and record.state is WorktreeState.LIVE
        ours, plain = record.worktree, tmp / "plain" / f"b{repeats - 1}"
        checkpoint: list[dict[str, Any]] = []
        commit: list[float] = []
        for r in range(repeats + 2):  # round 0 warms both (the index after a fresh checkout)
            order = ("git", "baton") if r % 2 == 0 else ("baton", "git")
            for who in order:
                if who == "git":
                    _change(plain, shape, r)
                    seconds = _git(plain, "add", "-A") + _git(
                        plain, "commit", "-q", "-m", f"bench round {r}"
                    )
                    if r:
                        commit.append(seconds)
                else:
                    _change(ours, shape, r)
                    mark = times.mark()
                    with _phase(times, "checkpoint"):
                        at = time.perf_counter()
                        after = await workspaces.checkpoint(root, f"bench checkpoint {r}")
                        seconds = time.perf_counter() - at
                    assert after is not None and after.head_commit != record.head_commit
                    record = after
                    if r:
                        checkpoint.append({"seconds": seconds, "git": times.since(mark)})
        for path in (ours, plain):
            assert not subprocess.run(
                ["git", "status", "--porcelain"],
                cwd=path,
                env=git_env(),
                capture_output=True,
                check=True,
            ).stdout, f"{path} is not clean after its checkpoint"
        result["checkpoint"] = checkpoint
        result["commit"] = commit
        result["rss_checkpoint"] = _maxrss_mib()

        # --------------------------------------------------------- 3. preflight
        repo = workspaces._repo()
        base_tip = repo.resolve("refs/heads/main")
        assert base_tip is not None
        branches = sorted(r for r in refs if r.startswith("bench/task-"))
        records = []
        for name in branches:
            head = repo.resolve(f"refs/heads/{name}")
            assert head is not None
            records.append(
                WorktreeRecord(
                    root_task=name,
                    state=WorktreeState.LIVE,
                    branch=name,
                    path=str(tmp / "none" / name),
                    base_ref="refs/heads/main",
                    base_commit=base_tip,
                    created_at="",
                    updated_at="",
                    head_commit=head,
                )
            )
        ours_record, others = records[0], records[1:]
        pairs = [(base_tip, ours_record.head_commit)] + [
            (o.head_commit, ours_record.head_commit) for o in others
        ]
        preflight: list[float] = []
        merge_tree: list[float] = []
        conflicts: dict[str, Any] = {}
        for s in range(samples + 1):  # sample 0 warms both
            order = ("git", "baton") if s % 2 == 0 else ("baton", "git")
            for who in order:
                if who == "git":
                    seconds = sum(
                        _run_status(main, "merge-tree", "--write-tree", "--name-only", "-z", a, b)
                        for a, b in pairs
                        if a is not None and b is not None
                    )
                    if s:
                        merge_tree.append(seconds)
                else:
                    with _phase(times, "preflight"):
                        at = time.perf_counter()
                        found = await asyncio.to_thread(repo.preflight, ours_record, others)
                        seconds = time.perf_counter() - at
                    conflicts = {
                        "base": list(found.base_conflicts),
                        "branches": {k: list(v) for k, v in found.branch_conflicts.items()},
                    }
                    if s:
                        preflight.append(seconds)
        result["preflight"] = preflight
        result["merge_tree"] = merge_tree
        result["conflicts"] = conflicts
        result["others"] = len(others)
        result["rss_preflight"] = _maxrss_mib()
        result["rss_now_end"] = rss_mib()
        result["git_calls"] = [list(c) for c in times.calls]
    finally:
        loop.stop("bench done")
        await asyncio.wait_for(running, 120)
        await stack.aclose()
    return result


def _run_status(cwd: Path, *args: str) -> float:
    """A git command whose exit 1 is an answer (``merge-tree``: conflicts), its time."""
    started = time.perf_counter()
    out = subprocess.run(["git", *args], cwd=cwd, env=git_env(), capture_output=True, check=False)
    if out.returncode not in (0, 1):
        raise RuntimeError(f"git {args[0]} failed: {out.stderr[-500:]!r}")
    return time.perf_counter() - started


def where(shape: Shape, repeats: int, chosen: Path | None = None) -> Path | None:
    """Where the checkouts go: ``chosen``, else tmpfs (``/dev/shm``) when it has room.

    On a shared machine the disk's queue belongs to everyone: a 50,000-file checkout
    took 3–12 s there, and removing a run's worktrees 20 minutes. In memory, git's and
    baton's own work is what is timed (git's part is smaller, so the ratios are the
    stricter ones). ``--worktrees-dir`` measures on a disk."""
    if chosen is not None:
        return chosen
    shm = Path("/dev/shm")
    need = shape.files * 4096 * (2 * repeats + 3)  # a block a file, every checkout
    if shm.is_dir() and shutil.disk_usage(shm).free > 2 * need:
        return shm
    return None


def _measure(shape: Shape, repeats: int, samples: int, parent: Path | None) -> dict[str, Any]:
    with tempfile.TemporaryDirectory(prefix="baton-worktrees-", dir=parent) as tmp:
        try:
            out = subprocess.run(
                [
                    sys.executable,
                    "-m",
                    "benches.worktrees",
                    json.dumps([shape.files, shape.commits, repeats, samples]),
                    tmp,
                ],
                capture_output=True,
                text=True,
                timeout=TIMEOUT * 4,
                check=False,
            )
        finally:  # 50,000-file worktrees: git's own removal is not needed, rmtree is
            shutil.rmtree(tmp, ignore_errors=True)
    if out.returncode != 0:
        raise RuntimeError(f"worktrees bench child failed:\n{out.stderr[-4000:]}")
    result: dict[str, Any] = json.loads(out.stdout.strip().splitlines()[-1])
    return result


def _pct(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, max(0, round(q * (len(ordered) - 1))))]


def _split(samples: list[dict[str, Any]], heavy: set[str]) -> tuple[float, float, float, int]:
    """Medians of (git's own work: the ``heavy`` commands, the other git commands baton
    runs, baton's Python), and how many other git commands a sample ran."""
    main_s, other_s, rest_s, counts = [], [], [], []
    for sample in samples:
        calls = [(name, seconds) for name, seconds in sample["git"]]
        heavy_s = sum(s for n, s in calls if n in heavy)
        others = [s for n, s in calls if n not in heavy]
        main_s.append(heavy_s)
        other_s.append(sum(others))
        rest_s.append(sample["seconds"] - heavy_s - sum(others))
        counts.append(len(others))
    return median(main_s), median(other_s), median(rest_s), round(median(counts))


def _git_total(sample: dict[str, Any], names: set[str]) -> float:
    return float(sum(seconds for name, seconds in sample["git"] if name in names))


def run(
    quick: bool = False,
    repeats: int | None = None,
    samples: int | None = None,
    directory: Path | None = None,
) -> dict[str, Any]:
    """Generate (or reuse) the repository, measure in a child process, print the tables."""
    shape = QUICK if quick else BIG
    repeats = repeats or (2 if quick else 5)
    samples = samples or (10 if quick else 100)
    cached_repository(shape)
    parent = where(shape, repeats, directory)
    place = parent or Path(tempfile.gettempdir())
    load_before = os.getloadavg()[0]
    result = _measure(shape, repeats, samples, parent)
    load_after = os.getloadavg()[0]
    load = f"load {load_before:.1f}→{load_after:.1f}, {os.cpu_count()} CPUs, checkouts in {place}"

    dispatch = [d["seconds"] for d in result["dispatch"]]
    add = result["worktree_add"]
    add_s, other_s, rest_s, n_other = _split(result["dispatch"], {"worktree add"})
    ratio_dispatch = median(dispatch) / median(add)
    checkpoint = [c["seconds"] for c in result["checkpoint"]]
    commit = result["commit"]
    ratio_checkpoint = median(checkpoint) / median(commit)
    preflight_ms = [s * 1000 for s in result["preflight"]]
    merge_tree_ms = [s * 1000 for s in result["merge_tree"]]
    p99 = _pct(preflight_ms, 0.99)

    def verdict(ok: bool) -> str:
        return "MET" if ok else "**NOT MET**"

    rows = [
        [
            f"dispatch → first prompt, fresh worktree (median of {len(dispatch)})",
            f"{median(dispatch):.3f} s",
            f"`git worktree add` {median(add):.3f} s",
            f"{ratio_dispatch:.2f}×",
            f"≤ {DISPATCH_TARGET}×",
            verdict(ratio_dispatch <= DISPATCH_TARGET),
        ],
        [
            f"checkpoint of a {CHANGED}-file change (median of {len(checkpoint)})",
            f"{median(checkpoint):.3f} s",
            f"`git add -A && git commit` {median(commit):.3f} s",
            f"{ratio_checkpoint:.2f}×",
            f"≤ {CHECKPOINT_TARGET}×",
            verdict(ratio_checkpoint <= CHECKPOINT_TARGET),
        ],
        [
            f"merge preflight vs base + {result['others']} branches, p50 / p99 "
            f"({len(preflight_ms)} samples)",
            f"{median(preflight_ms):.0f} / {p99:.0f} ms",
            f"{result['others'] + 1} × "
            f"`git merge-tree` {median(merge_tree_ms):.0f} / {_pct(merge_tree_ms, 0.99):.0f} ms",
            f"{median(preflight_ms) / median(merge_tree_ms):.2f}×",
            f"p99 ≤ {PREFLIGHT_P99_MS:.0f} ms",
            verdict(p99 <= PREFLIGHT_P99_MS),
        ],
        [
            "baton's peak RSS: set up → after 1 / 2 / 3",
            f"{result['rss_setup']:.1f} → {result['rss_dispatch']:.1f} / "
            f"{result['rss_checkpoint']:.1f} / {result['rss_preflight']:.1f} MiB",
            f"RSS now {result['rss_now_setup']:.1f} → {result['rss_now_end']:.1f} MiB",
            f"+{result['rss_preflight'] - result['rss_setup']:.1f} MiB",
            "–",
            "–",
        ],
    ]
    print_table(
        f"Worktrees on {shape.files:,} files / {shape.commits:,} commits ({load}; "
        f"clone {result['clone_s']:.1f} s)",
        ["measurement", "baton", "baseline, same run", "ratio", "target", "verdict"],
        rows,
    )
    c_main, c_other, c_rest, c_n = _split(result["checkpoint"], {"add", "commit"})
    by_name: dict[str, list[float]] = defaultdict(list)
    for phase, name, seconds in result["git_calls"]:
        by_name[f"{phase}: {name}"].append(seconds)
    own_dispatch = median(
        [d["seconds"] / _git_total(d, {"worktree add"}) for d in result["dispatch"]]
    )
    own_checkpoint = median(
        [c["seconds"] / _git_total(c, {"add", "commit"}) for c in result["checkpoint"]]
    )
    split_rows = [
        [
            "dispatch → prompt",
            f"{median(dispatch):.3f}",
            f"worktree add {add_s:.3f}",
            f"{other_s:.3f} ({n_other} commands)",
            f"{rest_s:.3f}",
            f"{own_dispatch:.3f}×",
        ],
        [
            "checkpoint",
            f"{median(checkpoint):.3f}",
            f"add -A, commit {c_main:.3f}",
            f"{c_other:.3f} ({c_n} commands)",
            f"{c_rest:.3f}",
            f"{own_checkpoint:.3f}×",
        ],
    ]
    print_table(
        "Where the time goes (medians, seconds): git's own work (what the baseline runs), "
        "the other git commands baton runs, baton's Python (store, events, session); "
        "each sample ÷ its own git work (baton's overhead without the run-to-run noise)",
        ["figure", "total", "git's work", "baton's other git", "baton's Python", "÷ git's work"],
        split_rows,
    )
    calls_rows = [
        [
            key,
            str(len(values)),
            f"{median(values) * 1000:.1f}",
            f"{max(values) * 1000:.1f}",
        ]
        for key, values in sorted(by_name.items())
        if not key.startswith("setup")
    ]
    print_table(
        "Every git command baton ran, by phase (ms)",
        ["phase: command", "count", "median", "max"],
        calls_rows,
    )
    print(
        f"\npreflight conflicts found: base {result['conflicts']['base']}, "
        f"branches {sorted(result['conflicts']['branches'])}"
    )
    return {
        "dispatch_ratio": ratio_dispatch,
        "checkpoint_ratio": ratio_checkpoint,
        "preflight_p99_ms": p99,
        "rss_peak_mib": result["rss_preflight"],
    }


if __name__ == "__main__":
    if len(sys.argv) == 3:
        files, commits, repeats_, samples_ = json.loads(sys.argv[1])
        shape_ = BIG if (files, commits) == (BIG.files, BIG.commits) else QUICK
        print(json.dumps(asyncio.run(_child(shape_, repeats_, samples_, Path(sys.argv[2])))))
    else:
        run(quick="--quick" in sys.argv)  # the whole bench: benches/run --only worktrees
