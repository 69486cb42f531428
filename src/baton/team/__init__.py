"""The team loop (``baton up``): FCoP tasks to role sessions and back, as one durable state machine.

Above the FCoP rooms (:mod:`baton.fcop_port`, :mod:`baton.inbox`, the role MCP
tools) and :mod:`baton.runner` (agent sessions). One module per concept:

- :mod:`~baton.team.states`: the task, slot and dispatch lifecycles as transition tables;
- :mod:`~baton.team.records`: the store rows as typed records;
- :mod:`~baton.team.decide`: what to do next, from facts only (pure), answered as one of
  :mod:`~baton.team.steps`; :mod:`~baton.team.facts` gathers those facts;
- :mod:`~baton.team.executor` (on :mod:`~baton.team.book` and :mod:`~baton.team.turns`)
  does it; :mod:`~baton.team.prompts` builds each turn's prompt;
- :mod:`~baton.team.loop`: the daemon (doorbell, queues, slot workers);
  :mod:`~baton.team.startup`: taking the project, migrations, crash recovery;
- :mod:`~baton.team.slots`, :mod:`~baton.team.contract`, :mod:`~baton.team.role_sessions`:
  role sessions; :mod:`~baton.team.human`, :mod:`~baton.team.reaper`;
  :mod:`~baton.team.migrate`: the pre-store side files moved into the store;
- :mod:`~baton.team.service`: ``baton up`` put together;
- :mod:`~baton.team.views`: read models for ``status``, ``sessions`` and the web.

See ``docs/coordination.md``.
"""
