"""Where Core keeps the fact of a create: fcop's key and file-name rule (pure).

A TASK that fcop's ``create_task`` published is proven complete by its operation fact,
``fcop/operations/create-<key>.json``, written after the TASK. The intake reads it to know
a fresh file is whole without waiting for it to settle (:mod:`~baton.intake.stability`,
checked in the parse worker); baton's own T1 writer (:mod:`baton.fcop_port.lifecycle.create`)
and recovery name the same file. The rule is fcop 4.0.5's, written once here.
"""

from __future__ import annotations

from fcop.v4.encoding import canonical, digest

__all__ = ["create_fact_name", "operation_key"]


def operation_key(workspace_id: str, operation_id: str) -> str:
    """fcop's create key: the SHA-256 of the canonical (workspace, kind, operation id)."""
    return str(
        digest(
            canonical(
                {
                    "workspace_id": workspace_id,
                    "operation_kind": "create_task",
                    "operation_id": operation_id,
                }
            )
        )
    )


def create_fact_name(workspace_id: str, operation_id: str) -> str:
    """The file name of a create operation's fact in ``fcop/operations/`` (fcop's rule)."""
    return f"create-{operation_key(workspace_id, operation_id)}.json"
