"""Fixture workspaces for the doorbell benchmark, built the fastest *correct* way.

Core's ``create_task`` is O(n): under the key lock it re-reads every operation
fact and parses every TASK in every stage before it publishes. A fixture of n
tasks made through it costs O(n²). Here each TASK is *planned by Core itself*
(``_Creation._plan_create``: request normalization, digests, the exact TASK
bytes and the create-operation fact) and then published the way
``_commit_create_operation`` publishes it, minus that duplicate scan (the
fixture's operation ids are unique by construction) and minus the fsyncs. The
result is byte-for-byte what Core would have written; :func:`check_fixture`
proves it with Core's own readers (``read_task`` for a sample, one real
``create_task``, which parses every TASK and fact, and ``validate_workspace``
for small n).

Receipts for the T2-cost measurement are clones of one real receipt with new
operation ids and TASK ids (schema-valid, so Core's ``matching_receipts``
reads and validates each one as it would real history).
"""

from __future__ import annotations

import json
import uuid
from pathlib import Path
from typing import Any

from baton.coordination.authority import TrustedAuthority
from baton.coordination.fcop_port import FcopPort, init_workspace


def build_inbox_fixture(root: Path, authority: TrustedAuthority, n: int, recipient: str) -> None:
    import fcop
    from fcop.v4.encoding import canonical

    init_workspace(root, authority)
    project: Any = fcop.Project(root)
    creation = project._v4_creation
    workspace_id = creation.manifest["workspace_id"]
    operations = root / "fcop" / "operations"
    for i in range(n):
        plan = creation._plan_create(
            {
                "workspace_id": workspace_id,
                "operation_id": f"fixture-{i}",
                "sender": "ADMIN",
                "recipient": recipient,
                "subject": f"fixture task {i}",
                "body": f"Fixture task {i}.\n",
            }
        )
        fact = plan["fact"]
        (root / fact["path"]).write_bytes(plan["data"])
        (operations / f"create-{fact['key']}.json").write_bytes(canonical(fact) + b"\n")


def check_fixture(port: FcopPort, n: int, *, full: bool) -> None:
    entries = port.scan_inbox()
    assert len(entries) == n
    for entry in entries[:: max(1, n // 20)]:
        assert entry.task_id is not None
        assert port.read_task(entry.task_id).stage == "inbox"
    probe = port.create_task(sender="ADMIN", recipient="NOBODY", subject="fixture check", body="x")
    port.claim(probe.task_id, actor="CHECK")  # keep it out of the doorbell's way
    if full:
        from fcop.workspace import validate_workspace

        result = validate_workspace(port.root)
        assert result["valid"], result["errors"][:3]


def add_receipts(port: FcopPort, count: int) -> None:
    """``count`` extra lifecycle receipts (clones of a real T2 receipt, other TASK ids)."""
    from fcop.v4.encoding import canonical, digest

    seed = port.create_task(sender="ADMIN", recipient="NOBODY", subject="receipt seed", body="x")
    claim = port.claim(seed.task_id, actor="SEED")
    template = json.loads((port.root / claim.receipt_ref).read_text())
    operations = port.root / "fcop" / "operations"
    for _ in range(count):
        task_id = f"TASK-{uuid.uuid4().hex}"
        op = uuid.uuid4()
        value = dict(template)
        value["operation_id"] = op.urn
        value["task_id"] = task_id
        value["source_path"] = f"fcop/_lifecycle/inbox/{task_id}.md"
        value["target_path"] = f"fcop/_lifecycle/active/{task_id}.md"
        value["attempt_id"] = uuid.uuid4().urn
        value["transition"] = {**template["transition"], "attempt_id": value["attempt_id"]}
        value["normalized_transition_digest"] = digest(
            canonical(
                {
                    "contract": "fcop-lifecycle-transition-request-v1",
                    "workspace_id": value["workspace_id"],
                    "task_id": task_id,
                    "from_stage": "inbox",
                    "to_stage": "active",
                    "tool": "claim_task",
                    "actor": value["actor"],
                    "report_ref": None,
                }
            )
        )
        (operations / f"transition-{op.hex}.json").write_text(
            json.dumps(value, sort_keys=True, separators=(",", ":")) + "\n"
        )
