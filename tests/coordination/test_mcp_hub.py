"""The daemon's one MCP endpoint: credentials bind a connection to one slot and one session.

The role tools' behaviour over the hub (shim and HTTP) is ``test_mcp_server.py``, run over
every transport; here: who may connect, what a replaced session's credential gets, that a
shim dies with its daemon, and that the shim stays a stdlib-only process.
"""

from __future__ import annotations

import asyncio
import json
import os
import signal
import subprocess
import sys
import textwrap
import time
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from baton.role_tools.credentials import Credentials, Refusal, SlotGrant
from baton.role_tools.hub import SHIM_PATH, RoleHub
from baton.store.sqlite import SqliteStore
from baton.store.store import Store
from tests.coordination.slots import open_slot, own_project, point
from tests.coordination.test_mcp_server import (
    INITIALIZE,
    active_task_for,
    call,
    client_session,
    store,
)

__all__ = ["store"]  # the fixture, shared with the per-transport tests


@pytest.fixture
async def hub(store: Store) -> AsyncIterator[RoleHub]:
    started = await RoleHub.start(store, store.path.parent, http=True)
    try:
        yield started
    finally:
        await started.aclose()


async def post_initialize(url: str, token: str) -> httpx.Response:
    """One HTTP MCP ``initialize`` with ``token`` as the bearer credential."""
    async with httpx.AsyncClient() as client:
        return await client.post(
            url,
            json=INITIALIZE,
            headers={"Authorization": f"Bearer {token}", "Accept": "application/json"},
        )


async def run_shim(entry: dict[str, Any], *, stdin: bytes = b"") -> tuple[int, bytes, bytes]:
    """Run the shim of ``entry`` to its end with ``stdin``; (status, stdout, stderr)."""
    proc = await asyncio.create_subprocess_exec(
        entry["command"],
        *entry["args"],
        env={e["name"]: e["value"] for e in entry["env"]},
        stdin=asyncio.subprocess.PIPE,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
    )
    out, err = await asyncio.wait_for(proc.communicate(stdin), 30)
    assert proc.returncode is not None
    return proc.returncode, out, err


def test_credentials_are_per_slot_rotated_and_compared_whole() -> None:
    table = Credentials()
    qa, dev = table.issue("QA"), table.issue("DEV")
    assert table.check("QA", qa.token) == SlotGrant("QA", qa.generation)
    assert isinstance(refused := table.check("QA", dev.token), Refusal)
    assert refused.code == "CREDENTIAL_REFUSED"
    assert table.check("QA", qa.token[:-1]) == refused  # no prefix match
    again = table.issue("QA")
    assert again.token != qa.token and again.generation > qa.generation
    replaced = table.check("QA", qa.token)
    assert isinstance(replaced, Refusal) and replaced.code == "CREDENTIAL_REPLACED"
    assert table.check("QA", again.token) == SlotGrant("QA", again.generation)
    table.revoke("QA", qa.generation)  # the old session's late close
    assert table.check("QA", again.token) == SlotGrant("QA", again.generation)
    unknown = table.check("OPS", again.token)
    assert isinstance(unknown, Refusal) and unknown.code == "UNKNOWN_SLOT"
    assert qa.token not in repr(qa)
    table.revoke("QA", again.generation)  # its own close
    closed = table.check("QA", again.token)
    assert isinstance(closed, Refusal) and closed.code == "CREDENTIAL_REPLACED"


async def test_a_slots_credential_cannot_call_another_slots_tools(
    root: Path, store: Store, hub: RoleHub, port: Any
) -> None:
    open_slot(store, root, "QA")
    dev_slot = open_slot(store, root, "DEV")
    task_id, attempt = active_task_for(port, "DEV")
    point(dev_slot, task_id, attempt)
    qa, dev = hub.issue("QA"), hub.issue("DEV")
    # The shim of QA presenting DEV's credential (and the other way round) is refused.
    forged = hub.stdio_entry(qa)
    forged["env"] = [{"name": "BATON_MCP_TOKEN", "value": dev.token}]
    status, out, err = await run_shim(forged, stdin=json.dumps(INITIALIZE).encode() + b"\n")
    assert status == 2 and out == b""
    assert b"does not match slot 'QA'" in err
    # Over HTTP: DEV's URL with QA's bearer token.
    answer = await post_initialize(hub.http_entry(dev)["url"], qa.token)
    assert answer.status_code == 401 and "does not match slot 'DEV'" in answer.text
    # DEV's own credential reaches DEV's task; nothing was written by the refused tries.
    async with client_session(hub.stdio_entry(dev)) as session:
        error, task = await call(session, "read_task")
        assert not error and task["task_id"] == task_id
    assert port.reports_for(task_id) == []


@pytest.mark.parametrize("transport", ["shim", "http"])
async def test_a_replaced_sessions_credential_is_refused(
    root: Path, store: Store, hub: RoleHub, transport: str
) -> None:
    open_slot(store, root, "QA")
    old = hub.issue("QA")
    entry_of = hub.stdio_entry if transport == "shim" else hub.http_entry
    old_entry = entry_of(old)
    async with client_session(old_entry) as session:
        assert [t.name for t in (await session.list_tools()).tools]
        new = hub.issue("QA")  # the slot's session restarted
        with pytest.raises(Exception):  # the transport's own error type
            await asyncio.wait_for(session.list_tools(), 10)
    if transport == "shim":
        status, _, err = await run_shim(old_entry)
        assert status == 2 and b"earlier session of slot 'QA'" in err
    else:
        answer = await post_initialize(old_entry["url"], old.token)
        assert answer.status_code == 401 and "earlier session of slot 'QA'" in answer.text
    async with client_session(entry_of(new)) as session:
        assert [t.name for t in (await session.list_tools()).tools]


DAEMON = textwrap.dedent(
    """
    import asyncio, json, sys
    from pathlib import Path
    from baton.role_tools.hub import RoleHub
    from baton.store.sqlite import SqliteStore

    async def main():
        store = SqliteStore.open(Path(sys.argv[1]))
        hub = await RoleHub.start(store, Path(sys.argv[2]))
        print(json.dumps(hub.stdio_entry(hub.issue("QA"))), flush=True)
        await asyncio.Event().wait()

    asyncio.run(main())
    """
)


async def test_the_shim_exits_when_its_daemon_dies(root: Path, store: Store) -> None:
    open_slot(store, root, "QA")
    daemon = subprocess.Popen(
        [sys.executable, "-c", DAEMON, str(store.path), str(store.path.parent)],
        stdout=subprocess.PIPE,
    )
    shim = None
    try:
        assert daemon.stdout is not None
        line = await asyncio.wait_for(asyncio.to_thread(daemon.stdout.readline), 60)
        entry = json.loads(line)
        shim = await asyncio.create_subprocess_exec(
            entry["command"],
            *entry["args"],
            env={e["name"]: e["value"] for e in entry["env"]},
            stdin=asyncio.subprocess.PIPE,
            stdout=asyncio.subprocess.PIPE,
        )
        assert shim.stdin is not None and shim.stdout is not None
        shim.stdin.write(json.dumps(INITIALIZE).encode() + b"\n")
        reply = await asyncio.wait_for(shim.stdout.readline(), 60)
        assert json.loads(reply)["id"] == 1  # relayed to the daemon's server and back
        os.kill(daemon.pid, signal.SIGKILL)
        died = time.monotonic()
        await asyncio.wait_for(shim.wait(), 10)
        assert time.monotonic() - died < 1.5
        assert shim.returncode == 0
    finally:
        if daemon.poll() is None:
            daemon.kill()
        daemon.wait()
        if shim is not None and shim.returncode is None:
            shim.kill()
            await shim.wait()


async def test_a_shim_without_its_daemon_exits_at_once(tmp_path: Path) -> None:
    entry = {
        "command": sys.executable,
        "args": ["-I", "-S", str(SHIM_PATH), "--socket", str(tmp_path / "x.sock"), "--slot", "QA"],
        "env": [{"name": "BATON_MCP_TOKEN", "value": "bmcp_whatever"}],
    }
    status, _, err = await run_shim(entry)
    assert status == 3 and b"is not running" in err


def test_the_shim_imports_only_the_standard_library() -> None:
    probe = textwrap.dedent(
        f"""
        import importlib.util, json, sys
        before = set(sys.modules)
        spec = importlib.util.spec_from_file_location("shim", {str(SHIM_PATH)!r})
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)
        print(json.dumps(sorted(set(sys.modules) - before)))
        """
    )
    out = subprocess.run(
        [sys.executable, "-I", "-S", "-c", probe], capture_output=True, text=True, check=True
    )
    loaded = {name.partition(".")[0] for name in json.loads(out.stdout)}
    assert "socket" in loaded  # the probe saw the shim's own imports
    stdlib = set(sys.stdlib_module_names) | set(sys.builtin_module_names)
    assert loaded <= stdlib, loaded - stdlib
    assert not loaded & {"baton", "mcp", "pydantic", "anyio", "fcop"}


async def test_the_socket_is_private(store: Store, hub: RoleHub) -> None:
    assert (hub.socket_path.stat().st_mode & 0o777) == 0o600
    assert (hub.socket_path.parent.stat().st_mode & 0o777) == 0o700


async def test_a_socket_path_too_long_for_sockaddr_still_works(root: Path, tmp_path: Path) -> None:
    deep = tmp_path.joinpath(*["a-rather-long-directory-name"] * 4)
    deep.mkdir(parents=True)
    with SqliteStore.open(deep / "baton.db") as store:
        own_project(store)
        open_slot(store, root, "QA")
        hub = await RoleHub.start(store, deep)
        try:
            assert len(str(hub.socket_path)) > 108
            async with client_session(hub.stdio_entry(hub.issue("QA"))) as session:
                assert [t.name for t in (await session.list_tools()).tools]
        finally:
            await hub.aclose()
        assert not hub.socket_path.exists()
