"""What the CLI and the web use of baton.toml and the machine facts the surfaces read."""

from baton.config import BatonConfig, find_project_dir, load_config
from baton.lifeline import boot_id

__all__ = [
    "BatonConfig",
    "boot_id",
    "find_project_dir",
    "load_config",
]
