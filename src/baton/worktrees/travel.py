"""A task tree's branch travelling between the coordinator's repository and a worker's.

On a cluster a tree's worktree lives on the worker host that holds the role, in that
host's checkout of the project; the coordinator keeps only the branch. These are the
worker's git steps, each one git command (or two), each idempotent:

- :func:`fetch`: the branch's head as the coordinator's repository has it now (the
  pushed head: what a re-placed role continues from), kept under a private ref so no
  ``gc`` takes it;
- :func:`open_copy`: the worktree at exactly that head, *detached* (the agent's own
  commits move only the worktree's HEAD; the branch moves only by :func:`publish`); a
  leftover copy of the same tree that differs (an older epoch's, on this host) is first
  saved, files and all, under ``refs/baton/stale/…`` (:func:`stale_ref`; a name already
  holding other work is never moved: :meth:`Repository.save`), then reset: never
  continued on;
- :func:`publish`: the worktree's HEAD onto the coordinator's branch as a compare-and-set
  of the ref: ``git push --force-with-lease`` to another repository, ``update-ref NEW
  OLD`` within the same one. A head that moved since (another epoch pushed) refuses it.

When the worker's checkout *is* the coordinator's repository (same ``--git-common-dir``:
a shared filesystem), nothing is fetched or pushed: the ref is read and compare-and-set
in place.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from baton.worktrees.git import Git, GitFailed
from baton.worktrees.naming import ref_safe
from baton.worktrees.repo import Repository

__all__ = ["Remote", "fetch", "open_copy", "publish", "stale_ref"]

STALE_PREFIX = "refs/baton/stale/"
FETCHED_PREFIX = "refs/baton/trees/"


def stale_ref(task_id: str, slot: str, epoch: int, *, leftover: bool = False) -> str:
    """Where a slot's copy keeps what never reached the branch, never overwriting another:
    ``…/<task>/<slot>/e<N>``, the head epoch N's push was refused; ``…/before-e<N>``
    (``leftover``), a differing copy an earlier epoch left on the host, saved as N began."""
    return f"{STALE_PREFIX}{ref_safe(task_id)}/{ref_safe(slot)}/{'before-' if leftover else ''}e{epoch}"


@dataclass(frozen=True, slots=True)
class Remote:
    """The coordinator's repository as one worker's checkout reaches it."""

    url: str
    """A path or URL ``git push`` and ``git fetch`` take."""
    same: bool
    """The worker's checkout is that repository: refs are read and set in place."""

    @classmethod
    def of(cls, repo: Repository, url: str) -> Remote:
        return cls(url, _common_dir(repo.git) == _common_dir_of(url))


def _common_dir(git: Git) -> Path | None:
    result = git.run("rev-parse", "--path-format=absolute", "--git-common-dir", check=False)
    if result.returncode != 0:
        return None
    return Path(result.stdout.decode("utf-8", "surrogateescape").strip()).resolve()


def _common_dir_of(url: str) -> Path | None:
    path = Path(url.removeprefix("file://"))
    if "://" in url.removeprefix("file://") or not path.is_absolute() or not path.is_dir():
        return None
    return _common_dir(Git(path))


def fetch(repo: Repository, remote: Remote, task_id: str, branch: str) -> str:
    """The branch's head in the coordinator's repository now (raises when it is gone)."""
    ref = f"refs/heads/{branch}"
    if not remote.same:
        kept = FETCHED_PREFIX + ref_safe(task_id)
        repo.git.run("fetch", "-q", "--no-tags", remote.url, f"+{ref}:{kept}")
        ref = kept
    head = repo.resolve(ref)
    if head is None:
        raise GitFailed(("fetch",), 1, f"the branch {branch} is not in {remote.url}")
    return head


def open_copy(repo: Repository, path: Path, head: str, *, stale: str, message: str) -> str | None:
    """The worktree at ``path``, detached at ``head``; the ref a differing leftover copy
    was saved under (``stale``, with its uncommitted files as a checkpoint), else None."""
    repo.git.run("worktree", "prune")  # a folder deleted by hand is forgotten first
    if path.resolve() not in repo.worktrees():
        if path.exists() and any(path.iterdir()):
            raise GitFailed(("worktree", "add"), 1, f"{path} exists and is not a worktree")
        path.parent.mkdir(parents=True, exist_ok=True)
        repo.git.run("worktree", "add", "-q", "--detach", str(path), head)
        return None
    current = repo.head(path)
    dirty = repo.dirty(path)
    if not dirty and current == head:
        return None  # this host's copy is the pushed head: continued as it is
    saved = None
    if dirty or not repo.is_ancestor(current, head):
        current = repo.checkpoint(path, message)
        saved = repo.save(stale, current)
    if repo.dirty(path) or repo.head(path) != current:
        raise GitFailed(("checkout",), 1, f"{path} is being written: its agent must stop first")
    git = repo.inside(path)
    git.run("checkout", "-q", "--detach", "--force", head)  # everything it held is in a ref
    git.run("clean", "-q", "-f", "-d")  # only what the checkpoint took (ignored files stay)
    return saved


def publish(repo: Repository, remote: Remote, branch: str, head: str, expected: str) -> bool:
    """Move the coordinator's ``branch`` from ``expected`` to ``head``; False when it is no
    longer at ``expected`` (another copy moved it: this one is stale), nothing moved."""
    ref = f"refs/heads/{branch}"
    if head == expected:
        return True
    if remote.same:
        done = repo.git.run("update-ref", "-m", "baton: publish", ref, head, expected, check=False)
        now = repo.resolve(ref)
    else:
        done = repo.git.run(
            "push",
            "-q",
            "--no-verify",
            f"--force-with-lease={ref}:{expected}",
            remote.url,
            f"{head}:{ref}",
            check=False,
        )
        listed = repo.git.text("ls-remote", remote.url, ref).split()
        now = listed[0] if listed else None
    if done.returncode == 0 or now == head:
        return True
    if now != expected:
        return False
    raise GitFailed(("push",), done.returncode, done.stderr.decode("utf-8", "replace"))
