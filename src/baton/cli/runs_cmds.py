"""``baton runs`` and ``baton log``: the stored runs, and one replayed (or followed)."""

from __future__ import annotations

import time
from typing import Annotated, Any, Final

import typer
from rich.table import Table

from baton.app import Baton
from baton.app.facade.budgets import Spend, format_amount
from baton.app.facade.runs import CanonicalEvent
from baton.app.facade.store import RunRecord, Store, budget_sql
from baton.cli.project import ProjectOption, project_config
from baton.cli.render import HumanRenderer, safe
from baton.cli.shared import CommandError, command_app, out, plural, print_ndjson

__all__ = ["RoleLabels", "app", "resolve_run", "run_data"]

app = command_app()

FOLLOW_POLL_SECONDS: Final = 0.25
"""How often ``log --follow`` looks for new events of a run another process writes."""


class RoleLabels:
    """The role each event of a team run comes from, read from the store's sessions.

    A session is recorded just after it starts, so an unknown session id is looked up
    again (at most every :data:`RELOOK_SECONDS`) until its record appears.
    """

    RELOOK_SECONDS: Final = 0.5

    def __init__(self, store: Store) -> None:
        self.store = store
        self._roles: dict[str, str] = {}
        self._looked = -1e9

    def __call__(self, event: CanonicalEvent) -> str | None:
        sid = event.session_id
        if sid is None:
            return None
        if sid not in self._roles and time.monotonic() - self._looked >= self.RELOOK_SECONDS:
            self._looked = time.monotonic()
            for record in self.store.list_sessions(1000):
                if record.role:
                    self._roles[record.agent_session_id] = record.role
        return self._roles.get(sid) or "…"


# Any: JSON out (``baton runs --json``).
def run_data(r: RunRecord, spend: Spend | None = None) -> dict[str, Any]:
    """One run as ``runs --json`` prints it (``spend``: its usage ledger, when it has one)."""
    return {
        "run_id": r.run_id,
        "kind": r.kind,
        "agent": r.agent,
        "cwd": r.cwd,
        "status": r.status,
        "created_at": r.created_at,
        "ended_at": r.ended_at,
        "spend": spend.to_json() if spend is not None else None,
    }


SPEND_COLUMN_WIDTH = 100
"""The terminal width from which ``baton runs`` shows each run's spend as a column."""


def spend_text(spend: Spend | None) -> str:
    """``$0.42 · 12,345 tok`` (``est.`` when dollars are estimated; ``+?`` when some turns
    reported nothing, so the figure undercounts), ``unavailable`` when no turn reported
    usage (never ``$0.00``), or ``-`` (no ledger). Short: it shares a line at 80 columns."""
    if spend is None:
        return "-"
    if spend.unavailable:
        return "unavailable"
    cost = format_amount("cost_usd", spend.cost_usd) + (" est." if spend.estimated else "")
    return f"{cost} · {spend.tokens:,} tok" + (" +?" if spend.unmetered else "")


def resolve_run(store: Store, prefix: str) -> RunRecord:
    """The run named by a whole id or a unique prefix (what a human types)."""
    found = store.runs_with_prefix(prefix.strip())
    if len(found) == 1:
        return found[0]
    if found:
        ids = ", ".join(r.run_id for r in found)
        raise CommandError(
            f"run id prefix {prefix!r} is ambiguous ({ids}, …)", hint="type more of it"
        )
    raise CommandError(f"no run {prefix!r} in this project", hint="`baton runs` lists them")


def _short_ts(ts: str | None) -> str:
    """``2026-12-01T11:21:27.123Z`` → ``12-01 11:21:27`` (UTC, as stored)."""
    if not ts:
        return ""
    return ts[5:10] + " " + ts[11:19]


@app.command()
def runs(
    limit: Annotated[int, typer.Option(help="How many, most recent first.", min=1)] = 20,
    json_output: Annotated[bool, typer.Option("--json", help="NDJSON, one run per line.")] = False,
    project: ProjectOption = None,
) -> None:
    """List recent runs (ids are shown whole: `baton log ID` takes any unique prefix)."""
    config = project_config(project)
    records: list[RunRecord] = []
    spends: dict[str, Spend] = {}
    if config.db_path.exists():
        with Baton.reading(config=config) as store:
            records = store.list_runs(limit)
            ids = [r.run_id for r in records]
            spends = store.read_tx(lambda tx: budget_sql.spend_by(tx, "run", ids))
    if json_output:
        print_ndjson(run_data(r, spends.get(r.run_id)) for r in records)
        return
    console = out()
    if not records:
        console.print("no runs yet (`baton run PROMPT` or `baton up` makes one)")
        return
    table = Table(box=None, pad_edge=False, header_style="bold")
    table.add_column("run", no_wrap=True, min_width=len(records[0].run_id))
    table.add_column("kind", no_wrap=True)
    table.add_column("agent", overflow="fold")
    table.add_column("status", no_wrap=True)
    table.add_column("started (UTC)", no_wrap=True)
    table.add_column("ended", no_wrap=True)
    wide = console.width >= SPEND_COLUMN_WIDTH  # at 80 columns the agent would be squeezed out
    if wide:
        table.add_column("spend", no_wrap=True)
    for r in records:
        cells = [
            safe(r.run_id),
            safe(r.kind),
            safe(r.agent),
            safe(r.status),
            _short_ts(r.created_at),
            _short_ts(r.ended_at)[6:],
        ]
        table.add_row(*cells, *([spend_text(spends.get(r.run_id))] if wide else []))
    console.print(table)
    more = f" · the newest {limit}: --limit N shows more" if len(records) == limit else ""
    if not wide:
        more += " · spend: a wider terminal or --json"
    console.print(
        f"{plural(len(records), 'run')} · `baton log ID` replays one (a unique prefix of ID "
        f"is enough){more}",
        style="dim",
        markup=False,
    )


@app.command()
def log(
    run_id: Annotated[str, typer.Argument(help="Run id or a unique prefix (see `baton runs`).")],
    json_output: Annotated[bool, typer.Option("--json", help="Canonical-event NDJSON.")] = False,
    follow: Annotated[
        bool,
        typer.Option("--follow", "-f", help="Keep printing new events until the run ends."),
    ] = False,
    full: Annotated[
        bool,
        typer.Option("--full", help="Every line of tool output and stderr (none left out)."),
    ] = False,
    project: ProjectOption = None,
) -> None:
    """Replay a stored run; with --follow, watch one another process is running."""
    config = project_config(project)
    if not config.db_path.exists():
        raise CommandError(f"no run {run_id!r} in this project", hint="`baton runs` lists them")
    with Baton.reading(config=config) as store:
        run = resolve_run(store, run_id)
        view = (
            None
            if json_output
            else HumanRenderer(live=False, labeler=_labeler(store, run), full=full)
        )
        last = 0
        while True:
            for line in store.iter_event_json(run.run_id, after_seq=last):
                event = CanonicalEvent.model_validate_json(line)
                last = event.seq
                if view is None:
                    typer.echo(line)
                else:
                    view(event)
            if not follow:
                break
            current = store.get_run(run.run_id)
            if current is None or current.status != "running":
                # One last read: events committed just before the run was finished.
                follow = False
                continue
            time.sleep(FOLLOW_POLL_SECONDS)
        if view is not None:
            view.close()


def _labeler(store: Store, run: RunRecord) -> RoleLabels | None:
    return RoleLabels(store) if run.kind == "up" else None
