"""FCoP coordination: the doorbell, role sessions, role-scoped MCP tools, the task loop.

Submodules are imported on demand (``fcop``, ``mcp`` and ``watchfiles`` are loaded only
by the modules that need them); see ``docs/coordination.md`` for the whole picture.
"""
