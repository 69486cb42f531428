"""The composition root: what it opens, recovers, records and closes."""

from __future__ import annotations

import os
import socket
from pathlib import Path

import pytest

from baton.app import Baton, recovery
from baton.app.root import standalone_config
from baton.errors import UsageError
from baton.request_model.documents import parse_document
from baton.requests.states import State
from baton.store.records import RunRecord
from baton.testing import ScenarioAgent, in_memory
from tests.support.harness import fake

PERMISSION = parse_document(
    {
        "kind": "permission",
        "tool_call": {"tool_call_id": "t", "title": "rm", "kind": "execute"},
        "options": [{"option_id": "a", "name": "A", "kind": "allow_once"}],
    }
)


def _dead_owners_run(run_id: str, cwd: Path) -> RunRecord:
    """A running run whose process (a pid beyond the kernel's range) is gone."""
    return RunRecord(
        run_id=run_id,
        kind="run",
        agent="fake",
        cwd=str(cwd),
        status="running",
        created_at="2026-01-01T00:00:00.000Z",
        meta={"pid": 2**22 + 12345, "host": socket.gethostname(), "boot": ""},
    )


async def test_opening_recovers_what_a_dead_baton_left(tmp_path: Path) -> None:
    state = tmp_path / "state"
    async with Baton.open(state_dir=state) as first:
        first.store.create_run(_dead_owners_run("orphan", tmp_path))
        pending = await first.ledger.create(
            PERMISSION,
            run_id="orphan",
            connection_id="c",
            jsonrpc_id=1,
            session_id="s",
            turn_id="t",
        )
    async with Baton.open(state_dir=state) as second:
        assert [r.request_id for r in second.recovered] == [pending.request_id]
        assert (await second.ledger.get(pending.request_id)).state is State.EXPIRED
        run = second.store.get_run("orphan")
        assert run is not None and run.status == "interrupted"
        types = [e.type for e in second.store.iter_events("orphan")]
        assert types == ["request.expired"], "the expiry is a stored event of its run"


async def test_a_run_its_owner_finishes_while_another_baton_looks_keeps_its_ending(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Was: a ``baton run`` starting while another one ended saw that run ``running``, then
    its process gone, and failed to start ("run … already finished as 'completed'": the
    owner had finished it in between); seen once in 32 concurrent runs."""
    state = tmp_path / "state"
    async with Baton.open(state_dir=state) as first:
        first.store.create_run(_dead_owners_run("raced", tmp_path))
        store = first.store

        def owner_finishes_then_exits(run_meta: object) -> bool:
            store.finish_run("raced", "completed", "2026-01-01T00:00:01.000Z")
            return True

        monkeypatch.setattr(recovery, "_owner_dead", owner_finishes_then_exits)
        await recovery.recover_interrupted(store, first.ledger)
        run = store.get_run("raced")
        assert run is not None and run.status == "completed", "the owner's ending stands"
    monkeypatch.undo()
    async with Baton.open(state_dir=state) as second:  # and a later look changes nothing
        run = second.store.get_run("raced")
        assert run is not None and run.status == "completed"


async def test_a_run_is_finished_with_its_status_or_failed(tmp_path: Path) -> None:
    async with Baton.open(state_dir=tmp_path) as baton:
        async with baton.run(kind="test", agent="x", cwd=tmp_path, run_id="ok") as run:
            run.status = "completed"
            owner = baton.store.get_run("ok")
            assert owner is not None and owner.meta["pid"] > 0, "the owner is recorded"
        with pytest.raises(RuntimeError):
            async with baton.run(kind="test", agent="x", cwd=tmp_path, run_id="boom") as run:
                run.status = "completed"
                raise RuntimeError("the caller failed")
        statuses = {r.run_id: r.status for r in baton.store.list_runs(10)}
        assert statuses == {"ok": "completed", "boom": "failed"}


async def test_sessions_left_open_are_closed_with_the_root(tmp_path: Path) -> None:
    async with Baton.open(state_dir=tmp_path / "state") as baton:
        async with baton.run(kind="test", agent="fake", cwd=tmp_path, run_id="r") as run:
            seen: list[str] = []
            run.listen(lambda e: seen.append(e.type))
            session = await baton.open_session(
                baton.profile("builtin"),
                run=run,
                requests=baton.broker("none", wait_timeout=0, notify=False),
                workspace=tmp_path,
                transport=in_memory(ScenarioAgent("ok")),
            )
            assert (await session.prompt("hi")).status == "completed"
            run.status = "completed"
        await baton.aclose()
        assert seen[-1] == "session.closed" and session.state.value == "closed"
        with pytest.raises(UsageError, match="closed"):
            async with baton.run(kind="test", agent="x", cwd=tmp_path):
                pass


async def test_reading_opens_only_the_store(tmp_path: Path) -> None:
    (tmp_path / "baton.toml").write_text("")
    async with Baton.open(tmp_path) as baton:
        async with baton.run(kind="test", agent="x", cwd=tmp_path, run_id="r") as run:
            run.status = "completed"
        db = baton.config.db_path
    assert db == tmp_path / ".baton" / "baton.db", "a project keeps its store in .baton"
    with Baton.reading(tmp_path) as store:
        assert [r.run_id for r in store.list_runs(5)] == ["r"]


def test_the_harness_scenarios_are_the_fake_agent_commands() -> None:
    """``fake()`` is one spec for both transports: the argv the process would get."""
    spec = fake("huge-line", "--bytes", "10")
    assert spec.argv()[-4:] == ["--scenario", "huge-line", "--bytes", "10"]
    assert spec.options() == {"nbytes": 10}


async def test_a_root_over_an_open_store_wires_runs_as_open_does(tmp_path: Path) -> None:
    """``Baton.on_store`` (a role holder's host builds its root so): the run is recorded
    with its owner and meta, finished with the status set, and the store closes with it."""
    store = recovery.open_store(tmp_path / "state" / "baton.db")
    config = standalone_config(tmp_path / "state")
    async with Baton.on_store(store, config, recover=False) as root:
        async with root.run(
            kind="role-holder", agent="fake", cwd=tmp_path, run_id="h.dev.e1", meta={"slot": "dev"}
        ) as run:
            run.status = "completed"
        recorded = root.store.get_run("h.dev.e1")
        assert recorded is not None and recorded.status == "completed"
        assert recorded.meta["slot"] == "dev" and recorded.meta["pid"] == os.getpid()
    assert store.closed
