"""The team loop (``baton up``): FCoP tasks to role sessions and back, as one durable state machine.

Above :mod:`baton.coordination` (FCoP through ``fcop``, the doorbell, the role MCP
tools) and :mod:`baton.runner` (agent sessions). One module per concept:

- :mod:`~baton.team.states`: the task, slot and turn lifecycles as transition tables;
- :mod:`~baton.team.records`: the store rows as typed records;
- :mod:`~baton.team.decide`: what to do next, from facts only (pure);
- :mod:`~baton.team.executor` and :mod:`~baton.team.loop`: doing it (the daemon);
- :mod:`~baton.team.recovery`: host-side repair of FCoP state after a crash;
- :mod:`~baton.team.migrate`: the pre-store side files moved into the store;
- :mod:`~baton.team.role_sessions`, :mod:`~baton.team.human`, :mod:`~baton.team.reaper`;
- :mod:`~baton.team.views`: read models for ``status``, ``sessions`` and the web.

See ``docs/coordination.md``.
"""
