"""``baton doctor``, ``pin``, ``verify`` and ``admit``: the security controls, inspectable.

A thin typer layer over :mod:`baton.security`; the main CLI mounts :data:`app`.

Exit codes: 0 fine; 1 a check failed (admission refused, pin mismatch); 2 bad usage or
configuration; 4 a security control refused the operation (``pin`` of a tree with links). Everything printed that could come from a repository or an agent
(file names, messages) is neutralized first, and credential values are never printed.
"""

from __future__ import annotations

import json
import os
import shutil
from collections.abc import Mapping
from pathlib import Path
from typing import Annotated, Any

import typer
from rich.console import Console
from rich.table import Table

from baton.app.facade.agents import (
    KNOWN_FAMILIES,
    AdmissionVerdict,
    AgentProfile,
    Manifest,
    PinMismatch,
    admit,
    expand_families,
    load_manifest,
    locate_install,
    manifest_path,
    pin_status,
    pin_tree,
    plan_launch,
    platform_key,
    save_manifest,
    verify_tree,
)
from baton.app.facade.config import BatonConfig
from baton.cli.project import ProjectOption, any_config, project_config, start_dir
from baton.cli.shared import EXIT_USAGE, CommandError, command_app
from baton.errors import ConfigError
from baton.security.display import neutralize_terminal

__all__ = ["app"]

app = command_app(
    help="Inspect baton's security controls: launch environments, pins, admission.",
    no_args_is_help=True,
)

EXIT_CHECK_FAILED = 1

PRIVATE_ROOT_PLACEHOLDER = Path("<private-root>")


def _out() -> Console:
    return Console(highlight=False, soft_wrap=True)


def _err() -> Console:
    return Console(stderr=True, highlight=False, soft_wrap=True)


def _say(console: Console, text: str) -> None:
    console.print(neutralize_terminal(text), markup=False, highlight=False)


def _config(project: Path | None, *, needs_project: bool = False) -> BatonConfig:
    return project_config(project) if needs_project else any_config(project)


def _profiles(cfg: BatonConfig, agent: str | None) -> list[AgentProfile]:
    if agent is None:
        return [cfg.profiles[name] for name in sorted(cfg.profiles)]
    return [cfg.profile(agent)]


# ------------------------------------------------------------------------- doctor


def _doctor_row(
    cfg: BatonConfig, profile: AgentProfile, environ: Mapping[str, str]
) -> dict[str, Any]:
    from baton.app.facade.agents import installed_agent

    # Where a launch finds it: baton's tools dir first (`baton agents install`), then PATH,
    # the same lookup as `baton agents`.
    install = installed_agent(profile, environ)
    argv0 = profile.argv()[0] if profile.command else ""
    found = (
        str(install.executable)
        if install is not None
        else shutil.which(argv0, path=environ.get("PATH", ""))
        if argv0
        else None
    )
    plan = plan_launch(
        profile, root=PRIVATE_ROOT_PLACEHOLDER, environ=environ, secrets_file=cfg.secrets_file
    )
    try:
        families: list[str] = list(expand_families(profile.admission))
        admission_error = None
    except ConfigError as exc:
        families, admission_error = [], str(exc)
    problems = list(plan.problems)
    if admission_error:
        problems.append(admission_error)
    return {
        "agent": profile.name,
        "title": profile.title,
        "command": list(profile.argv()),
        "command_found": found,
        "install_hint": profile.install_hint,
        "env": [{"name": r.name, "source": r.source, "value": r.value} for r in plan.rows],
        "private_dirs": list(plan.dirs),
        "admission_families": families,
        "allow_workspace_config": profile.allow_workspace_config,
        "pin": pin_status(profile, cfg.state_dir),
        "problems": problems,
    }


@app.command()
def doctor(
    name: Annotated[
        str | None,
        typer.Argument(
            help="Only this profile (the shape of `baton probe NAME`).", metavar="AGENT"
        ),
    ] = None,
    agent: Annotated[
        str | None, typer.Option("--agent", hidden=True, help="The same as AGENT.")
    ] = None,
    as_json: Annotated[bool, typer.Option("--json", help="Machine-readable output.")] = False,
    project: ProjectOption = None,
) -> None:
    """Show, per profile, exactly what an agent launch would receive (values masked)."""
    if name is not None and agent is not None and name != agent:
        raise CommandError(
            f"two profiles named: {name!r} and --agent {agent!r}",
            hint="name one: `baton doctor NAME`",
            code=EXIT_USAGE,
        )
    agent = name or agent
    cfg = _config(project)
    rows = [_doctor_row(cfg, p, os.environ) for p in _profiles(cfg, agent)]
    if as_json:
        typer.echo(json.dumps(rows, indent=2, ensure_ascii=False))
        return
    out = _out()
    for row in rows:
        found = row["command_found"]
        _say(out, f"● {row['agent']} — {row['title']}")
        _say(out, f"  command: {' '.join(row['command'])}")
        _say(
            out,
            f"  found:   {found}"
            if found
            else f"  found:   no ({row['install_hint'] or 'not installed'})",
        )
        table = Table(show_header=True, header_style="bold", box=None, pad_edge=False)
        table.add_column("  variable")
        table.add_column("source")
        table.add_column("value")
        for env in row["env"]:
            table.add_row(
                "  " + neutralize_terminal(env["name"]),
                neutralize_terminal(env["source"]),
                neutralize_terminal(env["value"]),
            )
        out.print(table, markup=False)
        _say(out, f"  private dirs: {', '.join(row['private_dirs'])}")
        families = ", ".join(row["admission_families"]) or "none"
        override = (
            " (allow_workspace_config: refusals only warn)" if row["allow_workspace_config"] else ""
        )
        _say(out, f"  admission: {families}{override}")
        _say(out, f"  pin: {row['pin']}")
        for problem in row["problems"]:
            _say(out, f"  ✗ {problem}")
        _say(out, "")


# ---------------------------------------------------------------------- pin, verify


@app.command()
def pin(
    agent: Annotated[str, typer.Argument(help="Profile whose installed tree to pin.")],
    root: Annotated[
        Path | None, typer.Option("--root", help="Tree to pin (default: found from the command).")
    ] = None,
    entrypoint: Annotated[
        str | None, typer.Option("--entrypoint", help="Executable, relative to the root.")
    ] = None,
    out: Annotated[
        Path | None, typer.Option("--out", help="Manifest to write (default: the profile's pin).")
    ] = None,
    allow_hardlinks: Annotated[
        bool,
        typer.Option(
            "--allow-hardlinks",
            help="Accept files that have other hard links outside the tree (npm postinstall).",
        ),
    ] = False,
    project: ProjectOption = None,
) -> None:
    """Pin an installed agent's whole tree (every file's mode, size and SHA-256)."""
    cfg = _config(project, needs_project=True)
    profile = cfg.profile(agent)
    version = "unknown"
    if root is None or entrypoint is None:
        install = locate_install(profile, os.environ)
        if root is not None and install.root != root.resolve():
            raise ConfigError(
                f"{profile.command[0]} does not run from {root}; pass --entrypoint as well"
            )
        root = install.root
        entrypoint = entrypoint or install.entrypoint
        version = install.version
    manifest = pin_tree(
        root,
        entrypoint,
        agent=profile.name,
        version=version,
        allow_external_hardlinks=allow_hardlinks,
    )
    target = out or manifest_path(profile, cfg.state_dir)
    existing = load_manifest(target)
    if existing is not None and existing.agent == manifest.agent:
        key = platform_key()
        manifest = Manifest(
            manifest.agent,
            manifest.version,
            existing.with_platform(key, manifest.for_platform(key)).platforms,
        )
    save_manifest(target, manifest)
    entry = manifest.for_platform()
    _say(_out(), f"pinned {agent} {manifest.version} ({platform_key()}): {len(entry.files)} files")
    _say(_out(), f"  closure sha256 {entry.closure_sha256}")
    _say(_out(), f"  entrypoint     {entry.entrypoint}")
    _say(_out(), f"  manifest       {target}")


@app.command()
def verify(
    agent: Annotated[str, typer.Argument(help="Profile whose installed tree to verify.")],
    root: Annotated[
        Path | None,
        typer.Option("--root", help="Tree to verify (default: found from the command)."),
    ] = None,
    project: ProjectOption = None,
) -> None:
    """Verify an installed agent against its pin; exit 1 naming every difference."""
    cfg = _config(project, needs_project=True)
    profile = cfg.profile(agent)
    path = manifest_path(profile, cfg.state_dir)
    manifest = load_manifest(path)
    if manifest is None:
        raise ConfigError(f"{agent} is not pinned ({path} does not exist); run `baton pin {agent}`")
    tree = root if root is not None else locate_install(profile, os.environ).root
    try:
        verify_tree(tree, manifest)
    except PinMismatch as exc:
        err = _err()
        _say(err, f"baton: {agent} at {tree} does not match its pin {path}")
        for problem in exc.problems:
            _say(err, f"  ✗ {problem}")
        raise typer.Exit(EXIT_CHECK_FAILED) from None
    pin_entry = manifest.for_platform()
    _say(_out(), f"verified {agent} {manifest.version}: {len(pin_entry.files)} files match {path}")


# -------------------------------------------------------------------------- admit


def _print_verdict(verdict: AdmissionVerdict) -> None:
    out = _out()
    families = ", ".join(verdict.families) or "none"
    scanned = ", ".join(verdict.scanned)
    if verdict.admitted:
        _say(out, f"admitted (families: {families}; scanned: {scanned})")
    else:
        _say(out, f"refused (families: {families}; scanned: {scanned})")
    for finding in verdict.refusals:
        _say(out, f"  ✗ {finding.describe()}")
    for finding in verdict.warnings:
        _say(out, f"  ! allowed by allow_workspace_config: {finding.describe()}")


@app.command(name="admit")
def admit_cmd(
    directory: Annotated[
        Path | None, typer.Argument(help="Workspace to check (default: the current directory).")
    ] = None,
    agent: Annotated[
        str | None,
        typer.Option("--agent", help="Check what this profile would load (default: all)."),
    ] = None,
    as_json: Annotated[bool, typer.Option("--json", help="Machine-readable output.")] = False,
    project: ProjectOption = None,
) -> None:
    """Print the admission verdict for a workspace; exit 1 when it is refused."""
    workspace = directory or start_dir(project)
    if agent is None:
        families: tuple[str, ...] = tuple(sorted(KNOWN_FAMILIES - {"builtin"}))
        allow = False
    else:
        profile = _config(project).profile(agent)
        families, allow = profile.admission, profile.allow_workspace_config
    verdict = admit(workspace, families, allow_workspace_config=allow)
    if as_json:
        typer.echo(json.dumps(verdict.to_dict(), indent=2, ensure_ascii=False))
    else:
        _print_verdict(verdict)
    if not verdict.admitted:
        raise typer.Exit(EXIT_CHECK_FAILED)
