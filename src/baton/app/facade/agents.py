"""What the CLI and the web use of agent profiles, capabilities and the hardening the
agent commands show."""

from baton.agent_profile import PYTHON_PLACEHOLDER, AgentProfile
from baton.providers.approval import APPROVAL_TABLES
from baton.providers.capabilities import (
    build_matrix,
    family_of,
    load_probes,
    render_json,
    render_markdown,
    render_text,
)
from baton.security.admission import KNOWN_FAMILIES, AdmissionVerdict, admit, expand_families
from baton.security.agent_installs import installed_agent, tools_dir
from baton.security.agent_tools import RegistryUnreachable, install_agent, node_version
from baton.security.bridge_pin import NODE, installed_bridge, is_bundled
from baton.security.distribution import (
    load_manifest,
    locate_install,
    manifest_path,
    pin_status,
    save_manifest,
    verify_before_launch,
)
from baton.security.launch_env import plan_launch, prepare_launch
from baton.security.manifest import Manifest, platform_key
from baton.security.paths import OUTSIDE_MASK, display_path
from baton.security.pinning import PinMismatch, pin_tree, verify_tree
from baton.security.redact import Redactor

__all__ = [
    "APPROVAL_TABLES",
    "KNOWN_FAMILIES",
    "NODE",
    "OUTSIDE_MASK",
    "PYTHON_PLACEHOLDER",
    "AdmissionVerdict",
    "AgentProfile",
    "Manifest",
    "PinMismatch",
    "Redactor",
    "RegistryUnreachable",
    "admit",
    "build_matrix",
    "display_path",
    "expand_families",
    "family_of",
    "install_agent",
    "installed_agent",
    "installed_bridge",
    "is_bundled",
    "load_manifest",
    "load_probes",
    "locate_install",
    "manifest_path",
    "node_version",
    "pin_status",
    "pin_tree",
    "plan_launch",
    "platform_key",
    "prepare_launch",
    "render_json",
    "render_markdown",
    "render_text",
    "save_manifest",
    "tools_dir",
    "verify_before_launch",
    "verify_tree",
]
