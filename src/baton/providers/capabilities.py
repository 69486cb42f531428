"""The capability matrix: the seed's rows × baton's providers, derived from code.

Each cell is a status and the reason for it:

``implemented``
    baton has a tested code path (generic normalizer or provider extension) and the
    agent is known (observed or documented) to use it.
``partial``
    part of it works; the reason names the gap.
``unsupported``
    the agent lacks it, or baton deliberately does not offer it; the reason says which.
``unverified``
    not known either way (only inferred evidence, or nothing).

Cells come from two tables in code, never from prose: the provider's closed
inventory (:mod:`baton.providers.inventory`: a row lists the native events that
evidence it) and the provider's ``DECLARATIONS`` (a :class:`CapabilityClaim` per row that no
native event can show, such as steering or queueing). A declaration wins; the
inventory's evidence is appended to it. ``docs/capabilities.md`` is
:func:`render_markdown` output, and a test fails when it is stale.

Live ``baton probe`` results can be merged (:func:`merge_probes`): what the agent
advertised in ``initialize`` annotates the affected rows and downgrades a cell to
``unsupported`` when the agent does not advertise it. A probe never upgrades a
cell: baton's support is its code, not the agent's advertisement.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any

from baton.events.extension import STABLE_VARIANTS
from baton.jsontypes import JsonMapping
from baton.providers import (
    acp_additions,
    builtin_ext,
    claude,
    codex,
    cursor,
    gemini,
    opencode,
    qwen,
)
from baton.providers.catalog import BUILTIN_PROFILES
from baton.providers.cursor_sdk import declarations as cursor_sdk
from baton.providers.inventory import (
    GENERIC_METHODS,
    CapabilityClaim,
    NativeEvent,
    Status,
)
from baton.providers.registry import extension_for, families, inventory_for

__all__ = [
    "DECLARATIONS",
    "ROWS",
    "STATUSES",
    "Cell",
    "Matrix",
    "Row",
    "build_matrix",
    "family_of",
    "merge_probes",
    "render_columns",
    "render_json",
    "render_markdown",
    "render_text",
]

STATUSES: tuple[Status, ...] = ("implemented", "partial", "unsupported", "unverified")


@dataclass(frozen=True, slots=True)
class Row:
    key: str
    title: str
    natives: tuple[str, ...] = ()
    """Inventory natives (variants, methods, ``_meta`` keys) that evidence this row."""


ROWS: tuple[Row, ...] = (
    Row(
        "streaming", "Streaming assistant/reasoning", ("agent_message_chunk", "agent_thought_chunk")
    ),
    Row("tool_lifecycle", "Tool lifecycle/input/output", ("tool_call", "tool_call_update")),
    Row("questions", "Human questions", ("cursor/ask_question", "elicitation/create")),
    Row("plans", "Proposed plans and decisions", ("cursor/create_plan",)),
    Row("checklist", "Execution checklist", ("plan", "cursor/update_todos")),
    Row("child_activity", "Child activity", ("subagent_spawned", "subagent_state_update")),
    Row("subagent_tasks", "Completed subagent tasks", ("cursor/task",)),
    Row("subagent_questions", "Subagent questions"),
    Row("images", "Generated images", ("cursor/generate_image",)),
    Row("files_diffs", "Files and diffs"),
    Row("steering", "True active-turn steering"),
    Row("queueing", "Queued follow-ups"),
    Row("cancellation", "Cancellation"),
    Row("settlement", "Turn settlement"),
    Row("session_continuity", "Session continuity"),
    Row("discovery", "Session discovery"),
    Row("fork_resume", "Fork/resume methods"),
    Row("modes", "Modes", ("current_mode_update",)),
    Row("model_selection", "Model selection"),
    Row("commands", "Available commands", ("available_commands_update",)),
    Row("session_metadata", "Session metadata", ("session_info_update",)),
    Row("prompt_media", "Prompt media"),
    Row("mcp", "MCP and semantic tools"),
    Row("usage", "Usage/cost", ("usage_update",)),
    Row("hooks_memory", "Reviews, compaction, hooks, memory"),
    Row("goals_lineage", "Goal controls / lineage"),
)
"""The seed's capability rows, in its order."""

DECLARATIONS: Mapping[str, Mapping[str, CapabilityClaim]] = {
    "builtin": builtin_ext.DECLARATIONS,
    "cursor": cursor.DECLARATIONS,
    "claude": claude.DECLARATIONS,
    "codex": codex.DECLARATIONS,
    "gemini": gemini.DECLARATIONS,
    "opencode": opencode.DECLARATIONS,
    "qwen": qwen.DECLARATIONS,
    "cursor-sdk": cursor_sdk.DECLARATIONS,
}


@dataclass(frozen=True, slots=True)
class Cell:
    status: Status
    reason: str


Matrix = Mapping[str, Mapping[str, Cell]]
"""family → row key → cell."""


def build_matrix(probes: Iterable[JsonMapping] = ()) -> dict[str, dict[str, Cell]]:
    """The whole matrix, optionally with live probe results merged in."""
    matrix = {family: {row.key: _cell(family, row) for row in ROWS} for family in families()}
    return merge_probes(matrix, probes)


def _cell(family: str, row: Row) -> Cell:
    inventory = inventory_for(family)
    declared = DECLARATIONS.get(family, {}).get(row.key)
    matches = [e for e in inventory.entries if e.native in row.natives]
    evidence = "; ".join(_describe(e) for e in matches)
    if declared is not None:
        reason = declared.evidence + (f" [inventory: {evidence}]" if evidence else "")
        return Cell(declared.status, reason)
    if not matches:
        return Cell("unverified", "no declaration and no known native event")
    mapped = [e for e in matches if e.canonical is not None]
    if not mapped:
        return Cell("unsupported", evidence)
    handled = extension_for(family).handled()
    unhandled = [
        e
        for e in mapped
        if e.native not in STABLE_VARIANTS
        and e.native not in GENERIC_METHODS
        and (e.kind, e.native) not in handled
    ]
    if unhandled:
        return Cell("partial", f"listed but not handled: {evidence}")
    if all(e.evidence == "inferred" for e in mapped):
        return Cell("unverified", f"mapped, but the agent's use is inferred: {evidence}")
    return Cell("implemented", evidence)


def _describe(entry: NativeEvent) -> str:
    target = entry.canonical or "not mapped"
    note = f", {entry.note}" if entry.note else ""
    return f"{entry.native} → {target} ({entry.evidence}{note})"


# ----------------------------------------------------------------------- probes


def family_of(agent: str) -> str:
    """The family of a profile name or family name; ``KeyError`` if neither."""
    if agent in families():
        return agent
    profile = BUILTIN_PROFILES.get(agent)
    if profile is None:
        raise KeyError(agent)
    return profile.family


def merge_probes(
    matrix: Mapping[str, Mapping[str, Cell]], probes: Iterable[JsonMapping]
) -> dict[str, dict[str, Cell]]:
    """Annotate (and possibly downgrade) cells with what live probes advertised.

    A probe is ``{"agent": <profile or family>, "initialize": <initialize result>,
    "methods": {<method>: "ok" | "method_not_found" | <error text>}}``; unknown keys
    are ignored, a probe for an unknown agent is skipped.
    """
    merged = {family: dict(cells) for family, cells in matrix.items()}
    for probe in probes:
        agent = probe.get("agent")
        if not isinstance(agent, str):
            continue
        try:
            family = family_of(agent)
        except KeyError:
            continue
        if family not in merged:
            continue
        for row_key, advertised, detail in _probe_findings(probe):
            cell = merged[family][row_key]
            reason = f"{cell.reason} [probe {agent}: {detail}]"
            status: Status = cell.status
            if not advertised and status != "unsupported":
                status = "unsupported"
            merged[family][row_key] = replace(cell, status=status, reason=reason)
    return merged


def _probe_findings(probe: Mapping[str, Any]) -> list[tuple[str, bool, str]]:
    """``(row, advertised, detail)`` facts from one probe."""
    init = probe.get("initialize")
    caps = init.get("agentCapabilities") if isinstance(init, Mapping) else None
    caps = caps if isinstance(caps, Mapping) else {}
    session = caps.get("sessionCapabilities")
    session = session if isinstance(session, Mapping) else {}
    prompt = caps.get("promptCapabilities")
    prompt = prompt if isinstance(prompt, Mapping) else {}
    mcp = caps.get("mcpCapabilities")
    mcp = mcp if isinstance(mcp, Mapping) else {}
    meta = caps.get("_meta")
    meta = meta if isinstance(meta, Mapping) else {}
    methods = probe.get("methods")
    methods = methods if isinstance(methods, Mapping) else {}
    findings: list[tuple[str, bool, str]] = []
    if isinstance(init, Mapping):
        load = bool(caps.get("loadSession")) or session.get("resume") is not None
        findings.append(
            (
                "session_continuity",
                load,
                f"loadSession={bool(caps.get('loadSession'))}, "
                f"resume={'yes' if session.get('resume') is not None else 'no'}",
            )
        )
        findings.append(
            (
                "discovery",
                session.get("list") is not None,
                f"list={'yes' if session.get('list') is not None else 'no'}",
            )
        )
        media = [k for k in ("image", "audio", "embeddedContext") if prompt.get(k)]
        findings.append(("prompt_media", bool(media), f"media={','.join(media) or 'text only'}"))
        transports = ["stdio"] + [k for k in ("http", "sse") if mcp.get(k)]
        findings.append(("mcp", True, f"mcp={','.join(transports)}"))
        steering = meta.get("steering")
        if isinstance(steering, Mapping):
            findings.append(("steering", bool(steering.get("supported")), "_meta.steering"))
    fork_methods = {m: methods.get(m) for m in ("session/fork", "session/resume") if m in methods}
    if fork_methods or isinstance(init, Mapping):
        advertised = any(v == "ok" for v in fork_methods.values()) or (
            not fork_methods
            and (session.get("fork") is not None or session.get("resume") is not None)
        )
        detail = ", ".join(f"{m}={v}" for m, v in fork_methods.items()) or (
            f"fork={'yes' if session.get('fork') is not None else 'no'}, "
            f"resume={'yes' if session.get('resume') is not None else 'no'}"
        )
        findings.append(("fork_resume", advertised, detail))
    return findings


# -------------------------------------------------------------------- rendering


def _select(matrix: Matrix, only: str | None) -> list[str]:
    return [only] if only is not None else list(matrix)


def render_markdown(matrix: Matrix | None = None, *, only: str | None = None) -> str:
    """``docs/capabilities.md``: a summary table, then every cell's reason per provider."""
    matrix = matrix if matrix is not None else build_matrix()
    columns = _select(matrix, only)
    out = [
        "# Capability matrix",
        "",
        "<!-- Generated by baton.providers.capabilities.render_markdown() "
        "(`baton capabilities --markdown`). Do not edit: a test fails when this file is stale. -->",
        "",
        "Every row of the seed's Cursor capability inventory, for every provider baton ships. "
        "A cell is derived from code: the provider's closed inventory of native events "
        "(`baton/providers/inventory.py`) and its declarations for rows no event can show.",
        "",
        "- **implemented**: a tested baton code path, and the agent is known to use it.",
        "- **partial**: part of it works; the reason names the gap.",
        "- **unsupported**: the agent lacks it, or baton deliberately does not offer it.",
        "- **unverified**: not known either way (inferred evidence only, or none).",
        "",
        "## Summary",
        "",
        "| Capability | " + " | ".join(columns) + " |",
        "|---|" + "---|" * len(columns),
    ]
    for row in ROWS:
        out.append(
            f"| {row.title} | " + " | ".join(matrix[f][row.key].status for f in columns) + " |"
        )
    for family in columns:
        out += ["", f"## {family}", "", "| Capability | Status | Evidence |", "|---|---|---|"]
        for row in ROWS:
            cell = matrix[family][row.key]
            out.append(f"| {row.title} | {cell.status} | {_md(cell.reason)} |")
    if only is None:  # the protocol's part, once, after every provider's
        out += ["", acp_additions.render_markdown().rstrip("\n")]
    return "\n".join(out) + "\n"


def render_columns(families: Sequence[str], matrix: Matrix | None = None) -> str:
    """A status-only table of a few providers side by side (``docs/agents.md``'s Cursor)."""
    matrix = matrix if matrix is not None else build_matrix()
    out = [
        "| Capability | " + " | ".join(f"`{f}`" for f in families) + " |",
        "|---|" + "---|" * len(families),
    ]
    for row in ROWS:
        out.append(
            f"| {row.title} | " + " | ".join(matrix[f][row.key].status for f in families) + " |"
        )
    return "\n".join(out) + "\n"


def render_text(matrix: Matrix | None = None, *, only: str | None = None) -> str:
    """Plain text for a terminal: one block per provider, one line per row."""
    matrix = matrix if matrix is not None else build_matrix()
    width = max(len(r.title) for r in ROWS)
    lines: list[str] = []
    for family in _select(matrix, only):
        lines.append(family)
        for row in ROWS:
            cell = matrix[family][row.key]
            lines.append(f"  {row.title:<{width}}  {cell.status:<11}  {cell.reason}")
        lines.append("")
    return "\n".join(lines)


def render_json(matrix: Matrix | None = None, *, only: str | None = None) -> str:
    """``{"rows": [...], "providers": {family: {row: {status, reason}}}}``."""
    matrix = matrix if matrix is not None else build_matrix()
    data = {
        "rows": [{"key": r.key, "title": r.title} for r in ROWS],
        "providers": {
            family: {
                key: {"status": cell.status, "reason": cell.reason}
                for key, cell in matrix[family].items()
            }
            for family in _select(matrix, only)
        },
    }
    return json.dumps(data, indent=2, ensure_ascii=False) + "\n"


def load_probes(text: str) -> list[JsonMapping]:
    """Probe results from JSON: one probe object, a list, or ``{"probes": [...]}``."""
    data = json.loads(text)
    if isinstance(data, Mapping) and isinstance(data.get("probes"), list):
        data = data["probes"]
    items: Sequence[Any] = data if isinstance(data, list) else [data]
    return [p for p in items if isinstance(p, Mapping)]


def _md(text: str) -> str:
    return text.replace("|", "\\|").replace("\n", " ")
