"""Cluster mode's commands (issue 16): ``baton worker`` joins a host to a Ray cluster.

Imported only when the command is used (:mod:`baton.cli.mount`); it imports no Ray
itself (``ray start`` does, in the node process it runs and runs again).
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Annotated

import typer

__all__ = ["app"]

app = typer.Typer()


@app.command()
def worker(
    address: Annotated[str, typer.Option("--address", help="The Ray head, HOST:PORT.")],
    host: Annotated[str, typer.Option("--host", help="This host's name in baton's placements.")],
    slot: Annotated[
        list[str] | None,
        typer.Option("--slot", help="A role slot whose checkout this host holds (repeat)."),
    ] = None,
    node_ip: Annotated[
        str | None, typer.Option("--node-ip", help="The address other hosts reach this one at.")
    ] = None,
    num_cpus: Annotated[int | None, typer.Option("--num-cpus", min=1)] = None,
    temp_dir: Annotated[Path | None, typer.Option("--temp-dir", help="Ray's session dir.")] = None,
    object_store: Annotated[
        int | None,
        typer.Option("--object-store-bytes", min=1, help="Ray's object store size (bytes)."),
    ] = None,
    dry_run: Annotated[bool, typer.Option("--dry-run", help="Print the ray command only.")] = False,
    once: Annotated[
        bool,
        typer.Option("--once", help="Exit when the node exits (default: join again)."),
    ] = False,
) -> None:
    """Join the cluster at ADDRESS as worker HOST (blocks while the node runs; joins again
    whenever the node exits on its own, e.g. after a partition)."""
    from baton.app.facade.cluster import supervise, worker_argv

    argv = worker_argv(
        address,
        host,
        slots=slot or (),
        node_ip=node_ip,
        num_cpus=num_cpus,
        temp_dir=temp_dir,
        object_store_bytes=object_store,
    )
    if dry_run:
        typer.echo(" ".join(argv))
        return
    env = {**os.environ, "RAY_USAGE_STATS_ENABLED": "0"}
    raise typer.Exit(supervise(argv, env, once=once))
