"""A big generated git repository for the worktree benchmark, made once and cached.

``git fast-import`` writes it in one stream (seconds for 50,000 files and 5,000
commits, where a loop of ``git commit`` would take an hour): a first commit with every
file, then commits that each rewrite a few files, all on ``main``; then the *task
branches* the merge preflight is measured on, forked ``FORK_BACK`` commits before
``main``'s tip, each changing files of its own and a few sharing one file with
branch 0 (the one preflighted), so ``git merge-tree`` meets real work and real
conflicts. The repository is bare, packed, with a commit-graph, as a repository
``git gc`` has looked after; the benchmark clones it (a local ``git clone``:
hard-linked objects, a fresh checkout) and never writes into the cache.

Cached under ``.cache/benches/`` by the generator's parameters and version, so a
rerun reuses it; made in a temporary folder and renamed, so an interrupted run leaves
no half repository behind.
"""

from __future__ import annotations

import os
import random
import shutil
import subprocess
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

__all__ = ["BIG", "QUICK", "Shape", "cached_repository", "git_env"]

GENERATOR_VERSION = 1
CACHE = Path(__file__).resolve().parents[1] / ".cache" / "benches"
FILES_PER_DIR = 100
DIRS_PER_TOP = 10
FORK_BACK = 10
"""Task branches fork this many commits before ``main``'s tip (the base moved since)."""
CONFLICTING = 3
"""How many task branches edit the one file branch 0 edits (the preflight's conflicts)."""


@dataclass(frozen=True, slots=True)
class Shape:
    files: int
    commits: int
    per_commit: int = 5
    """Files ``main``'s later commits each rewrite."""
    branches: int = 11
    """Task branches: branch 0 is preflighted against the other ``branches - 1``."""
    branch_files: int = 20
    seed: int = 26

    @property
    def key(self) -> str:
        return (
            f"repo-v{GENERATOR_VERSION}-f{self.files}-c{self.commits}-p{self.per_commit}"
            f"-b{self.branches}x{self.branch_files}-s{self.seed}"
        )


BIG = Shape(files=50_000, commits=5_000)
QUICK = Shape(files=2_000, commits=200)


def git_env() -> dict[str, str]:
    """A clean environment for the bench's own git commands (no user config, fixed identity)."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("GIT_")}
    env.update(
        GIT_CONFIG_NOSYSTEM="1",
        GIT_AUTHOR_NAME="bench",
        GIT_AUTHOR_EMAIL="bench@localhost",
        GIT_COMMITTER_NAME="bench",
        GIT_COMMITTER_EMAIL="bench@localhost",
        LC_ALL="C",
    )
    return env


def path_of(index: int) -> str:
    """``src/t03/m4/f034512.py``: 100 files a folder, 10 folders a top folder."""
    top, rest = divmod(index, FILES_PER_DIR * DIRS_PER_TOP)
    middle = rest // FILES_PER_DIR
    return f"src/t{top:03d}/m{middle}/f{index:06d}.py"


def content(index: int, version: int) -> bytes:
    """About 1 KiB of text; ``version`` rewrites one of its lines (so a diff is small)."""
    lines = [f"# generated file {index}\n"]
    for n in range(24):
        mixed = (index * 2654435761 + n * 40503 + 12345) % 4294967291
        lines.append(f"value_{n} = {mixed % 10**9}  # {mixed % 999983:06d}\n")
    if version:
        lines[1 + version % 24] = f"value_{version % 24} = {version}  # rewritten\n"
    return "".join(lines).encode()


def _data(body: bytes) -> bytes:
    return b"data %d\n%s\n" % (len(body), body)


def _commit(ref: str, mark: int, when: int, message: str, parent: str | None) -> bytes:
    who = b"bench <bench@localhost> %d +0000\n" % when
    head = b"commit %s\nmark :%d\nauthor %scommitter %s" % (ref.encode(), mark, who, who)
    head += _data(message.encode())
    if parent is not None:
        head += b"from %s\n" % parent.encode()
    return head


def _modify(index: int, version: int) -> bytes:
    return b"M 100644 inline %s\n" % path_of(index).encode() + _data(content(index, version))


def stream(shape: Shape) -> bytes:
    """The whole repository as one ``git fast-import`` stream."""
    rng = random.Random(shape.seed)
    out = bytearray()
    when = 1_700_000_000
    out += _commit("refs/heads/main", 1, when, "initial import", None)
    for index in range(shape.files):
        out += _modify(index, 0)
    versions = [0] * shape.files
    reserved = shape.files - shape.branches * shape.branch_files  # the branches' own files
    fork = max(1, shape.commits - FORK_BACK)
    for mark in range(2, shape.commits + 1):
        when += 60
        out += _commit("refs/heads/main", mark, when, f"change {mark}", f":{mark - 1}")
        for index in rng.sample(range(reserved), shape.per_commit):
            versions[index] += 1
            out += _modify(index, versions[index])
    shared = reserved  # branch 0's first file: CONFLICTING other branches edit it too
    for branch in range(shape.branches):
        ref = f"refs/heads/bench/task-{branch:02d}"
        own = range(
            reserved + branch * shape.branch_files, reserved + (branch + 1) * shape.branch_files
        )
        parent = f":{fork}"
        for step, part in enumerate((own[::2], own[1::2])):
            mark = shape.commits + 1 + branch * 2 + step
            when += 60
            out += _commit(ref, mark, when, f"task {branch} step {step}", parent)
            for index in part:
                out += _modify(index, 1000 + 24 * branch)
            if step == 0 and 1 <= branch <= CONFLICTING:
                out += _modify(shared, 1000 + 24 * branch)  # branch 0's line
            parent = f":{mark}"
    out += b"done\n"
    return bytes(out)


def _git(repo: Path, *args: str, data: bytes | None = None) -> None:
    subprocess.run(
        ["git", *args],
        cwd=repo,
        env=git_env(),
        input=data,
        check=True,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
    )


def cached_repository(shape: Shape, *, log: bool = True) -> Path:
    """The bare repository of ``shape`` (generated on first use, then reused)."""
    target = CACHE / shape.key
    if (target / "HEAD").is_file():
        return target
    CACHE.mkdir(parents=True, exist_ok=True)
    started = time.perf_counter()
    with tempfile.TemporaryDirectory(prefix=".making-", dir=CACHE) as tmp:
        repo = Path(tmp) / "repo.git"
        subprocess.run(
            ["git", "init", "-q", "--bare", "-b", "main", str(repo)], env=git_env(), check=True
        )
        _git(repo, "fast-import", "--quiet", "--done", data=stream(shape))
        _git(repo, "commit-graph", "write", "--reachable")
        _git(repo, "pack-refs", "--all")
        try:
            repo.rename(target)
        except OSError:  # another run made it meanwhile
            if not (target / "HEAD").is_file():
                raise
            shutil.rmtree(repo, ignore_errors=True)
    if log:
        print(f"(generated {shape.key} in {time.perf_counter() - started:.1f} s: {target})")
    return target
