"""FCoP crash windows reproduced with ``fcop``'s own fault injection (a TASK in two stages)."""

from __future__ import annotations

import contextlib
import json
from pathlib import Path

from baton.fcop_errors import CoordinationError
from baton.fcop_port.port import FcopPort


def receipt_for(port: FcopPort, task_id: str, from_stage: str, to_stage: str) -> Path:
    """The (one) lifecycle receipt of ``task_id``'s ``from_stage → to_stage`` move."""
    found = []
    for path in sorted((port.fcop_dir / "operations").glob("transition-*.json")):
        value = json.loads(path.read_text())
        if (value["task_id"], value["from_stage"], value["to_stage"]) == (
            task_id,
            from_stage,
            to_stage,
        ):
            found.append(path)
    assert len(found) == 1, found
    return found[0]


def claim_killed_after_target(port: FcopPort, task_id: str, *, actor: str, stage: str) -> Path:
    """T2 interrupted after the target copy is published, the receipt left at ``stage``.

    ``fcop`` stops the move at its ``TARGET_DURABLE`` boundary (both copies present,
    receipt ``TARGET_DURABLE``). For ``stage="PREPARED"`` the receipt is put back one
    step, through ``fcop``'s own validated writer: exactly what a kill between
    publishing the target and recording ``TARGET_DURABLE`` leaves behind (``fcop``'s
    ``recover_operation`` then answers ``INDETERMINATE``).
    """
    from fcop.v4.encoding import read_json
    from fcop.v4.receipts import set_stage

    # T2 runs on baton's lifecycle writer (fcop's Core with its fault plan) when it is on.
    writer = port.lifecycle.workspace if port.lifecycle is not None else port._project
    writer.inject_fault(operation="transition", stage="TARGET_DURABLE")
    with contextlib.suppress(CoordinationError):
        port.claim(task_id, actor=actor)
    receipt = receipt_for(port, task_id, "inbox", "active")
    if stage != "TARGET_DURABLE":
        set_stage(port.root, receipt, read_json(receipt), stage)
    assert (port.stage_dir("inbox") / f"{task_id}.md").exists()
    assert (port.stage_dir("active") / f"{task_id}.md").exists()
    return receipt
