"""The FCoP workflow as baton runs it: what a role is told and how its work is judged (pure).

Owns the role context header and the prompts built on it (:mod:`.header`), what a report's
result word means and when a leader may call its work done (:mod:`.results`), when a
delegated task may start (:mod:`.ordering`), and the document a human reviews
(:mod:`.review_summary`). Deterministic functions over plain data: no clock, no files.

May import :mod:`baton.security` (display safety) and the leaves; nothing that does I/O.
"""
