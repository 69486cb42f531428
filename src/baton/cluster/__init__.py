"""Cluster mode (issue 16): role slots placed on worker hosts, fenced by epoch.

:mod:`~baton.cluster.placement` is the pure core (the placement lifecycle, the
coordinator's decision, the holder's watchdog); :mod:`~baton.cluster.fencing`
commits its moves and fences side effects through the store (SQLite or
PostgreSQL). Nothing here is imported on the single-machine path.
"""
