"""A run's status is a lifecycle table: born running, finished once, illegal moves raise."""

from __future__ import annotations

from typing import get_args

import pytest

from baton.errors import StoreError
from baton.store.run_states import (
    FINISH,
    RUN_STATUSES,
    TABLE,
    TERMINAL_RUN_STATUSES,
    RunEvent,
    RunState,
    RunStatus,
)


def test_the_literal_callers_write_names_the_tables_states() -> None:
    assert set(get_args(RunStatus)) == {s.value for s in RunState} == RUN_STATUSES
    assert RUN_STATUSES - {"running"} == TERMINAL_RUN_STATUSES
    assert TABLE.initial == {RunState.RUNNING}
    assert {state: event.value for state, event in FINISH.items()} == {
        RunState.COMPLETED: "complete",
        RunState.FAILED: "fail",
        RunState.CANCELLED: "cancel",
        RunState.INTERRUPTED: "interrupt",
    }


@pytest.mark.parametrize("done", sorted(TABLE.terminal))
def test_a_finished_run_is_finished_for_good(done: RunState) -> None:
    for event in RunEvent:
        with pytest.raises(
            StoreError, match=rf"illegal run transition: .*'{done.value}' is terminal"
        ):
            TABLE.next(done, event)


def test_a_running_run_ends_with_the_event_of_its_status() -> None:
    for status, event in FINISH.items():
        assert TABLE.next(RunState.RUNNING, event) is status
