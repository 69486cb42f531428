"""The terminal/* client methods against real processes, contained to the workspace."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from baton.acp.jsonrpc import RpcError
from baton.errors import SecurityError
from baton.procgroup import group_alive
from baton.runner.terminals import TerminalManager


@pytest.fixture
def manager(tmp_path: Path) -> TerminalManager:
    (tmp_path / "sub").mkdir()
    return TerminalManager(tmp_path, {"PATH": os.environ["PATH"]})


async def test_create_wait_output_release(manager: TerminalManager, tmp_path: Path) -> None:
    created = await manager.create(
        {
            "command": "sh",
            "args": ["-c", "pwd; echo $GREETING; exit 3"],
            "cwd": "sub",
            "env": [{"name": "GREETING", "value": "hello"}],
        }
    )
    status = await manager.wait_for_exit(created)
    assert status == {"exitCode": 3, "signal": None}
    output = await manager.output(created)
    assert output["output"] == f"{tmp_path / 'sub'}\nhello\n"
    assert output["truncated"] is False and output["exitStatus"]["exitCode"] == 3
    await manager.release(created)
    with pytest.raises(RpcError):
        await manager.output(created)


async def test_output_keeps_the_tail_within_the_byte_limit(manager: TerminalManager) -> None:
    created = await manager.create(
        {
            "command": "sh",
            "args": ["-c", "for i in $(seq 1 2000); do echo line-$i; done"],
            "outputByteLimit": 100,
        }
    )
    await manager.wait_for_exit(created)
    output = await manager.output(created)
    assert output["truncated"] is True
    assert len(output["output"].encode()) <= 100 and output["output"].endswith("line-2000\n")


async def test_kill_stops_the_whole_group(manager: TerminalManager) -> None:
    created = await manager.create({"command": "sh", "args": ["-c", "sleep 60 & sleep 60"]})
    terminal = manager._terminals[created["terminalId"]]
    pgid = terminal.proc.pid
    assert group_alive(pgid)
    await manager.kill(created)
    status = await manager.wait_for_exit(created)
    assert status["signal"] == "SIGKILL"
    await manager.close()
    assert not group_alive(pgid)


async def test_cwd_outside_the_workspace_is_refused(manager: TerminalManager) -> None:
    with pytest.raises(SecurityError):
        await manager.create({"command": "true", "cwd": "/"})
    with pytest.raises(SecurityError):
        await manager.create({"command": "true", "cwd": "../"})


async def test_bad_params_are_invalid_params(manager: TerminalManager) -> None:
    with pytest.raises(RpcError) as info:
        await manager.create({"command": ""})
    assert info.value.code == -32602
    with pytest.raises(RpcError):
        await manager.create({"command": "definitely-not-a-command-xyz"})
