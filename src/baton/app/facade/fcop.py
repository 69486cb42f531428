"""What the CLI and the web use of the FCoP port, the intake screen and the role tools' bindings."""

from baton.fcop_errors import CoordinationError
from baton.fcop_port.board import open_tasks
from baton.fcop_port.port import STAGES, FcopPort, Stage, TaskInfo
from baton.fcop_port.project import CoordinationContext, init_project, open_context
from baton.intake.screen import subject_problem
from baton.role_tools.binding import SlotAccess

__all__ = [
    "STAGES",
    "CoordinationContext",
    "CoordinationError",
    "FcopPort",
    "SlotAccess",
    "Stage",
    "TaskInfo",
    "init_project",
    "open_context",
    "open_tasks",
    "subject_problem",
]
