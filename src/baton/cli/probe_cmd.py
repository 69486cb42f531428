"""``baton probe``: what an agent advertises (protocol, capabilities, auth, modes, options)."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Annotated, Any

import typer
from rich.table import Table

from baton.app import Baton
from baton.app.facade.agents import AgentProfile
from baton.app.facade.config import BatonConfig
from baton.cli.project import ProjectOption, project_config, start_dir
from baton.cli.render import safe
from baton.cli.shared import (
    EXIT_AGENT,
    command_app,
    exit_for,
    out,
    print_json,
    progress,
    say_error,
)
from baton.errors import BatonError

__all__ = ["app"]

app = command_app()

_OWN_KEYS = frozenset({"agent", "session", "session_error", "error_type", "auth_methods", "_exit"})


@app.command()
def probe(
    agent: Annotated[str, typer.Argument(help="Agent profile to probe.")],
    json_output: Annotated[bool, typer.Option("--json", help="One JSON object.")] = False,
    project: ProjectOption = None,
) -> None:
    """Show what an agent advertises: protocol, capabilities, auth, modes, config options."""
    config = project_config(project)
    workspace = config.project_dir or start_dir(project)
    profile = config.profile(agent)
    with progress(f"starting {profile.name} and asking what it supports…"):
        result = asyncio.run(_probe(config, profile, workspace))
    code = result.pop("_exit", EXIT_AGENT)
    if json_output:
        print_json(result)
    else:
        console = out()
        table = Table("field", "value", box=None, show_header=False)
        for key, value in result.items():
            table.add_row(safe(key), safe(json.dumps(value, ensure_ascii=False)))
        console.print(table)
    if result.get("session_error") is not None:
        if not json_output:
            say_error(f"{profile.name} did not start a session: {result['session_error']}")
        raise typer.Exit(code)


async def _probe(config: BatonConfig, profile: AgentProfile, workspace: Path) -> dict[str, Any]:
    out: dict[str, Any] = {"agent": profile.name}
    async with (
        Baton.open(workspace, config=config, recover=False) as baton,
        baton.run(kind="probe", agent=profile.name, cwd=workspace) as run,
    ):
        try:
            session = await baton.open_session(
                profile,
                run=run,
                requests=baton.broker("none", wait_timeout=0, notify=False),
                workspace=workspace,
            )
        except BatonError as exc:
            # Any refusal (security, configuration, the agent's own error) is a failed probe:
            # printed, non-zero with the shared exit code, never stored as completed.
            out["session_error"] = str(exc)
            out["error_type"] = type(exc).__name__
            out["_exit"] = exit_for(exc)
            auth = getattr(exc, "auth_methods", ())
            if auth:
                out["auth_methods"] = list(auth)
            return out
        try:
            init = session.initialize_result
            if init is not None:
                # The answer as sent (unknown fields too), never over baton's own keys.
                out.update({k: v for k, v in init.raw.items() if k not in _OWN_KEYS})
            out["session"] = {
                k: v for k, v in session.session_result.items() if k in ("modes", "configOptions")
            }
            out["session_error"] = None
            run.status = "completed"
        finally:
            await session.close("probe finished")
    return out
