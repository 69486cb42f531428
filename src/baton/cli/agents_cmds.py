"""``baton agents``, ``agents install`` and ``agents login``: from zero to a real agent.

* ``baton agents`` lists the profiles: whether each is installed (and which version, from
  baton's tools dir or ``PATH``), its pin state, the approval mode baton selects, and
  whether credentials are bound (a bound credential, or a login made with ``agents login``).
* ``baton agents install NAME…`` installs the exact npm package of a built-in profile into
  baton's tools dir and pins the installed tree (:mod:`baton.security.agent_tools`).
* ``baton agents login NAME`` runs the agent's own login (ACP terminal authentication)
  inside the profile's login root, which later launches of the profile use as their
  private root (:mod:`baton.runner.agent_login`).

Errors go through the CLI's one translation (``Type: message``, exit code by type).
"""

from __future__ import annotations

import os
import shutil
from collections.abc import Mapping
from pathlib import Path
from typing import Annotated, Any

import typer
from rich.console import Console
from rich.table import Table

import baton
from baton.app.facade.agents import (
    APPROVAL_TABLES,
    NODE,
    PYTHON_PLACEHOLDER,
    AgentProfile,
    RegistryUnreachable,
    install_agent,
    installed_agent,
    installed_bridge,
    is_bundled,
    locate_install,
    node_version,
    pin_status,
    plan_launch,
    tools_dir,
)
from baton.app.facade.config import BatonConfig
from baton.cli.project import ProjectOption, any_config
from baton.cli.render import safe
from baton.cli.shared import (
    EXIT_AGENT,
    EXIT_USAGE,
    CommandError,
    command_app,
    err,
    guarded,
    out,
    print_ndjson,
    say_error,
)
from baton.security.display import terminal_safe

__all__ = ["agent_rows", "app"]

app = command_app()
agents_app = command_app(
    help="Agent profiles: installed version, pin, approval mode, credentials.",
    invoke_without_command=True,
)
app.add_typer(agents_app, name="agents")

EXIT_OFFLINE = EXIT_AGENT
"""``agents install`` when npm cannot reach its registry: the agent cannot be installed."""


def _say(console: Console, text: str) -> None:
    console.print(safe(text), highlight=False)


def _credentials(config: BatonConfig, profile: AgentProfile, environ: Mapping[str, str]) -> str:
    """``env:NAME``/``file:NAME`` for bound credentials that resolve, ``login`` for a login."""
    from baton.app.facade.runs import login_record

    parts: list[str] = []
    if profile.credentials:
        plan = plan_launch(
            profile, root=Path("/nonexistent"), environ=environ, secrets_file=config.secrets_file
        )
        missing = {p.split()[1] for p in plan.problems if p.startswith("credential ")}
        for binding in profile.credentials:
            state = "missing" if binding.name in missing else binding.source
            parts.append(f"{binding.name} ({state})")
    record = login_record(profile, environ)
    if record is not None:
        parts.append(f"login ({record.get('method', '?')})")
    return ", ".join(parts) or "none"


# Any: JSON out (``baton agents --json``).
def agent_rows(config: BatonConfig, environ: Mapping[str, str]) -> list[dict[str, Any]]:
    """One row per profile, as ``baton agents --json`` prints them."""
    rows = []
    for profile in config.profiles.values():
        install = installed_agent(profile, environ)
        where: str | None
        version: str | None
        if install is not None:
            where, version = str(install.executable), install.version
            pin = "pinned (tools dir)" if install.manifest_path.is_file() else "not pinned"
        else:
            argv = profile.argv()
            where = shutil.which(argv[0], path=environ.get("PATH")) if argv else None
            version = None
            if profile.command[:1] == (PYTHON_PLACEHOLDER,):
                version = f"{baton.__version__} (ships with baton)"
            elif is_bundled(profile.command):  # the bridge inside the cursor-sdk wheel
                bridge = installed_bridge()
                where = str(bridge.root / NODE) if bridge is not None else None
                version = bridge.version if bridge is not None else None
            elif where is not None and profile.package is not None:
                try:
                    version = locate_install(profile, environ).version
                except Exception:  # a broken install shows as unknown, not a crash
                    version = "unknown"
            pin = pin_status(profile, config.state_dir)
        table = APPROVAL_TABLES.get(profile.family)
        rows.append(
            {
                "name": profile.name,
                "title": profile.title,
                "command": profile.argv(),
                "source": profile.source,
                "installed": where is not None,
                "path": where,
                "version": version,
                "package": profile.package_spec,
                "pin": pin,
                "version_matches": None
                if version is None or profile.version is None
                else version == profile.version,
                "mode": profile.mode,
                "agent_approves": profile.agent_approves,
                "approval_evidence": table.evidence if table else None,
                "credentials": _credentials(config, profile, environ),
                "install_hint": profile.install_hint,
            }
        )
    return rows


@agents_app.callback()
@guarded
def agents(
    ctx: typer.Context,
    json_output: Annotated[
        bool, typer.Option("--json", help="NDJSON, one profile per line.")
    ] = False,
    project: ProjectOption = None,
) -> None:
    """Agent profiles (built-in and the project's): installed version, pin, approval mode,
    credentials. Then `baton agents install NAME` and `baton agents login NAME`."""
    if ctx.invoked_subcommand is not None:
        return
    config = any_config(project)
    rows = agent_rows(config, os.environ)
    if json_output:
        print_ndjson(rows)
        return
    console = out()
    table = Table(box=None, pad_edge=False, header_style="bold")
    for column in ("agent", "installed", "pin", "mode", "credentials"):
        table.add_column(column, overflow="fold")
    missing = []
    for row in rows:
        if row["installed"]:
            version = row["version"] or "?"
            if row["version_matches"] is False:
                version += f" (baton pins {row['package']})"
            installed = f"[green]{safe(version)}[/]"
        else:
            installed = "[dim]no[/]"
            if row["install_hint"]:
                missing.append(row)
        mode = safe(row["mode"] or "—")
        if row["agent_approves"]:
            mode += " [red](agent approves)[/]"
        table.add_row(
            safe(row["name"]), installed, safe(row["pin"]), mode, safe(row["credentials"])
        )
    console.print(table)
    for row in missing:
        # One line each, never cut: the command is what the user copies.
        # The hint is the profile's own (catalog or baton.toml), not agent text: made safe,
        # but not marked as forged framing (it starts with "baton").
        hint = terminal_safe(row["install_hint"], inline=True, mark=False)
        console.print(f"install {safe(row['name'])}: {hint}", soft_wrap=True)


@agents_app.command("install")
def install(
    names: Annotated[list[str], typer.Argument(help="Built-in profiles to install.")],
    tools: Annotated[
        Path | None,
        typer.Option("--tools-dir", help="Where to install (default: $BATON_TOOLS_DIR or XDG)."),
    ] = None,
    project: ProjectOption = None,
) -> None:
    """Install the pinned npm package of each profile into baton's tools dir, and pin it."""
    config = any_config(project)
    profiles = [config.profile(name) for name in names]
    console = out()
    environ = dict(os.environ)
    node = node_version(environ)
    if node is None:
        raise CommandError(
            "node is not on PATH", hint="install Node.js 20 or newer first", code=EXIT_USAGE
        )
    target = tools if tools is not None else tools_dir(environ)
    for profile in profiles:
        try:
            installed = install_agent(
                profile, environ, tools=target, log=lambda line: _say(err, f"baton: {line}")
            )
        except RegistryUnreachable as exc:
            say_error(f"RegistryUnreachable: {exc}", "check the network or npm's registry setting")
            raise typer.Exit(EXIT_OFFLINE) from None
        _say(
            console,
            f"{profile.name}: {installed.package}@{installed.version} → {installed.executable}",
        )
    _say(err, f"baton: node {node}; tools dir {target}")


@agents_app.command("login")
def login(
    name: Annotated[str, typer.Argument(help="Profile to log in.")],
    method: Annotated[
        str | None, typer.Option("--method", help="Login method id (see --list).")
    ] = None,
    list_only: Annotated[
        bool, typer.Option("--list", help="Only list the agent's login methods.")
    ] = False,
    project: ProjectOption = None,
) -> None:
    """Run the agent's own login inside the profile's login root (its tokens stay there)."""
    import asyncio
    import subprocess

    from baton.app.facade.agents import prepare_launch, verify_before_launch
    from baton.app.facade.runs import (
        auth_methods,
        authenticate,
        choose_method,
        login_root,
        record_login,
        terminal_login_argv,
    )
    from baton.errors import AgentError

    config = any_config(project)
    profile = config.profile(name)
    environ = dict(os.environ)
    root = login_root(profile, environ)
    verified = verify_before_launch(profile, config.state_dir, environ)
    argv = profile.argv()
    if verified is not None:
        argv = [str(verified.executable), *argv[1:]]
    launch = prepare_launch(
        profile,
        workspace=root / "home",  # no project takes part in a login
        base_dir=root.parent,
        environ=environ,
        secrets_file=config.secrets_file,
        persistent_root=root,
    )
    console = out()
    # The agent runs in its own private HOME, not in the project it may not trust.
    home = Path(launch.env["HOME"])
    try:
        methods = asyncio.run(
            auth_methods(argv, launch.env, home, timeout=profile.initialize_timeout)
        )
        if list_only:
            table = Table("method", "type", "name", "runs / needs", box=None)
            for m in methods:
                extra = " ".join(m.args) if m.type == "terminal" else ""
                table.add_row(
                    *(safe(v) for v in (m.id, m.type, m.name, extra or ", ".join(m.variables)))
                )
            console.print(table)
            return
        chosen = choose_method(methods, method)
        _say(console, f"{profile.name}: logging in with {chosen.id} ({chosen.name}) in {root}")
        if chosen.type == "terminal":
            done = subprocess.run(
                terminal_login_argv(argv, chosen),
                env={**launch.env, **chosen.env},
                cwd=home,
                check=False,
            )
            if done.returncode != 0:
                raise AgentError(
                    f"{profile.name}: the login ({chosen.id}) exited with code {done.returncode}"
                )
        else:
            asyncio.run(
                authenticate(argv, launch.env, home, chosen, timeout=profile.session_timeout)
            )
        record_login(root, chosen)
    finally:
        launch.cleanup()
    _say(console, f"{profile.name}: logged in; its launches now use {root} as their private root")
