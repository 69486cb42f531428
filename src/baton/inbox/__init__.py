"""The inbox: TASK files landing in ``fcop/_lifecycle/inbox/``, noticed, routed or refused.

Owns the doorbell (:mod:`.doorbell`: the kernel watch, the drain, the settle queue), the
inspection of one entry (:mod:`.inspection`: facts, stability, screen, Core, routing),
refusals (:mod:`.refusals`: ISSUEs and quarantine) and what it emits
(:mod:`.doorbell_events`). It only reads and reports: the team loop claims and dispatches.

May import :mod:`baton.fcop_port` (every arrival is read through Core),
:mod:`baton.intake` (screened first), :mod:`baton.fcop_errors`, :mod:`baton.events` and
the leaves; never the store, the role tools or the team loop. See ``docs/intake.md``.
"""
