"""What the CLI and the web use of the store's records and the read models the surfaces show."""

from baton.store import budget_sql, requests_sql, web_sessions
from baton.store.history import (
    DecisionFilter,
    RunFilter,
    decision_ids,
    run_prompts,
    run_tool_counts,
    runs_page,
)
from baton.store.live_turns import LiveTurn, live_turns
from baton.store.records import TERMINAL_RUN_STATUSES, RunRecord, RunStatus
from baton.store.store import Store
from baton.store.web_sessions import revoke_all

__all__ = [
    "TERMINAL_RUN_STATUSES",
    "DecisionFilter",
    "LiveTurn",
    "RunFilter",
    "RunRecord",
    "RunStatus",
    "Store",
    "budget_sql",
    "decision_ids",
    "live_turns",
    "requests_sql",
    "revoke_all",
    "run_prompts",
    "run_tool_counts",
    "runs_page",
    "web_sessions",
]
