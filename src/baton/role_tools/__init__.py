"""The role tool server: FCoP as MCP tools for one role session, served by ``baton up``.

Owns :class:`~baton.role_tools.server.RoleTools` (the tools, identity from the binding,
never from arguments), the binding, pointer and outbox in the store (:mod:`.binding`),
the team loop's hub for every slot (:mod:`.hub`: a unix socket for :mod:`.stdio_shim`, the
stdlib-only process an agent runs, and loopback HTTP through :mod:`.http_front`), the
slot credentials (:mod:`.credentials`) and the per-slot server process
(:mod:`.slot_server`). Its port has no trusted evaluator: the tools hold no authority.

May import :mod:`baton.fcop_port`, :mod:`baton.workflow`, :mod:`baton.intake`'s screen,
:mod:`baton.team_config`, :mod:`baton.store` and the leaves; never the team loop, the
doorbell or a session. ``mcp`` is loaded only by the modules that serve.
See ``docs/coordination.md`` ("The role MCP tools").
"""
