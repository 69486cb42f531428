"""The team loop (``baton up``): FCoP tasks to role sessions and back, as one durable state machine.

Above the FCoP rooms (:mod:`baton.fcop_port`, :mod:`baton.inbox`, the role MCP
tools) and :mod:`baton.runner` (agent sessions). One module per concept:

- :mod:`~baton.team.states`: the task, slot, dispatch, question and owner lifecycles as
  transition tables; :mod:`~baton.team.records`: the store rows as typed records;
- :mod:`~baton.team.next_step`: what to do next with one TASK, from facts only (pure),
  answered as one of :mod:`~baton.team.steps`; :mod:`~baton.team.facts` gathers the facts;
- :mod:`~baton.team.executor`: facts → next step → its handler, from the table in
  :mod:`~baton.team.handlers` (one module per kind of step), over the collaborators
  they are given: :mod:`~baton.team.book` (record moves), :mod:`~baton.team.turns`
  (a turn's three commits), :mod:`~baton.team.attention` (needs attention, ISSUEs),
  :mod:`~baton.team.two_stages` (repair), :mod:`~baton.team.prompts` (each turn's prompt);
- :mod:`~baton.team.loop`: the loop (doorbell router, role queues, slot workers, the
  breaker) and what it owns: :mod:`~baton.team.activity` (idle or busy),
  :mod:`~baton.team.ownership` (one ``baton up`` per project),
  :mod:`~baton.team.recovery` (crash recovery and adoption), :mod:`~baton.team.outbox`
  (what the role tools hand it), :mod:`~baton.team.answers` (waiting for the human),
  :mod:`~baton.team.sweeps` (the intake sweep);
- :mod:`~baton.team.slots`, :mod:`~baton.team.contract`, :mod:`~baton.team.role_sessions`:
  role sessions; :mod:`~baton.team.reaper` (the death watch);
  :mod:`~baton.team.migrate`: the pre-store side files moved into the store;
- :mod:`~baton.team.service`: ``baton up`` put together;
- :mod:`~baton.team.views`: read models for ``status``, ``sessions`` and the web.

See ``docs/coordination.md``.
"""
