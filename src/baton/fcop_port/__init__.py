"""The FCoP port: baton's one way into an FCoP workspace, through the ``fcop`` library.

Owns :class:`~baton.fcop_port.port.FcopPort` and its parts (:mod:`.base`, :mod:`.reads`,
:mod:`.creation`, :mod:`.evidence`, :mod:`.transitions`), the records it answers with
(:mod:`.records`), the trusted evaluator that authorizes T4/T5 (:mod:`.authority`),
legacy detection and ``init`` (:mod:`.workspace`), host-side crash recovery
(:mod:`.recovery`), opening a project's workspace with its team and key
(:mod:`.project`), the task board ``status`` shows (:mod:`.board`), and
:mod:`.lifecycle`: baton's own O(1) write paths over fcop's Core (T1–T5, REPORTs).

May import :mod:`baton.intake` (every file is screened before ``fcop`` parses it),
:mod:`baton.fcop_errors`, :mod:`baton.team_config`, :mod:`baton.config` and the leaves;
never the store, a session, the doorbell, the role tools or the team loop. Submodules are
imported on demand (``fcop`` is loaded only by the modules that need it); see
``docs/coordination.md`` and ``docs/lifecycle.md``.
"""
