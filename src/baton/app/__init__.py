"""baton's public composition root: ``async with Baton.open(project) as b:``.

One object owns a project's store (with every migration), its requests ledger, crash
recovery, the request brokers, the runs' emitters and the agent sessions; the CLI, the
web server, the team loop, the benches and the tests are built on it, so none of them
wires those parts by hand. The CLI and the web reach the rest of the core through
:mod:`baton.app.facade` (one module per area), never module by module.

``Baton`` is imported on first use (PEP 562), so ``baton.app.facade.store`` does not
pull the whole root (agents, runner, sessions) into a command that only reads the store.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from baton.app.root import Baton, Run, new_run_id

__all__ = ["Baton", "Run", "new_run_id"]


def __getattr__(name: str) -> Any:  # Any: PEP 562's signature; the names are typed above
    if name in __all__:
        from baton.app import root

        return getattr(root, name)
    raise AttributeError(f"module 'baton.app' has no attribute {name!r}")
