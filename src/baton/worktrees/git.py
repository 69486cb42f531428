"""The one way baton runs ``git``: a subprocess with a clean environment and bounded output.

baton never re-implements git: branches, worktrees, commits, diffs, merges and
merge previews are git's own commands. What this module adds is how they are run:

- **a clean environment**: no inherited ``GIT_*`` variable (a ``GIT_DIR`` or
  ``GIT_INDEX_FILE`` from the user's shell would point every command elsewhere), no
  pager, no prompt, C locale for output baton parses;
- **no repository code**: every command runs with ``core.hooksPath=/dev/null`` and
  ``--no-verify`` where it commits, so a hook in the repository (or one an agent
  wrote) never runs inside baton, and commits are never signed with a key that asks;
- **bounded output**: a command whose stdout passes ``max_bytes`` is killed and
  reported as :class:`GitOutputTooLarge` (authoritative data is rejected, never
  truncated); callers that show text (a diff) ask for their own bound;
- **one error type**: a failing command is :class:`GitFailed` with its exit code and the
  first lines of stderr, display-safe for the one-line error baton prints.

Blocking by design (the team loop calls it in a worker thread, the CLI directly).
"""

from __future__ import annotations

import os
import subprocess
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path

from baton.errors import BatonError

__all__ = [
    "BATON_IDENTITY",
    "Git",
    "GitError",
    "GitFailed",
    "GitMissing",
    "GitOutputTooLarge",
]

DEFAULT_MAX_BYTES = 64 * 1024 * 1024
"""Output bound of a command that did not choose one (a listing of a huge repository)."""
DEFAULT_TIMEOUT_S = 300.0

BATON_IDENTITY: Mapping[str, str] = {
    "GIT_AUTHOR_NAME": "baton",
    "GIT_AUTHOR_EMAIL": "baton@localhost",
    "GIT_COMMITTER_NAME": "baton",
    "GIT_COMMITTER_EMAIL": "baton@localhost",
}
"""Who baton's own commits (checkpoints) are by; the agents' own commits keep theirs."""

_CONFIG = (
    "-c",
    "core.hooksPath=/dev/null",
    "-c",
    "commit.gpgSign=false",
    "-c",
    "tag.gpgSign=false",
    "-c",
    "core.fsmonitor=false",
    "-c",
    "color.ui=false",
    "-c",
    "core.quotePath=false",
)
_KEEP = ("PATH", "HOME", "TMPDIR", "SYSTEMROOT", "XDG_CONFIG_HOME")
"""The parent variables git may need (finding itself, the user's identity in
``~/.gitconfig``); everything else, ``GIT_*`` above all, is left behind."""


class GitError(BatonError):
    """A git command baton ran did not do what it was asked."""


class GitMissing(GitError):
    """``git`` is not installed (or not on PATH)."""


class GitFailed(GitError):
    """A git command exited non-zero (or could not run)."""

    def __init__(self, command: tuple[str, ...], code: int, stderr: str) -> None:
        self.command = command
        self.code = code
        self.stderr = stderr
        first = next((line for line in stderr.splitlines() if line.strip()), "")
        super().__init__(f"git {' '.join(command[:3])} failed (exit {code}): {first[:300]}")


class GitOutputTooLarge(GitError):
    """A command printed more than its bound (its output is not used, not cut)."""


@dataclass(frozen=True)
class Git:
    """``git`` in one directory (a checkout or a worktree)."""

    cwd: Path
    env: Mapping[str, str] = field(default_factory=dict)
    """Extra variables (an identity) on top of the clean environment."""
    timeout: float = DEFAULT_TIMEOUT_S

    def at(self, cwd: Path) -> Git:
        return Git(cwd, self.env, self.timeout)

    def run(
        self,
        *args: str,
        check: bool = True,
        max_bytes: int = DEFAULT_MAX_BYTES,
        env: Mapping[str, str] | None = None,
        input: bytes | None = None,
    ) -> subprocess.CompletedProcess[bytes]:
        """Run ``git ARGS`` here; raise :class:`GitFailed` on a non-zero exit if ``check``."""
        environ = {k: v for k, v in os.environ.items() if k in _KEEP}
        environ.update(
            LC_ALL="C",
            LANG="C",
            GIT_TERMINAL_PROMPT="0",
            GIT_PAGER="cat",
            PAGER="cat",
            GIT_OPTIONAL_LOCKS="0",
            GIT_CONFIG_NOSYSTEM="1",
        )
        environ.update(self.env)
        if env:
            environ.update(env)
        try:
            with subprocess.Popen(
                ["git", *_CONFIG, *args],
                cwd=self.cwd,
                env=environ,
                stdin=subprocess.PIPE if input is not None else subprocess.DEVNULL,
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
            ) as proc:
                out, err = _bounded(proc, tuple(args), input, max_bytes, self.timeout)
        except FileNotFoundError as exc:
            if not self.cwd.is_dir():
                raise GitFailed(tuple(args), -1, f"no such directory: {self.cwd}") from exc
            raise GitMissing("git is not installed (or not on PATH)") from exc
        result = subprocess.CompletedProcess(["git", *args], proc.returncode, out, err)
        if check and result.returncode != 0:
            raise GitFailed(tuple(args), result.returncode, err.decode("utf-8", "replace"))
        return result

    def text(self, *args: str, max_bytes: int = DEFAULT_MAX_BYTES) -> str:
        """stdout of a successful command, decoded, without the trailing newline."""
        out = self.run(*args, max_bytes=max_bytes).stdout
        return out.decode("utf-8", "surrogateescape").rstrip("\n")

    def ok(self, *args: str) -> bool:
        """Whether the command exits 0 (a question to git, not an action)."""
        return self.run(*args, check=False).returncode == 0

    def lines(self, *args: str, max_bytes: int = DEFAULT_MAX_BYTES) -> list[str]:
        return [line for line in self.text(*args, max_bytes=max_bytes).split("\n") if line]

    def zsplit(self, *args: str, max_bytes: int = DEFAULT_MAX_BYTES) -> list[str]:
        """stdout split on NUL (for ``-z`` output), the empty tail dropped."""
        out = self.run(*args, max_bytes=max_bytes).stdout.decode("utf-8", "surrogateescape")
        parts = out.split("\0")
        return parts[:-1] if parts and parts[-1] == "" else parts


def _bounded(
    proc: subprocess.Popen[bytes],
    args: tuple[str, ...],
    data: bytes | None,
    max_bytes: int,
    timeout: float,
) -> tuple[bytes, bytes]:
    """Read both pipes until exit, killing the process when stdout passes ``max_bytes``."""
    import selectors
    import time

    assert proc.stdout is not None and proc.stderr is not None
    if data is not None:
        assert proc.stdin is not None
        try:
            proc.stdin.write(data)
        finally:
            proc.stdin.close()
    out = bytearray()
    err = bytearray()
    deadline = time.monotonic() + timeout
    with selectors.DefaultSelector() as sel:
        sel.register(proc.stdout, selectors.EVENT_READ, out)
        sel.register(proc.stderr, selectors.EVENT_READ, err)
        while sel.get_map():
            left = deadline - time.monotonic()
            if left <= 0:
                proc.kill()
                proc.wait()
                raise GitFailed(args, -1, f"timed out after {timeout:.0f}s")
            for key, _ in sel.select(timeout=min(left, 1.0)):
                chunk = os.read(key.fd, 65536)
                if not chunk:
                    sel.unregister(key.fileobj)
                    continue
                buffer: bytearray = key.data
                buffer += chunk
                if buffer is out and len(out) > max_bytes:
                    proc.kill()
                    proc.wait()
                    raise GitOutputTooLarge(
                        f"git printed over {max_bytes} bytes; baton does not cut authoritative output"
                    )
                if buffer is err and len(err) > 65536:
                    del err[: len(err) - 65536]  # a diagnostic tail is enough
    proc.wait()
    return bytes(out), bytes(err)
