"""A role holder starts its agent the way the profile says, as on one machine.

``runner/launch.py`` chooses a session's transport by ``profile.transport``: ACP over the
agent's stdio, or the ``cursor-sdk`` bridge behind an ACP face. A holder on a worker host
opens its session through the app root with the same choice (fenced by its epoch): a
``cursor-sdk`` role runs there on the real Cursor SDK client against baton's scripted
bridge (no Ray; the holder over PostgreSQL).
"""

from __future__ import annotations

import asyncio
import os
import sys
from dataclasses import replace
from pathlib import Path

from baton.agent_profile import CredentialBinding
from baton.cluster.actor import RoleHolder
from baton.cluster.fencing import Placements
from baton.providers.catalog import CURSOR_SDK
from tests.cluster.support import coordinator_run, holder_spec
from tests.cursor_sdk_transport.support import KEY, script
from tests.support.pg_fixtures import pg_databases, pg_dsn

__all__ = ["pg_databases", "pg_dsn"]

LEASE_S = 30.0


async def test_a_cursor_sdk_role_runs_on_its_bridge_on_a_holder(
    pg_dsn: str, tmp_path: Path
) -> None:
    from baton.store.pg import PgStore

    store = PgStore.open(pg_dsn)
    emitter = coordinator_run(store)
    placed = await Placements(store, emitter).place("dev", "local", lease_s=LEASE_S)
    spec = holder_spec(pg_dsn, "dev", "ok", tmp_path, parent_run=emitter.run_id, lease_s=LEASE_S)
    profile = replace(
        CURSOR_SDK,
        name="cursor-scripted",
        command=(sys.executable, "-m", "baton.testing.cursor_bridge"),
        credentials=(CredentialBinding("CURSOR_API_KEY"),),
    )
    spec = replace(
        spec,
        epoch=placed.epoch,
        profile=profile,
        permissions="all",
        environ={"PATH": os.environ["PATH"], "CURSOR_API_KEY": KEY},
    )
    holder = RoleHolder(spec)
    try:
        await holder.start()
        prompt = script(
            {"text": "Hello from Cursor."},
            {"custom": {"tool": "write_file", "args": {"path": "hello.txt", "content": "hi\n"}}},
        )
        result = await asyncio.wait_for(holder.prompt(prompt), 120)
        assert result.status == "completed", result
        assert (Path(spec.workspace) / "hello.txt").read_text() == "hi\n"
        assert type(holder._raw[0]).__name__ == "CursorSdkTransport"  # not an ACP subprocess
    finally:
        await holder.close()
        await store.aclose()
