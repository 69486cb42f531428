"""What the CLI and the web use of the team loop's views and controls."""

from baton.team import views
from baton.team.contract import RoleSession, RoleSessionFactory
from baton.team.controls import ControlRefused, request_cancel
from baton.team.handlers.review import changes_line
from baton.team.loop import TeamLoop, TeamLoopBusy
from baton.team.records import TaskRecord
from baton.team.views import slot_views, task_views, team_view

__all__ = [
    "ControlRefused",
    "RoleSession",
    "RoleSessionFactory",
    "TaskRecord",
    "TeamLoop",
    "TeamLoopBusy",
    "changes_line",
    "request_cancel",
    "slot_views",
    "task_views",
    "team_view",
    "views",
]
