"""Cursor (``agent acp``): its ``cursor/*`` extensions and subagent variants as canonical events.

Modules, each pure over plain data:

- :mod:`.todos`: ``cursor/update_todos`` → complete ``plan.updated`` snapshots;
- :mod:`.tasks`: ``cursor/task`` → ``delegation.completed``;
- :mod:`.children`: ``subagent_spawned`` / ``subagent_state_update`` / child sessions →
  ``delegation.*`` with lineage checks;
- :mod:`.artifacts` (+ :mod:`.containment`, the only filesystem access: ``lstat`` and
  ``realpath``): ``cursor/generate_image`` → ``artifact.*`` references;
- :mod:`.questions`, :mod:`.plans`: ``cursor/ask_question`` / ``cursor/create_plan`` →
  documents for the durable-requests ledger;
- :mod:`.extension`: :class:`CursorExtension`, which wires them to the inventory;
- :data:`DECLARATIONS`: Cursor's answers for the capability-matrix rows that no
  native event can show (steering, queueing, ...), with their evidence.
"""

from __future__ import annotations

from collections.abc import Mapping

from baton.providers.cursor.extension import CursorExtension
from baton.providers.inventory import CapabilityClaim

_SEED = "Cursor capability inventory, 2026-09-28"

_LEDGER = (
    "goes through the durable-requests ledger (persisted before shown, answered once from "
    "baton inbox/answer or the dashboard, delivered after the pipe write), tested end to end "
    "with the documented wire shapes over stdio; not yet qualified against a live Cursor "
    "(needs an account)"
)

DECLARATIONS: Mapping[str, CapabilityClaim] = {
    "questions": CapabilityClaim(
        "implemented",
        "cursor/ask_question → a question document (all required, opaque question-N/option-N "
        "ids mapped back to native ids, oversize refused) and the answered/skipped/cancelled "
        f"reply mapping are implemented and tested; durable delivery {_LEDGER}",
    ),
    "plans": CapabilityClaim(
        "implemented",
        "cursor/create_plan → a complete plan document (Markdown, overview, todos, phases, "
        "project flag; never truncated) bound to a SHA-256 revision, with accept/reject/cancel "
        f"replies (stale revisions refused); no planUri is fabricated; durable delivery {_LEDGER}",
    ),
    "subagent_questions": CapabilityClaim(
        "unsupported",
        f"Cursor's ACP subagent handler rejects interactive questions ({_SEED}); no affordance "
        "is advertised",
    ),
    "files_diffs": CapabilityClaim(
        "unverified",
        "diff content of tool_call_update is normalized by the generic tool layer, but no "
        "captured Cursor fixture proves complete before/after text or path attribution "
        f"({_SEED}); third-party reading says diffs may be rebuilt from hunks (lossy)",
    ),
    "steering": CapabilityClaim(
        "unsupported",
        "no session/steer: a concurrent session/prompt cancels and replaces the running turn "
        f"({_SEED}); baton does not present replacement as steering",
    ),
    "queueing": CapabilityClaim(
        "unsupported",
        "no native queue method; follow-ups are sent only after the turn settles, never "
        f"concurrently ({_SEED})",
    ),
    "cancellation": CapabilityClaim(
        "partial",
        "session/cancel through the runner; Cursor cancels the turn's subagents and waits up to "
        "10 s, then marks them disconnected (baton: delegation failed + child_disconnected "
        "notice); process cleanup needs live qualification",
    ),
    "settlement": CapabilityClaim(
        "partial",
        "the prompt result ends the turn; Cursor holds it until subagents settle and baton "
        "reports children still open at turn end (child_unsettled); background shells are not "
        f"surfaced over ACP ({_SEED})",
    ),
    "session_continuity": CapabilityClaim(
        "partial",
        "session/new and session/load (history replayed, including subagent spawns and "
        f"terminal states) per the initialize probe ({_SEED}); replayed updates carry no "
        "marker, duplicate suppression is the runner's",
    ),
    "discovery": CapabilityClaim(
        "partial",
        f"session/list is advertised (absolute cwd filter, no pagination cursor) ({_SEED}); "
        "baton recovers only its recorded session and offers no history browsing",
    ),
    "fork_resume": CapabilityClaim(
        "unsupported",
        f"session/fork and session/resume answer method-not-found ({_SEED} probe)",
    ),
    "modes": CapabilityClaim(
        "implemented",
        "agent|plan|ask selected by select_config (mode config option, else legacy "
        "session/set_mode only when modes are advertised); current_mode_update → mode.changed",
    ),
    "model_selection": CapabilityClaim(
        "implemented",
        "select_config picks the exact requested model value from the advertised model option "
        "or refuses, naming the advertised values (never substitutes); "
        "cursor/list_available_models is not used (authenticated)",
    ),
    "prompt_media": CapabilityClaim(
        "partial",
        f"initialize advertises image prompts; audio and embedded context are false ({_SEED}); "
        "attachment conversion is the runner's",
    ),
    "mcp": CapabilityClaim(
        "partial",
        f"session mcpServers over stdio/HTTP/SSE per the probe ({_SEED}); ambient project MCP "
        "configuration is refused by workspace admission, not loaded",
    ),
    "usage": CapabilityClaim(
        "unsupported",
        "Cursor's ACP emits no usage_update and no token usage; every turn ends with "
        "usage.reported available:false and the reason (never zero)",
    ),
    "hooks_memory": CapabilityClaim(
        "unsupported",
        "no ACP hook, memory or compaction lifecycle events; Cursor's internal hooks are "
        f"refused by workspace admission ({_SEED})",
    ),
    "goals_lineage": CapabilityClaim(
        "unsupported", f"no ACP goal or fork-lineage protocol ({_SEED}); session/fork is absent"
    ),
}

__all__ = ["DECLARATIONS", "CursorExtension"]
