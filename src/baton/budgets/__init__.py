"""Budgets: what work may spend, and the usage ledger that says what it spent.

Pure code over plain data (no I/O, no clock of its own): the ``[budget]`` and
``[pricing]`` tables (:mod:`.limits`, :mod:`.pricing`), the rules that compare spend
with limits (:mod:`.rules`) and the ledger that turns every agent's usage reports into
per-turn deltas with their provenance (:mod:`.ledger`). The store keeps the ledger's
rows (``baton.store.budget_sql``), the runner meters a session against them
(``baton.runner.budget_watch``), the team loop parks and resumes TASKs by them.
"""
