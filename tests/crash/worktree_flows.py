"""The crash-point harness on task trees with their own branch and worktree (issue 26).

A project that is a git repository with a commit, ``[team] isolation = "worktree"``
(the default there), and one uncommitted edit of the user's own in a file no task
touches. ADMIN gives DEV a task whose runbook (the built-in agent) writes files in
its working folder, which is the tree's worktree. Two flows, each driven through the
real CLI by restarting ``baton up`` until it ends:

* **merge**: the tree is made, the turn writes and is checkpointed, the review reaches
  the inbox, the harness approves it (``baton answer … --approve``), the branch is merged
  into ``main`` in the main checkout and the worktree removed;
* **drop**: the same up to the review; then a ``baton up`` (without ``--until-idle``)
  runs, and once it is past its recovery a file is left uncommitted in the worktree and
  the drop asked through the control row (:func:`baton.team.controls.request_drop`, what
  ``baton task drop`` does while the team runs; the harness stops that ``baton up`` once
  the drop is recorded): the tree's head, the uncommitted file included, is saved under
  ``refs/baton/salvage/<task>`` and the worktree removed.

``baton up`` is killed (SIGKILL) before and after every git step of the tree's life
(``baton.crashpoints``: ``worktree.create``, ``.checkpoint``, ``.merge``, ``.remove``,
``.salvage.checkpoint``, ``.salvage.save``, ``.salvage.remove``, each ``.before`` and
``.after``; and at the drop's ISSUE, written between the TASKs' drop and the salvage).
The CI share (``test_worktree_crash_points.py``) meets them one after the other in one
flow per kind (each restart recovers from the previous kill and meets the next point,
often inside that recovery), with two random kills each; ``--long`` adds one flow per
boundary (met on the way an undisturbed run takes) and flows of random kills (a random
delay, or the Nth durable write of any kind, before and after the human acts). After
every kill, and again after every run that came back at rest, it checks:

1. **no commit lost**: every commit that was ever the head of a task branch (from the
   ``team.worktree.changed`` events, the branches' reflogs, and the branches and salvage
   refs as seen after every run) is reachable from a branch or a salvage ref; at rest
   every live worktree is clean (what the agent wrote is committed); at the end what the
   agent wrote (and the uncommitted file of the drop) is on ``main`` or under the salvage ref;
2. **tree ↔ record**: no registered worktree (nor folder under ``.baton/worktrees``)
   without its record; at rest no record is ``creating``, ``merging``, ``merged`` or
   ``salvaging``, and ``git worktree list`` is exactly the ``live`` records;
3. **never half-merged**: ``main`` is its first commit or a recorded merge commit (and
   never goes back), the main checkout is on ``main``, holds no merge (``MERGE_HEAD``)
   or other operation in progress nor a left ``index.lock``, and its working tree is
   clean except the user's edit, byte for byte (FCoP's files and ``.baton/`` are
   baton's own, written there by design);
4. **one stage + valid** and **no double run** as in the release flow, and **finishes**:
   the TASK is done with the work on ``main`` (merge), or dropped with its work saved
   (drop).
"""

from __future__ import annotations

import collections
import contextlib
import json
import os
import random
import signal
import sqlite3
import subprocess
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Literal

from tests.crash.harness import (
    UP_TIMEOUT,
    InvariantBroken,
    Kill,
    Project,
    Tally,
    _check_one_stage,
    _reapers_of,
    check_after_kill,
    run_up,
)
from tests.support.project import commit_all

FlowKind = Literal["merge", "drop"]

INVARIANTS = (
    "no commit lost",
    "tree ↔ record",
    "never half-merged",
    "one stage + valid",
    "no double run",
    "finishes",
    "no orphan",
)


def _points(*steps: str) -> tuple[str, ...]:
    return tuple(f"worktree.{step}.{when}" for step in steps for when in ("before", "after"))


MERGE_POINTS = _points("create", "checkpoint", "merge", "remove")
"""Every git step of a tree that is approved, in the order a flow meets them."""
DROP_POINTS = _points("salvage.checkpoint", "salvage.save", "salvage.remove")
"""Every git step of a tree that is dropped (its create and checkpoints are the merge's)."""
TRANSIENT = ("creating", "merging", "merged", "salvaging")
"""Record states recovery never leaves behind (``merged``: the worktree still to remove)."""
BASE = "refs/heads/main"
USER_FILE = "NOTES.md"
USER_EDIT = "A line of the user's own, never committed, that baton must not touch.\n"
SCRATCH = "scratch.txt"
"""Left uncommitted in the worktree before the drop: the salvage must keep it."""
BATON_OWN = ("fcop/", ".baton/")
"""What baton itself writes in the main checkout (the FCoP workspace, its state)."""


@dataclass(frozen=True)
class Spec:
    kind: FlowKind
    subject: str
    files: dict[str, str]
    """What the agent's step writes (path → content), in its working folder."""

    @property
    def runbook(self) -> str:
        writes = " && ".join(
            f"printf '%s\\n' '{text}' > {path}" for path, text in self.files.items()
        )
        return (
            f"{self.subject}.\n\n```sh\nmkdir -p src counters && {writes} "
            "&& date +%s.%N >> counters/DEV.log\n```\n"
        )


SPECS: dict[FlowKind, Spec] = {
    "merge": Spec(
        "merge",
        "Add the feature",
        {"src/feature.py": "VALUE = 1", "docs-feature.md": "the feature, by DEV"},
    ),
    "drop": Spec(
        "drop",
        "Try an idea",
        {"src/idea.py": "IDEA = 2", "docs-idea.md": "an idea, by DEV"},
    ),
}


def _run_git(root: Path, *args: str) -> subprocess.CompletedProcess[str]:
    env = {
        "PATH": os.environ["PATH"],
        "HOME": str(root.parent / "home"),
        "LC_ALL": "C",
        "GIT_OPTIONAL_LOCKS": "0",  # the harness's looking never takes the index lock
    }
    return subprocess.run(
        ["git", *args], cwd=root, capture_output=True, text=True, env=env, check=False
    )


def _git(root: Path, *args: str, check: bool = True) -> str:
    """stdout without its last newline ("" when the command failed and ``check`` is off)."""
    done = _run_git(root, *args)
    if check and done.returncode != 0:
        raise RuntimeError(f"git {' '.join(args)}: {done.stderr.strip()}")
    return done.stdout.rstrip("\n") if done.returncode == 0 else ""


def create_project(base: Path, index: int, spec: Spec) -> Project:
    """A repository with one commit of the user's (``baton init`` committed as it says),
    the user's uncommitted edit, and ADMIN's TASK for DEV."""
    root = base / f"wt-{index}" / "repo"
    home = base / f"wt-{index}" / "home"
    root.mkdir(parents=True)
    home.mkdir()
    subprocess.run(["git", "init", "-q", "-b", "main", str(root)], check=True)
    project = Project(root, home, index)
    done = project.baton("init")
    if done.returncode != 0:
        raise RuntimeError(f"baton init failed: {done.stderr}")
    if 'isolation = "worktree"' not in (root / "baton.toml").read_text():
        raise RuntimeError("baton init no longer makes worktree isolation the default")
    (root / USER_FILE).write_text("The user's notes.\n")
    (root / "README.md").write_text("A project.\n")
    commit_all(root)
    with (root / USER_FILE).open("a") as notes:
        notes.write(USER_EDIT)
    body = base / f"wt-{index}" / "TASK.md"
    body.write_text(spec.runbook)
    created = project.baton(
        "task", "new", "--to", "DEV", "--subject", spec.subject, "--body-file", str(body)
    )
    if created.returncode != 0:
        raise RuntimeError(f"task new failed: {created.stderr}")
    return project


@dataclass
class Flow:
    """One flow's project and what the harness has seen of its git history."""

    project: Project
    spec: Spec
    tally: Tally
    base_commit: str
    heads: set[str] = field(default_factory=set)
    """Every commit seen as the head of a task branch (or under a salvage ref)."""
    bases: list[str] = field(default_factory=list)
    """``main`` as seen after each run (it only ever moves forward)."""
    answered: bool = False
    dropping: bool = False
    posted: bool = False
    killed: list[str] = field(default_factory=list)
    """Every kill point of this flow (its finishing is theirs)."""

    @property
    def root(self) -> Path:
        return self.project.root

    def git(self, *args: str, check: bool = True) -> str:
        return _git(self.root, *args, check=check)

    def query(self, sql: str, params: tuple[str, ...] = ()) -> list[sqlite3.Row]:
        """Rows of the store ([] before the first ``baton up`` made it: a kill during
        its start may leave no store, or one without its tables yet). Opened read-write
        (never created) and queried only: right after a kill SQLite may have to rebuild
        the WAL index, which a ``mode=ro`` open cannot do."""
        path = self.root / ".baton" / "baton.db"
        if not path.exists():
            return []
        db = sqlite3.connect(f"file:{path}?mode=rw", uri=True, timeout=60)
        try:
            db.row_factory = sqlite3.Row
            db.execute("PRAGMA query_only = 1")
            return db.execute(sql, params).fetchall()
        except sqlite3.OperationalError as exc:
            if "no such table" in str(exc):
                return []
            raise
        finally:
            db.close()

    def records(self) -> list[dict[str, str | None]]:
        return [dict(r) for r in self.query("SELECT * FROM team_worktrees")]

    def task_state(self, task_id: str) -> str | None:
        rows = self.query("SELECT state FROM team_tasks WHERE task_id = ?", (task_id,))
        return str(rows[0][0]) if rows else None

    def events(self) -> list[dict[str, str | None]]:
        rows = self.query("SELECT json FROM events WHERE type = 'team.worktree.changed'")
        return [json.loads(r[0])["payload"] for r in rows]

    # ------------------------------------------------------------ observation

    def observe(self) -> None:
        """Collect every head a task branch has had (reflogs vanish with their branch, so
        this runs after every run, killed or not) and where ``main`` is."""
        for event in self.events():
            if event.get("head_commit"):
                self.heads.add(str(event["head_commit"]))
        refs = self.git("for-each-ref", "--format=%(refname)", "refs/heads/baton", "refs/baton")
        for ref in refs.split():
            self.heads.add(self.git("rev-parse", ref))
            log = self.git("reflog", "show", "--format=%H", ref, "--", check=False)
            self.heads.update(log.split())
        self.bases.append(self.git("rev-parse", BASE))

    def merge_commits(self) -> set[str]:
        return {str(e["merge_commit"]) for e in self.events() if e.get("merge_commit")}

    # ------------------------------------------------------------- invariants

    def check_commits(self, *, at_rest: bool) -> None:
        reachable = set(self.git("rev-list", "--branches", "--glob=refs/baton/salvage/*").split())
        lost = sorted(self.heads - reachable)
        if lost:
            raise InvariantBroken(
                "no commit lost", f"{len(lost)} task-branch head(s) reachable from no ref: {lost}"
            )
        if at_rest:
            for record in self.records():
                if record["state"] == "live":
                    left = _git(
                        Path(str(record["path"])), "status", "--porcelain", "--untracked-files=all"
                    )
                    if left:
                        raise InvariantBroken(
                            "no commit lost", f"uncommitted work at rest in a live tree: {left!r}"
                        )

    def _registered(self) -> set[Path]:
        out = self.git("worktree", "list", "--porcelain")
        paths = {
            Path(line.removeprefix("worktree ")).resolve()
            for line in out.splitlines()
            if line.startswith("worktree ")
        }
        return paths - {self.root.resolve()}

    def _folders(self) -> set[Path]:
        where = self.root / ".baton" / "worktrees"
        return {p.resolve() for p in where.iterdir()} if where.is_dir() else set()

    def check_trees(self, *, at_rest: bool) -> None:
        records = self.records()
        recorded = {Path(str(r["path"])).resolve() for r in records}
        orphans = (self._registered() | self._folders()) - recorded
        if orphans:
            raise InvariantBroken("tree ↔ record", f"worktrees without a record: {orphans}")
        if not at_rest:
            return
        transient = [(r["root_task"], r["state"]) for r in records if r["state"] in TRANSIENT]
        if transient:
            raise InvariantBroken("tree ↔ record", f"records left in transient states: {transient}")
        for r in records:
            branch = self.git(
                "rev-parse", "-q", "--verify", f"refs/heads/{r['branch']}", check=False
            )
            if r["state"] == "live" and branch != r["head_commit"]:
                raise InvariantBroken(
                    "tree ↔ record",
                    f"the record's head {r['head_commit']} is not the branch's {branch}",
                )
        live = {Path(str(r["path"])).resolve() for r in records if r["state"] == "live"}
        if self._registered() != live or self._folders() != live:
            raise InvariantBroken(
                "tree ↔ record",
                f"git worktree list {self._registered()} / folders {self._folders()} "
                f"!= live records {live}",
            )

    def check_main(self) -> None:
        base = self.git("rev-parse", BASE)
        allowed = {self.base_commit} | self.merge_commits()
        if base not in allowed:
            raise InvariantBroken("never half-merged", f"main is at {base}, not {allowed}")
        before = self.bases[-2] if len(self.bases) > 1 else self.base_commit
        if _run_git(self.root, "merge-base", "--is-ancestor", before, base).returncode != 0:
            raise InvariantBroken("never half-merged", f"main went back from {before} to {base}")
        if self.git("symbolic-ref", "HEAD") != BASE:
            raise InvariantBroken("never half-merged", "the main checkout left main")
        gitdir = Path(self.git("rev-parse", "--absolute-git-dir"))
        for name in ("MERGE_HEAD", "CHERRY_PICK_HEAD", "REVERT_HEAD", "rebase-merge", "index.lock"):
            if (gitdir / name).exists():
                raise InvariantBroken("never half-merged", f"the main checkout has {name}")
        status = self.git("status", "--porcelain", "--untracked-files=all")
        mine = [line for line in status.splitlines() if not line[3:].startswith(BATON_OWN)]
        if mine != [f" M {USER_FILE}"]:
            raise InvariantBroken("never half-merged", f"the main checkout's status: {mine}")
        text = (self.root / USER_FILE).read_text()
        if text != "The user's notes.\n" + USER_EDIT:
            raise InvariantBroken("never half-merged", f"the user's edit changed: {text!r}")

    def check_runs(self, task_id: str) -> None:
        """Claimed once (FCoP); the step ran at most once per turn dispatched for it."""
        port = self.project.port()
        with contextlib.suppress(Exception):
            info = port.read_task(task_id)
            if info.stage != "inbox" and info.claims != 1:
                raise InvariantBroken("no double run", f"{task_id} was claimed {info.claims} times")
        [(dispatched,)] = self.query(
            "SELECT COUNT(*) FROM team_turns WHERE task_id = ? "
            "AND kind IN ('work', 'resume', 'retry')",
            (task_id,),
        )
        runs = len(self.counter_text().splitlines())
        if runs > max(1, dispatched):
            raise InvariantBroken(
                "no double run", f"DEV's step ran {runs} times for {dispatched} dispatched turns"
            )

    def counter_text(self) -> str:
        """``counters/DEV.log`` wherever it is now: the live worktree, ``main`` or the salvage."""
        for record in self.records():
            path = Path(str(record["path"])) / "counters" / "DEV.log"
            if path.exists():
                return path.read_text()
        for ref in [BASE, *self.git("for-each-ref", "--format=%(refname)", "refs/baton").split()]:
            text = self.git("show", f"{ref}:counters/DEV.log", check=False)
            if text:
                return text + "\n"
        return ""

    def counters(self) -> list[Path]:
        return [Path(str(r["path"])) / "counters" / "DEV.log" for r in self.records()]

    def check_review(self, task_id: str) -> str | None:
        """The pending review, if any; exactly one open while the TASK waits in review
        (none once it is dropped or decided)."""
        stage = self.project.port().read_task(task_id).stage
        dropped = self.task_state(task_id) == "dropped"
        rows = self.query(
            "SELECT request_id, state FROM requests WHERE kind = 'review' AND jsonrpc_id LIKE ?",
            (f'"review:{task_id}:%',),
        )
        open_ = [(r, s) for r, s in rows if s in ("pending", "answered")]
        if stage == "review" and not dropped and len(open_) != 1:
            raise InvariantBroken(
                "finishes", f"in review with {len(open_)} open reviews: {[tuple(r) for r in rows]}"
            )
        if (stage != "review" or dropped) and open_:
            raise InvariantBroken("finishes", f"{stage}, dropped={dropped}, open review: {open_}")
        pending = [r for r, s in open_ if s == "pending"]
        return pending[0] if pending else None

    def checks(self, points: list[str], *, at_rest: bool) -> None:
        for invariant, check in (
            ("no commit lost", lambda: self.check_commits(at_rest=at_rest)),
            ("tree ↔ record", lambda: self.check_trees(at_rest=at_rest)),
            ("never half-merged", self.check_main),
        ):
            check()
            for point in points:
                self.tally.checked(point, invariant)

    def check_at_rest(self, points: list[str]) -> str | None:
        self.checks(points, at_rest=True)
        task_id = self.project.root_task()
        _check_one_stage(self.project)
        self.check_runs(task_id)
        for point in points:
            self.tally.checked(point, "one stage + valid")
            self.tally.checked(point, "no double run")
        return self.check_review(task_id)

    def check_final(self) -> None:
        task_id = self.project.root_task()
        [record] = self.records()
        if self.spec.kind == "merge":
            if self.project.port().read_task(task_id).stage != "done":
                raise InvariantBroken("finishes", "the approved TASK did not finish")
            if record["state"] != "removed":
                raise InvariantBroken("finishes", f"the merged tree is {record['state']}")
            where, extra = BASE, {}
        else:
            if self.task_state(task_id) != "dropped" or record["state"] != "salvaged":
                raise InvariantBroken(
                    "finishes", f"the drop left {self.task_state(task_id)} / {record['state']}"
                )
            where, extra = str(record["salvage_ref"]), {SCRATCH: "left uncommitted"}
        for path, text in {**self.spec.files, **extra}.items():
            found = self.git("show", f"{where}:{path}", check=False)
            if found != text:
                raise InvariantBroken("no commit lost", f"{path} under {where} is {found!r}")
        if self.git("for-each-ref", "refs/heads/baton"):
            raise InvariantBroken("tree ↔ record", "a task branch outlived its tree")
        for point in [*self.killed, "at rest"]:  # each kill of the flow: it finished
            self.tally.checked(point, "finishes")

    # -------------------------------------------------------------------- drop

    def drop_done(self, task_id: str) -> bool:
        states = {r["root_task"]: r["state"] for r in self.records()}
        return self.task_state(task_id) == "dropped" and states.get(task_id) == "salvaged"

    def serving(self) -> bool:
        """The running ``baton up`` is past its recovery (it opened its role slots)."""
        rows = self.query(
            "SELECT COUNT(*) FROM events JOIN team_daemon USING (run_id) "
            "WHERE type = 'team.slot.changed' AND team_daemon.state = 'running'"
        )
        return bool(rows and rows[0][0])

    def post_drop(self, task_id: str) -> bool:
        """Leave a file uncommitted in the worktree (after the running ``baton up``
        recovered, so only the salvage can commit it), then ``baton task drop`` as it is
        while ``baton up`` runs: the control row. False: not yet (or no ``baton up``)."""
        from baton.app import Baton
        from baton.config import load_config
        from baton.team.controls import request_drop

        if not self.serving():
            return False
        [record] = self.records()
        (Path(str(record["path"])) / SCRATCH).write_text("left uncommitted\n")
        with Baton.reading(config=load_config(self.root)) as store:  # as the CLI opens it
            posted = request_drop(store, task_id, reason="not needed after all", via="harness")
        return posted is not None


def run_drop(flow: Flow, kill: Kill | None, trace: Path) -> tuple[int, set[int], list[str], float]:
    """One ``baton up`` (it runs until stopped) that is asked to drop the tree once it runs;
    stopped (SIGINT) once the drop is recorded, unless the kill came first."""
    counter = trace.with_suffix(".count")
    counter.unlink(missing_ok=True)
    trace.unlink(missing_ok=True)
    env = {
        **flow.project.env,
        "BATON_CRASH_COUNTER": str(counter),
        "BATON_CRASH_TRACE": str(trace),
    }
    if kill is not None and kill.delay is None:
        env["BATON_CRASH_AT"] = str(kill.at)
        if kill.kind:
            env["BATON_CRASH_KIND"] = kill.kind
    task_id = flow.project.root_task()
    errors = trace.with_suffix(".stderr")
    with errors.open("w") as stderr:
        proc = subprocess.Popen(
            [sys.executable, "-m", "baton", "up"],
            cwd=flow.root,
            env=env,
            stdout=subprocess.DEVNULL,
            stderr=stderr,
            start_new_session=True,
        )
    started = time.monotonic()
    reapers: set[int] = set()
    try:
        while proc.poll() is None:
            elapsed = time.monotonic() - started
            if elapsed > UP_TIMEOUT:
                raise RuntimeError(
                    "baton up did not drop the tree in time"
                    if flow.posted
                    else "baton up never came past its recovery (no role slot opened)"
                )
            if kill is not None and kill.delay is not None and elapsed >= kill.delay:
                reapers = reapers or _reapers_of(proc.pid)
                os.kill(proc.pid, signal.SIGKILL)
                break
            reapers = reapers or _reapers_of(proc.pid)
            if not flow.posted:
                flow.posted = flow.post_drop(task_id)
            elif flow.drop_done(task_id):
                os.kill(proc.pid, signal.SIGINT)
                break
            time.sleep(0.1)
        code = proc.wait(UP_TIMEOUT)
    except BaseException:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()
        raise
    ended = time.time()
    if code not in (0, 130, -signal.SIGINT, -signal.SIGKILL):
        raise RuntimeError(f"baton up exited {code}: {errors.read_text()[-3000:]}")
    kinds = [line.split()[1] for line in trace.read_text().splitlines()] if trace.exists() else []
    return code, reapers, kinds, ended


# ------------------------------------------------------------------------ driving


def _point(kill: Kill, kinds: list[str]) -> str:
    if kill.delay is not None:
        return "random: mid-run"
    if kill.kind is None:
        return f"random: {kinds[-1] if kinds else 'a durable write'}"
    return f"{kill.kind}" + (f" #{kill.at}" if kill.at > 1 else "")


def drive(
    base: Path,
    index: int,
    spec: Spec,
    plan: list[Kill],
    tally: Tally,
    later: list[Kill] | None = None,
) -> list[Kill]:
    """Drive one flow to its end, killing runs as planned (``later``: once the human has
    approved or asked for the drop); the boundary kills that never fired (a point the
    flow never met: the harness reports it)."""
    project = create_project(base, index, spec)
    flow = Flow(project, spec, tally, base_commit=_git(project.root, "rev-parse", BASE))
    trace = base / f"wt-{index}" / "trace"
    plan = list(plan)
    unfired: list[Kill] = []
    recovering: list[str] = []
    for _ in range(100):
        kill = plan[0] if plan else None
        if flow.dropping and not flow.posted:
            code, reapers, kinds, ended = run_drop(flow, kill, trace)
        else:
            code, reapers, kinds, ended = run_up(project, kill, trace)
        tally.restarts += 1
        flow.observe()
        if code == -signal.SIGKILL:
            assert kill is not None
            plan.pop(0)
            point = _point(kill, kinds)
            tally.kills[point] += 1
            check_after_kill(project, tally, point, reapers, ended, counters=flow.counters())
            flow.checks([point], at_rest=False)
            recovering.append(point)
            flow.killed.append(point)
            continue
        boundary = kill is not None and kill.delay is None and kill.kind is not None
        if kill is not None and not boundary:
            plan.pop(0)  # a random kill is spent whether it fired or not
        points, recovering = [*recovering, "at rest"], []
        review = flow.check_at_rest(points)
        task_id = project.root_task()
        if spec.kind == "merge" and project.port().read_task(task_id).stage == "done":
            flow.check_final()
            break
        if spec.kind == "drop" and flow.posted and flow.drop_done(task_id):
            flow.check_final()
            break
        progressed = False
        if review is not None and spec.kind == "merge" and flow.answered:
            raise InvariantBroken("finishes", "the review came back after it was approved")
        if review is not None and spec.kind == "merge":
            done = project.baton("answer", review, "--approve", "--reason", "ship it")
            if done.returncode != 0:
                raise RuntimeError(f"baton answer failed: {done.stderr}")
            flow.answered = True
            progressed = True
        elif review is not None and spec.kind == "drop" and not flow.dropping:
            flow.dropping = progressed = True
        elif flow.dropping and flow.posted:
            raise InvariantBroken("finishes", "the drop was asked for and never happened")
        if progressed:  # random kills meant for before the human acted are left unused
            plan = [k for k in plan if k.kind is not None] + list(later or ())
            later = []
        elif boundary:
            unfired.append(plan.pop(0))  # a point this flow no longer meets
        elif not plan:
            raise InvariantBroken("finishes", f"idle with {task_id} stuck, nothing to answer")
    else:
        raise RuntimeError(f"worktree flow {index} did not finish in 100 runs")
    tally.flows += 1
    return unfired + plan


def _kills(points: tuple[str, ...]) -> list[Kill]:
    return [Kill(kind=p, at=1) for p in points]


def boundary_plans(kind: FlowKind, *, isolated: bool) -> list[tuple[list[Kill], list[Kill]]]:
    """(before the human acts, after) kills of the boundary flows of ``kind``: one flow
    through all its git boundaries in lifecycle order (each restart meets the next,
    often inside the recovery from the previous), or (``isolated``) one flow per
    boundary, met on the way a run without a crash takes; those also kill the turn's
    and the review's checkpoints in the first run, and the merge's last one."""
    issue = Kill(kind=ISSUE_WRITE, at=1)
    if kind == "merge":
        early, late = _kills(MERGE_POINTS[:4]), _kills(MERGE_POINTS[4:])
    else:
        early, late = [], [issue, *_kills(DROP_POINTS)]
    if not isolated:
        return [(early, late)]
    if kind == "merge":
        checkpoints = _points("checkpoint")
        early += [Kill(kind=p, at=2) for p in checkpoints]  # the review's
        late = _kills(checkpoints) + late  # the merge's last
    return [([k], []) for k in early] + [([], [k]) for k in late]


def random_plan(kills: int, rng: random.Random, *, writes: int = 50) -> list[Kill]:
    """Random delays into a run, and the Nth durable write of any kind (of ``writes``)."""
    return [
        Kill(delay=rng.uniform(1.0, 12.0))
        if rng.random() < 0.5
        else Kill(at=rng.randint(1, writes))
        for _ in range(kills)
    ]


ISSUE_WRITE = "fcop.publish:issues/ISSUE"
"""The drop's ISSUE: written after the tree's TASKs are dropped, before its salvage begins."""


def campaign(
    kind: FlowKind,
    *,
    base: Path,
    seed: int,
    random_kills: int = 2,
    isolated: bool = False,
    random_flows: int = 0,
    per_flow: int = 4,
    first_flow: int = 1,
    say: Callable[[str], None] = lambda line: None,
) -> tuple[Tally, list[str]]:
    """The flow of ``kind`` through every git boundary of it, with ``random_kills`` random
    kills where a run they spare cannot skip a boundary (a merge flow: after its last
    one; a drop flow: before the drop); then (``isolated``) one flow per boundary; then
    ``random_flows`` flows of ``per_flow`` random kills (half before the human acts, half
    after: in the merge or drop run). Returns the tally and the boundaries never met."""
    rng = random.Random(seed)
    tally = Tally(invariants=INVARIANTS)
    started = time.monotonic()
    [(early, late)] = boundary_plans(kind, isolated=False)
    randoms = random_plan(random_kills, rng)
    plans = [(early, late + randoms) if kind == "merge" else (randoms, late)]
    if isolated:
        plans += boundary_plans(kind, isolated=True)
    for _ in range(random_flows):
        first = random_plan(per_flow // 2, rng)
        plans.append((first, random_plan(per_flow - len(first), rng, writes=20)))
    unfired: list[str] = []
    for index, (plan, later) in enumerate(plans, start=first_flow):
        try:
            left = drive(base, index, SPECS[kind], plan, tally, later)
        except InvariantBroken as exc:
            tally.breaks.append(f"{kind} flow {index}: {exc}")
            say(f"{kind} flow {index}: BROKEN {exc}")
            continue
        say(f"{kind} flow {index}: ok, {tally.total_kills} kills so far")
        unfired += [f"{k.kind} #{k.at}" for k in left if k.kind is not None]
    tally.seconds = time.monotonic() - started
    return tally, unfired


def merged(tallies: list[Tally]) -> Tally:
    out = Tally(invariants=INVARIANTS)
    for t in tallies:
        out.kills.update(t.kills)
        for point, counts in t.checks.items():
            out.checks.setdefault(point, collections.Counter()).update(counts)
        out.breaks += t.breaks
        out.flows += t.flows
        out.restarts += t.restarts
        out.seconds += t.seconds
        out.cleanup = max(out.cleanup, t.cleanup)
    return out


def main(argv: list[str] | None = None) -> int:
    """``python -m tests.crash.worktree_flows [--long]``: the CI share, or the long run
    (and one flow per boundary, and ``--flows`` random flows per kind, 12 by default)."""
    import argparse
    import tempfile

    parser = argparse.ArgumentParser(prog="python -m tests.crash.worktree_flows")
    parser.add_argument("--long", action="store_true")
    parser.add_argument("--flows", type=int, default=None, help="random flows per kind")
    parser.add_argument("--seed", type=int, default=26)
    parser.add_argument("--keep", type=Path, default=None, help="keep the projects here")
    args = parser.parse_args(argv)
    base = args.keep or Path(tempfile.mkdtemp(prefix="baton-crash-wt-"))
    base.mkdir(parents=True, exist_ok=True)
    flows = args.flows if args.flows is not None else (12 if args.long else 0)
    tallies, unfired = [], []
    for n, kind in enumerate(("merge", "drop")):
        tally, left = campaign(
            kind,  # type: ignore[arg-type]
            base=base / kind,
            seed=args.seed + n,
            isolated=args.long,
            random_flows=flows,
            say=lambda line: print(line, file=sys.stderr, flush=True),
        )
        tallies.append(tally)
        unfired += left
    total = merged(tallies)
    print(total.table())
    if unfired:
        print("never met:", ", ".join(unfired))
    for line in total.breaks:
        print("BROKEN", line)
    return 1 if total.breaks else 0


if __name__ == "__main__":
    sys.exit(main())
