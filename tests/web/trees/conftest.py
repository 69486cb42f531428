"""The team loop's fixtures (a real FCoP workspace, store and git repository, fake role
sessions), for the pages that show a task tree's change."""

from __future__ import annotations

from tests.team.conftest import Team, authority, port, root, state_dir, team

__all__ = ["Team", "authority", "port", "root", "state_dir", "team"]
