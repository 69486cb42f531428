"""The state diagrams in the docs, generated from every lifecycle's table (never by hand).

Every :class:`~baton.statetable.StateTable` in baton is listed in :data:`TABLES` by
its name: ``request``, ``session``, ``turn`` (one ACP prompt turn), ``task``,
``slot`` and ``dispatch`` (the team loop's), ``run`` (a run's status in the store).

A document marks where a diagram goes::

    <!-- state-diagram: task -->
    ...generated, replaced on every run...
    <!-- /state-diagram -->

``python -m baton.app.diagrams`` (or ``scripts/gen-state-diagrams``) rewrites
every marked block of ``docs/*.md``; ``--check`` exits 1 when one is stale, and a test
runs the check, so a change to a table without its docs fails the suite.
"""

from __future__ import annotations

import argparse
import re
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from baton.agents.builtin.plan_states import PLAN_ENTRY
from baton.requests.states import TABLE as REQUEST
from baton.runner.session_state import TABLE as SESSION
from baton.runner.turn import TABLE as TURN
from baton.statetable import StateTable
from baton.store.run_states import TABLE as RUN
from baton.team.states import MACHINES
from baton.worktrees.states import WORKTREE

__all__ = ["TABLES", "main", "render"]

TABLES: tuple[StateTable[Any, Any], ...] = (
    REQUEST,
    SESSION,
    TURN,
    *MACHINES,
    RUN,
    WORKTREE,
    PLAN_ENTRY,
)
"""Every lifecycle of baton; a test checks each has a diagram in the docs."""

_BLOCK = re.compile(
    r"(<!-- state-diagram: (?P<name>[a-z]+) -->\n)(?P<body>.*?)(<!-- /state-diagram -->)",
    re.DOTALL,
)
_BY_NAME = {table.name: table for table in TABLES}


def render(text: str) -> str:
    """``text`` with every marked diagram regenerated from its table."""

    def replace(match: re.Match[str]) -> str:
        name = match["name"]
        machine = _BY_NAME.get(name)
        if machine is None:
            raise ValueError(f"no state machine named {name!r} (known: {sorted(_BY_NAME)})")
        return f"{match.group(1)}```mermaid\n{machine.mermaid()}\n```\n{match.group(4)}"

    return _BLOCK.sub(replace, text)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m baton.app.diagrams")
    parser.add_argument("--check", action="store_true", help="exit 1 if a diagram is stale")
    parser.add_argument("docs", nargs="*", type=Path, help="documents (default: docs/*.md)")
    args = parser.parse_args(argv)
    paths = args.docs or sorted(Path("docs").glob("*.md"))
    stale = []
    for path in paths:
        text = path.read_text(encoding="utf-8")
        fresh = render(text)
        if fresh != text:
            stale.append(path)
            if not args.check:
                path.write_text(fresh, encoding="utf-8")
    if args.check and stale:
        print("stale state diagrams in: " + ", ".join(map(str, stale)), file=sys.stderr)
        print("run scripts/gen-state-diagrams", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
