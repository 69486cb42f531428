"""Fenced git pushes (:mod:`baton.cluster.push_gate`), with real ``git`` and real sockets.

The first tests drive the gate with a check the test controls: what git runs, what the
checkout's own hooks still do, how the hook fails closed. The last ones start a real
:class:`RoleHolder` (over PostgreSQL, with the fake agent as its process) and push with
*the agent's own environment*, read from ``/proc``: allowed while the holder's epoch
holds, refused and recorded once the slot moved on.
"""

from __future__ import annotations

import asyncio
import json
import os
import shutil
import socket
import subprocess
from collections.abc import AsyncIterator
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import pytest

from baton.cluster.actor import RoleHolder
from baton.cluster.fencing import Placements
from baton.cluster.push_gate import GATE_ENV, KEY_ENV, REQUEST_LIMIT, PushGate, agent_git_env
from baton.runner.emitter import EventEmitter
from tests.cluster.support import coordinator_run, holder_spec
from tests.support.pg_fixtures import pg_databases, pg_dsn

__all__ = ["pg_databases", "pg_dsn"]

pytestmark = pytest.mark.skipif(shutil.which("git") is None, reason="git is not installed")

GIT = shutil.which("git") or "git"
BASE_ENV = {
    "PATH": os.environ["PATH"],
    "GIT_AUTHOR_NAME": "t",
    "GIT_AUTHOR_EMAIL": "t@example.invalid",
    "GIT_COMMITTER_NAME": "t",
    "GIT_COMMITTER_EMAIL": "t@example.invalid",
    "GIT_CONFIG_NOSYSTEM": "1",
}


def _git(cwd: Path, *args: str, env: dict[str, str] | None = None) -> None:
    subprocess.run([GIT, "-C", str(cwd), *args], check=True, env=env or BASE_ENV, timeout=60)


def _checkout(root: Path, work: Path | None = None) -> tuple[Path, Path]:
    """A work tree (``root/work`` unless given) with one commit and a bare remote ``origin``."""
    remote, work = root / "remote.git", work or root / "work"
    work.mkdir(parents=True, exist_ok=True)
    _git(root, "init", "-q", "--bare", str(remote))
    _git(work, "init", "-q", "-b", "main")
    (work / "a.txt").write_text("one\n")
    _git(work, "add", "a.txt")
    _git(work, "commit", "-q", "-m", "one")
    _git(work, "remote", "add", "origin", str(remote))
    return work, remote


def _hook(path: Path, body: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("#!/bin/sh\n" + body + "\n")
    path.chmod(0o755)


async def _push(work: Path, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    """``git push origin main`` in a child process (the gate answers on this loop)."""
    proc = await asyncio.create_subprocess_exec(
        GIT,
        "-C",
        str(work),
        "push",
        "-q",
        "origin",
        "main",
        env=env,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
    )
    out, err = await asyncio.wait_for(proc.communicate(), 120)
    return subprocess.CompletedProcess([], proc.returncode or 0, out.decode(), err.decode())


def _remote_head(remote: Path) -> str | None:
    done = subprocess.run(
        [GIT, "--git-dir", str(remote), "rev-parse", "-q", "--verify", "refs/heads/main"],
        capture_output=True,
        text=True,
        env=BASE_ENV,
        check=False,
    )
    return done.stdout.strip() or None


class Switch:
    """The check the gate asks: allowed until told otherwise; records what it was asked."""

    def __init__(self) -> None:
        self.allow = True
        self.acts: list[str] = []

    async def __call__(self, act: str) -> bool:
        self.acts.append(act)
        return self.allow


@dataclass
class Rig:
    """A checkout with hooks of its own, its remote, and a started gate."""

    pushes: PushGate
    switch: Switch
    work: Path
    remote: Path

    @property
    def env(self) -> dict[str, str]:
        """The environment the actor gives its agent (on top of the test's base)."""
        assert self.pushes.gate is not None
        return self.pushes.gate.env(BASE_ENV)


@pytest.fixture
async def rig(tmp_path: Path) -> AsyncIterator[Rig]:
    work, remote = _checkout(tmp_path)
    marker = tmp_path / "own-pre-push.txt"
    _hook(work / ".git" / "hooks" / "pre-push", f'cat > "{marker}"; echo "$1" >> "{marker}"')
    _hook(work / ".git" / "hooks" / "pre-commit", f'echo ran > "{tmp_path / "own-pre-commit"}"')
    switch = Switch()
    pushes = PushGate(switch)
    await pushes.start(work)
    try:
        yield Rig(pushes, switch, work, remote)
    finally:
        await pushes.close()


async def test_a_push_the_check_allows_goes_out_and_the_checkouts_hooks_still_run(
    rig: Rig, tmp_path: Path
) -> None:
    work, env = rig.work, rig.env
    (work / "b.txt").write_text("two\n")
    _git(work, "add", "b.txt", env=env)
    _git(work, "commit", "-q", "-m", "two", env=env)
    assert (tmp_path / "own-pre-commit").read_text() == "ran\n"  # forwarded
    done = await _push(work, env)
    assert done.returncode == 0, done.stderr
    assert rig.switch.acts == ["git push origin"]
    assert _remote_head(rig.remote) is not None
    own = (tmp_path / "own-pre-push.txt").read_text()
    assert "refs/heads/main" in own and own.endswith("origin\n")  # its stdin and args intact
    assert not (work / ".git" / "config").read_text().count("hooksPath")  # checkout untouched


async def test_a_push_the_check_refuses_never_leaves(rig: Rig, tmp_path: Path) -> None:
    rig.switch.allow = False
    done = await _push(rig.work, rig.env)
    assert done.returncode != 0
    assert "baton: push refused: this session's placement is no longer current" in done.stderr
    assert _remote_head(rig.remote) is None
    assert not (tmp_path / "own-pre-push.txt").exists()  # refused before the checkout's hook
    assert rig.pushes.asked == [("git push origin", False)]


@pytest.mark.parametrize("broken", ["wrong key", "no gate", "gate gone"])
async def test_the_hook_fails_closed(rig: Rig, broken: str) -> None:
    env = rig.env
    if broken == "wrong key":
        env[KEY_ENV] = "guess"
    elif broken == "no gate":
        del env[GATE_ENV]
    else:
        await rig.pushes.close()
    done = await _push(rig.work, env)
    assert done.returncode != 0 and "baton: push refused" in done.stderr, done.stderr
    assert _remote_head(rig.remote) is None
    assert rig.switch.acts == []  # nothing reached the check


async def test_the_gate_refuses_an_oversized_or_malformed_request_unread(rig: Rig) -> None:
    gate = rig.pushes.gate
    assert gate is not None
    path = str(gate.socket)

    def ask(data: bytes) -> Any:
        with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as conn:
            conn.settimeout(30)
            conn.connect(path)
            conn.sendall(data)
            conn.shutdown(socket.SHUT_WR)
            return json.loads(conn.makefile("rb").readline())

    for data in (
        b"x" * (REQUEST_LIMIT + 10) + b"\n",
        b"[1, 2]\n",
        b"not json\n",
        json.dumps({"key": gate.key}).encode(),  # unterminated, no remote
    ):
        verdict = await asyncio.to_thread(ask, data)
        assert verdict["allow"] is False, (data[:40], verdict)
    assert rig.switch.acts == []


async def test_a_configured_hooks_path_is_forwarded_to(tmp_path: Path) -> None:
    """A checkout with its own ``core.hooksPath`` (husky's ``.husky``, relative to the top)."""
    work, _ = _checkout(tmp_path)
    _git(work, "config", "core.hooksPath", ".husky")
    marker = tmp_path / "husky-pre-commit"
    _hook(work / ".husky" / "pre-commit", f'echo ran > "{marker}"')
    pushes = PushGate(Switch())
    gate = await pushes.start(work)
    try:
        (work / "c.txt").write_text("c\n")
        env = gate.env(BASE_ENV)
        _git(work, "add", "c.txt", env=env)
        _git(work, "commit", "-q", "-m", "c", env=env)
        assert marker.read_text() == "ran\n"
        assert (gate.hooks / "pre-push").exists()
    finally:
        await pushes.close()
    assert not gate.socket.exists() and (gate.hooks / "pre-push").exists()  # fails closed


def test_the_agents_git_config_entries_are_appended() -> None:
    env = agent_git_env(
        {"GIT_CONFIG_COUNT": "1", "GIT_CONFIG_KEY_0": "user.name", "GIT_CONFIG_VALUE_0": "x"},
        hooks=Path("/h"),
        socket=Path("/s"),
        key="k",
    )
    assert env["GIT_CONFIG_COUNT"] == "2"
    assert (env["GIT_CONFIG_KEY_0"], env["GIT_CONFIG_KEY_1"]) == ("user.name", "core.hooksPath")
    assert (env["GIT_CONFIG_VALUE_1"], env[GATE_ENV], env[KEY_ENV]) == ("/h", "/s", "k")


# ------------------------------------------------------------------ in a real holder


def _environ_of(pid: int) -> dict[str, str]:
    raw = Path(f"/proc/{pid}/environ").read_bytes()
    return dict(item.split("=", 1) for item in raw.decode().split("\0") if "=" in item)


async def test_the_holders_agent_pushes_only_while_its_epoch_holds(
    pg_dsn: str, tmp_path: Path
) -> None:
    from baton.store.pg import PgStore

    store = PgStore.open(pg_dsn)
    emitter: EventEmitter = coordinator_run(store)
    placements = Placements(store, emitter)
    spec = holder_spec(pg_dsn, "dev", "ok", tmp_path, parent_run=emitter.run_id, lease_s=60)
    work, remote = _checkout(tmp_path, Path(spec.workspace))
    placed = await placements.place("dev", "local", lease_s=60)
    holder = RoleHolder(replace(spec, epoch=placed.epoch, host="local"))
    try:
        info = await holder.start()
        agent_env = _environ_of(int(info["agent_pid"]))
        assert agent_env["GIT_CONFIG_KEY_0"] == "core.hooksPath"
        env = {**agent_env, **{k: v for k, v in BASE_ENV.items() if k.startswith("GIT_")}}
        env["GIT_CONFIG_NOSYSTEM"] = "1"
        done = await _push(work, env)
        assert done.returncode == 0, done.stderr
        first = _remote_head(remote)
        assert first is not None
        await placements.fail("dev")  # the slot moves on; this holder is stale now
        await placements.place("dev", "elsewhere", lease_s=60)
        (work / "b.txt").write_text("two\n")
        _git(work, "add", "b.txt", env=env)
        _git(work, "commit", "-q", "-m", "two", env=env)
        done = await _push(work, env)
        assert done.returncode != 0 and "push refused" in done.stderr, done.stderr
        assert _remote_head(remote) == first
        events = list(store.iter_events(holder.run_id))
        fenced = [e.payload for e in events if e.type == "cluster.fenced_out"]
        assert [(f.epoch, f.act) for f in fenced] == [(1, "git push origin")], fenced
        assert "stale" in fenced[0].reason
        info: dict[str, Any] = await holder.info()
        assert info["stopped"].startswith("fenced out")
    finally:
        await holder.close()
        await store.aclose()
