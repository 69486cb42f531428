"""docs/agents.md is checked against the code, and its local-model examples are run as written.

Structure: every agent has its Install, Credentials, Mode, Local model and Verified parts. Facts:
the npm package and version, and the mode baton selects, are the built-in profile's. Examples:
every TOML block loads with ``load_config`` and launches without a problem, every ``baton``
command exists. Following the page: for Claude, Codex, OpenCode and Qwen, the ``*-local`` profile
of the page (only its port changed, to a scripted model server) runs the page's own
``baton run`` line in a fresh project, through the installed (pinned) agent, and the file the
model asked for is written.
"""

from __future__ import annotations

import os
import re
import shlex
import subprocess
import sys
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
import typer

from baton.cli.app import app
from baton.config import load_config
from baton.providers.catalog import BUILTIN_PROFILES
from baton.security.launch_env import plan_launch
from tests.support.agents import AGENTS_DIR, require_agent
from tests.support.anthropic_stub import AnthropicStub
from tests.support.llm_stub import ChatRequest, LLMStub, Reply, Text, ToolCall
from tests.support.opencode import OFFLINE_NPM_REGISTRY, REPO_ROOT, require_opencode, skip_opencode
from tests.support.responses_stub import ResponsesStub

DOC = REPO_ROOT / "docs" / "agents.md"
AGENTS = {
    "Claude": "claude",
    "Codex": "codex",
    "Gemini": "gemini",
    "OpenCode": "opencode",
    "Qwen": "qwen",
    "Cursor": "cursor",
    "Cursor SDK": "cursor-sdk",
}
PLACEHOLDER_PORT = "http://127.0.0.1:4000"


def doc() -> str:
    return DOC.read_text(encoding="utf-8")


def sections() -> dict[str, str]:
    parts = re.split(r"^## ", doc(), flags=re.MULTILINE)
    return {p.splitlines()[0].strip(): p for p in parts[1:]}


def blocks(text: str, lang: str) -> list[str]:
    return re.findall(rf"^```{lang}\n(.*?)^```", text, flags=re.MULTILINE | re.DOTALL)


@pytest.mark.parametrize("title", list(AGENTS))
def test_every_agent_has_install_credentials_mode_local_model_verified(title: str) -> None:
    section = sections()[title]
    for part in ("Install", "Credentials", "Mode", "Local model", "Verified"):
        assert f"* **{part}**:" in section, f"## {title} lacks its {part} part"


@pytest.mark.parametrize("title", list(AGENTS))
def test_the_page_names_the_pinned_package_and_the_selected_mode(title: str) -> None:
    section = sections()[title]
    profile = BUILTIN_PROFILES[AGENTS[title]]
    if profile.package_spec is not None:
        assert f"`{profile.package_spec}`" in section
        assert f"`baton agents install {profile.name}`" in section
    selected = re.search(r"baton selects (`[^`]+`|none)", section)
    assert selected is not None, f"## {title} does not say which mode baton selects"
    assert selected.group(1).strip("`") == (profile.mode or "none")


def _sources(toml: str, project: Path) -> None:
    for source in re.findall(r'source = "([^"]+)"', toml):
        path = project / source
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text("seeded from a file\n")


@pytest.mark.parametrize("index", range(len(blocks(doc(), "toml"))))
def test_every_toml_example_loads_and_launches_cleanly(tmp_path: Path, index: int) -> None:
    toml = blocks(doc(), "toml")[index]
    project = tmp_path / "project"
    project.mkdir()
    (project / "baton.toml").write_text(toml)
    _sources(toml, project)
    config = load_config(project, environ={})
    names = re.findall(r"^\[profiles\.([\w-]+)\]", toml, flags=re.MULTILINE)
    assert names, "an example without a profile"
    key = "sk-docs-example-0123456789abcdef"
    environ = {
        "PATH": "/usr/bin",
        **dict.fromkeys(("ANTHROPIC_API_KEY", "OPENAI_API_KEY", "GEMINI_API_KEY"), key),
        "CURSOR_API_KEY": key,
    }
    for name in names:
        plan = plan_launch(
            config.profile(name), root=tmp_path / "root", environ=environ, secrets_file=None
        )
        assert plan.problems == (), f"{name}: {plan.problems}"


def _commands() -> Iterator[list[str]]:
    for block in blocks(doc(), "sh"):
        for line in block.splitlines():
            words = shlex.split(line, comments=True)
            while words and "=" in words[0] and not words[0].startswith("-"):
                words = words[1:]  # VAR=value prefixes
            if words and words[0] == "baton":
                yield words[1:]


def test_every_command_on_the_page_exists() -> None:
    root = typer.main.get_command(app)
    found = list(_commands())
    assert len(found) >= 6
    for words in found:
        command: Any = root
        ctx = type(root).context_class(root)
        for word in words:
            if not hasattr(command, "get_command") or word.startswith("-"):
                break
            sub = command.get_command(ctx, word)
            if sub is None:
                break  # an argument (a profile name, a prompt)
            command = sub
        assert command is not root, f"`baton {' '.join(words)}` is not a baton command"
        options = {o for p in command.params for o in getattr(p, "opts", [])}
        for word in words:
            if word.startswith("--"):
                assert word.split("=")[0] in options, f"`baton {' '.join(words)}`: no {word}"


# ------------------------------------------------------------------ following the page


def _qwen_write(workspace: Path) -> Callable[[ChatRequest], Reply]:
    def script(req: ChatRequest) -> Reply:
        if req.has_tool_result or "write_file" not in req.tool_names:
            return Text("Done.")
        return ToolCall(
            "write_file", {"file_path": str(workspace / "hello.txt"), "content": "hi\n"}
        )

    return script


def _example(title: str) -> tuple[str, list[str]]:
    """The section's ``*-local`` TOML block and its ``baton run`` command line."""
    section = sections()[title]
    toml = next(b for b in blocks(section, "toml") if "-local]" in b)
    run = next(c for c in blocks(section, "sh") if "baton run" in c).strip()
    return toml, shlex.split(run)


CASES = {
    "Claude": ("claude", lambda ws: AnthropicStub(cwd=ws), lambda s: s.origin),
    "Codex": ("codex", lambda ws: ResponsesStub(cwd=ws), lambda s: s.origin),
    "OpenCode": ("opencode", lambda ws: LLMStub(cwd=ws), lambda s: s.origin),
    "Qwen": ("qwen", lambda ws: LLMStub(cwd=ws, script=_qwen_write(ws)), lambda s: s.origin),
}


@pytest.mark.slow
@pytest.mark.real_agent
@pytest.mark.parametrize("title", list(CASES))
def test_following_the_page_gets_a_real_agent_running(tmp_path: Path, title: str) -> None:
    name, make_stub, origin_of = CASES[title]
    env = {
        "PATH": os.environ["PATH"],
        "HOME": str(tmp_path / "home"),
        "XDG_STATE_HOME": str(tmp_path / "xdg"),
        "BATON_TOOLS_DIR": str(AGENTS_DIR),
        "COLUMNS": "200",
    }
    toml, argv = _example(title)
    if name == "opencode":
        if skip_opencode():
            pytest.skip("BATON_SKIP_OPENCODE=1")
        env["PATH"] = f"{require_opencode().parent}{os.pathsep}{env['PATH']}"
        # The page's profile, with npm pointed nowhere (OpenCode fetches plugins at start).
        toml += f'env = {{ npm_config_registry = "{OFFLINE_NPM_REGISTRY}" }}\n'
    else:
        require_agent(BUILTIN_PROFILES[name])
    project = tmp_path / "project"
    project.mkdir()
    while argv and "=" in argv[0]:
        key, _, value = argv.pop(0).partition("=")
        env[key] = value
    assert argv[0] == "baton"
    with make_stub(project) as stub:
        (project / "baton.toml").write_text(toml.replace(PLACEHOLDER_PORT, origin_of(stub)))
        done = subprocess.run(
            [sys.executable, "-m", "baton", *argv[1:]],
            cwd=project,
            env=env,
            capture_output=True,
            text=True,
            timeout=600,
        )
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    assert (project / "hello.txt").is_file(), done.stdout[-2000:]
    assert stub.completions(), "the agent never called the model server"
