"""``baton probe``: what an agent advertises (protocol, capabilities, auth, modes, options)."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Annotated, Any

import typer
from rich.console import Console
from rich.table import Table

from baton.app import Baton
from baton.cli.render import safe
from baton.cli.shared import EXIT_AGENT
from baton.config import BatonConfig, load_config
from baton.errors import AgentError
from baton.providers.profile import AgentProfile

__all__ = ["app"]

app = typer.Typer(add_completion=False, pretty_exceptions_enable=False)


@app.command()
def probe(
    agent: Annotated[str, typer.Argument(help="Agent profile to probe.")],
    cwd: Annotated[Path, typer.Option(help="Workspace for session/new.")] = Path(),
    json_output: Annotated[bool, typer.Option("--json")] = False,
) -> None:
    """Show what an agent advertises: protocol, capabilities, auth, modes, config options."""
    workspace = cwd.resolve()
    config = load_config(workspace)
    profile = config.profile(agent)
    result = asyncio.run(_probe(config, profile, workspace))
    if json_output:
        typer.echo(json.dumps(result, indent=2, ensure_ascii=False))
    else:
        console = Console(highlight=False)
        table = Table("field", "value", box=None, show_header=False)
        for key, value in result.items():
            table.add_row(key, safe(json.dumps(value, ensure_ascii=False)))
        console.print(table)
    raise typer.Exit(0 if result.get("session_error") is None else EXIT_AGENT)


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
        except AgentError as exc:
            out["session_error"] = f"{type(exc).__name__}: {exc}"
            auth = getattr(exc, "auth_methods", ())
            if auth:
                out["auth_methods"] = list(auth)
            return out
        try:
            init = session.initialize_result
            if init is not None:
                out.update(init.model_dump(by_alias=True, exclude_none=True, mode="json"))
            out["session"] = {
                k: v for k, v in session.session_result.items() if k in ("modes", "configOptions")
            }
            out["session_error"] = None
            run.status = "completed"
        finally:
            await session.close("probe finished")
    return out
