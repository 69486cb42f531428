"""baton's public composition root: ``async with Baton.open(project) as b:``.

One object owns a project's store (with every migration), its requests ledger, crash
recovery, the request brokers, the runs' emitters and the agent sessions; the CLI, the
web server, the team daemon, the benches and the tests are built on it, so none of them
wires those parts by hand.
"""

from baton.app.root import Baton, Run, new_run_id

__all__ = ["Baton", "Run", "new_run_id"]
