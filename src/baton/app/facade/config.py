"""What the CLI and the web use of baton.toml and the machine facts the surfaces read.

The surfaces import these names from here, never from the core's modules, so the
core can move behind them (tests/test_architecture.py holds the rule).
"""

from baton.config import BatonConfig, find_project_dir, load_config
from baton.lifeline import boot_id

__all__ = [
    "BatonConfig",
    "boot_id",
    "find_project_dir",
    "load_config",
]
