"""Host-side recovery of FCoP state a crash left behind, by documented rules, through ``fcop``.

``fcop``'s own recovery is mechanical and deliberately conservative: for a move
interrupted after its target copy was published but before the receipt said
so, ``recover_operation`` answers ``INDETERMINATE`` and leaves the TASK in two
stages, "the host has to resolve it". baton is that host. Each rule below names
the evidence it requires; anything short of that evidence is not guessed at but
reported as :class:`Unresolved` (the team loop then marks the TASK ``needs
attention``, files an ISSUE and asks the human), and every repair is followed by
``fcop``'s validator. No rule writes a TASK, REPORT, ISSUE or REVIEW itself: only
``fcop``'s receipt-stage writer, its ``recover_operation`` and its publication
primitive for a create fact.

This module is the host's *policy* (which TASKs, when, what evidence counts as
enough, what is reported); the *mechanics* of each repair are the lifecycle
writer's (:mod:`baton.fcop_port.lifecycle`, one copy: its own crash recovery
uses the same functions): ``Lifecycle.recover_receipt`` (R1's roll-forward and
fcop's ``recover_operation``, under the TASK's family lock) and
``Lifecycle.complete_fact`` (R3's fact, under the operation's key lock).

**R1: two stages, receipt ``PREPARED``, digests match (roll forward).** Both
copies exist; exactly one lifecycle receipt names this move (same task, source
and target paths) and passes ``fcop``'s receipt validator; the source copy's
bytes hash to the receipt's ``source_digest`` and the target copy's to its
``target_digest``. ``fcop`` publishes a target by fsyncing a temporary and
hard-linking it, so a target whose digest equals the prepared one *is* the
complete, durable prepared target: the move reached ``TARGET_DURABLE`` and only
its marker was not written. baton writes that marker (``set_stage``, validated)
and lets ``recover_operation`` finish (it classifies ``RECOVERABLE_DUPLICATE``,
removes the source and commits the receipt).

**R2: two stages, receipt ``TARGET_DURABLE``.** ``recover_operation`` finishes it
as is (``RECOVERABLE_DUPLICATE``).

Anything else in two stages (no receipt, several, a digest that does not match:
``DIVERGENT_DUPLICATE``) is unresolved.

**R3: a TASK without its create fact.** ``create_task`` publishes the TASK,
then its operation fact; a crash between the two makes every later
``create_task`` with that ``operation_id`` fail with ``RECOVERY_REQUIRED`` ("TASK
exists without its durable operation fact"). The fact is a pure function of the
TASK (its ``operation_id``, ``normalized_request_digest``, id, path and bytes),
so baton rebuilds it with ``fcop``'s canonical encoding, validates it against
``fcop``'s ``create-operation`` schema and publishes it with ``fcop``'s
no-overwrite publication; ``inspect_workspace`` then reports the operation
``COMMITTED``. Exactly one TASK must carry the ``operation_id``. A TASK that has
left the inbox since (it was claimed) no longer has its original bytes; their
digest is the ``source_digest`` of its one valid claim receipt, which is then used.

**R4: abandoned publication temporaries.** ``.fcop-create-*.tmp`` /
``.fcop-replace-*.tmp`` left in a lifecycle or bucket directory make ``fcop``'s
validator report "unexpected canonical bucket entry" forever. Whose they are is known
by ownership, never by age (:mod:`baton.fcop_port.publication`): every baton process
holds the workspace's publication lock, shared, for the whole of each publication, and
the kernel drops it when that process dies. A sweep that takes the lock exclusively
without waiting knows no writer is between its temporary and its unlink, so every
temporary present is a dead writer's: it is removed, and called the residue of a
finished link when its final name holds the same bytes. While a writer publishes, the
sweep removes nothing (recovery at start and the sweep at shutdown come again). A
writer that stalls for seconds on a loaded machine is never mistaken for a dead one.
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

from baton.fcop_errors import CoordinationError
from baton.fcop_port.base import PortBase
from baton.fcop_port.calls import prime_fcop
from baton.fcop_port.envelope_text import frontmatter_has
from baton.fcop_port.lifecycle import PINNED, Lifecycle, open_writer, publish_temporary
from baton.fcop_port.publication import no_live_writer
from baton.fcop_port.records import STAGES, FcopDict

__all__ = [
    "Repair",
    "Unresolved",
    "clean_temporaries",
    "complete_create_fact",
    "resolve_two_stages",
    "tasks_in_two_stages",
    "validate_workspace",
]

_BUCKETS = ("reports", "issues", "reviews", "operations")


@dataclass(frozen=True, slots=True)
class Repair:
    """What a rule did, for the ``team.recovery`` event and the docs' audit trail."""

    rule: str
    task_id: str | None
    detail: str
    outcome: Literal["resolved", "cleaned"] = "resolved"


class Unresolved(CoordinationError):
    """The evidence does not allow a repair; a human must look (the message says why)."""

    def __init__(self, rule: str, task_id: str | None, detail: str) -> None:
        super().__init__(detail)
        self.rule = rule
        self.task_id = task_id
        self.detail = detail


def validate_workspace(root: Path) -> FcopDict:
    """``fcop``'s own validator over the whole workspace (``{"valid": bool, "errors": [...]}``)."""
    prime_fcop()
    from fcop.workspace import validate_workspace as fcop_validate

    result: FcopDict = fcop_validate(root)
    return result


def tasks_in_two_stages(port: PortBase) -> dict[str, list[str]]:
    """TASK ids present in more than one stage directory, with those stages."""
    seen: dict[str, list[str]] = {}
    for stage in STAGES:
        directory = port.stage_dir(stage)
        try:
            names = os.listdir(directory)
        except FileNotFoundError:
            continue
        for name in names:
            if name.startswith("TASK-") and name.endswith(".md"):
                seen.setdefault(name[:-3], []).append(stage)
    return {task: stages for task, stages in seen.items() if len(stages) > 1}


def _receipts_for(port: PortBase, task_id: str) -> Iterator[tuple[Path, FcopDict]]:
    needle = f'"task_id":"{task_id}"'.encode()
    for path in sorted((port.fcop_dir / "operations").glob("transition-*.json")):
        try:
            data = path.read_bytes()
        except OSError:
            continue
        if needle not in data:
            continue
        try:
            value = json.loads(data)
        except ValueError:
            continue
        if isinstance(value, dict) and value.get("task_id") == task_id:
            yield path, value


def _stage_of(relative: Any) -> str | None:
    parts = str(relative or "").split("/")
    return parts[2] if len(parts) == 4 and parts[:2] == ["fcop", "_lifecycle"] else None


def _writer(port: PortBase, rule: str, task_id: str | None) -> Lifecycle:
    writer = port.lifecycle or open_writer(port.root, trusted_profiles=_trusted(port))
    if writer is None:
        raise Unresolved(rule, task_id, f"repairs need fcop {PINNED}'s Core; another is installed")
    return writer


def _trusted(port: PortBase) -> Mapping[str, Any]:
    return port.authority.trusted_profiles if port.authority else {}


def _why(classification: Any) -> str:
    if classification == "DIVERGENT_DUPLICATE":
        return (
            "the copies do not match their receipt's digests: divergent, nothing guessed "
            "(fcop: DIVERGENT_DUPLICATE)"
        )
    return f"fcop classifies the move {classification}; all evidence kept"


def resolve_two_stages(port: PortBase, task_id: str) -> Repair:
    """Apply R1/R2 to a TASK found in two stages, or raise :class:`Unresolved`."""
    prime_fcop()
    from fcop.errors import FcopError
    from fcop.v4.receipts import classify, validate_receipt

    stages = [s for s in STAGES if (port.stage_dir(s) / f"{task_id}.md").is_file()]
    if len(stages) < 2:
        return Repair("two-stages.none", task_id, f"{task_id} is in one stage now", "resolved")
    if len(stages) > 2:
        raise Unresolved("two-stages", task_id, f"{task_id} is in {len(stages)} stages: {stages}")
    candidates = [
        (path, value)
        for path, value in _receipts_for(port, task_id)
        if {_stage_of(value.get("source_path")), _stage_of(value.get("target_path"))} == set(stages)
    ]
    if len(candidates) != 1:
        raise Unresolved(
            "two-stages",
            task_id,
            f"{task_id} is in {stages[0]} and {stages[1]} with {len(candidates)} matching "
            "lifecycle receipts (exactly one is required)",
        )
    path, value = candidates[0]
    try:
        value = dict(validate_receipt(port.root, path, value))
    except FcopError as exc:
        raise Unresolved("two-stages", task_id, f"its receipt is not valid: {exc}") from exc
    if value["stage"] == "PREPARED":
        rule = "two-stages.prepared-roll-forward"
    elif value["stage"] == "TARGET_DURABLE":
        rule = "two-stages.target-durable"
    else:
        raise Unresolved("two-stages", task_id, f"receipt stage {value['stage']!r} with two copies")
    writer = _writer(port, rule, task_id)
    try:
        result = writer.recover_receipt(path)
    except FcopError as exc:
        raise Unresolved(
            rule, task_id, f"{_why(classify(port.root, value))}; fcop's recovery refused: {exc}"
        ) from exc
    if result.get("classification") != "RECOVERABLE_DUPLICATE":
        raise Unresolved(rule, task_id, f"{task_id}: {_why(result.get('classification'))}")
    source = port.root / value["source_path"]
    target = port.root / value["target_path"]
    if source.exists() or not target.is_file():
        raise Unresolved(rule, task_id, "recover_operation left the copies as they were")
    return Repair(
        rule,
        task_id,
        f"{value['from_stage']} → {value['to_stage']} completed from receipt "
        f"{path.name} (digests matched)",
    )


def complete_create_fact(port: PortBase, operation_id: str) -> Repair:
    """R3: publish the create fact of the one TASK that carries ``operation_id``."""
    prime_fcop()
    from fcop.errors import FcopError
    from fcop.v4.encoding import parse_envelope

    from baton.intake.create_fact import create_fact_name

    owners = []
    needle = f"\noperation_id: {operation_id}\n".encode()
    for stage in STAGES:
        for path in sorted(port.stage_dir(stage).glob("TASK-*.md")):
            if frontmatter_has(path, needle):
                owners.append(path)
    if len(owners) != 1:
        raise Unresolved("create-fact", None, f"{len(owners)} TASKs carry operation {operation_id}")
    path = owners[0]
    try:
        fields = parse_envelope(path)
    except FcopError as exc:
        raise Unresolved("create-fact", path.stem, f"{path.name} does not parse: {exc}") from exc
    if fields.get("operation_id") != operation_id or fields.get("operation_kind") != "create_task":
        raise Unresolved("create-fact", path.stem, f"{path.name} is not that create operation")
    task_id = str(fields["task_id"])
    fact_path = port.fcop_dir / "operations" / create_fact_name(port.workspace_id, operation_id)
    if fact_path.exists():
        raise Unresolved("create-fact", task_id, f"{fact_path.name} already exists")
    initial = f"fcop/_lifecycle/inbox/{task_id}.md"
    claim = None
    if path.relative_to(port.root).as_posix() != initial:
        claim = _original_claim(port, task_id, initial)
    try:
        outcome = _writer(port, "create-fact", task_id).complete_fact(
            task_id, derived_only=False, claim_receipt=claim
        )
    except FcopError as exc:
        raise Unresolved("create-fact", task_id, f"fcop refused the fact: {exc}") from exc
    if outcome != "COMPLETED":
        detail = (
            f"{fact_path.name} already exists"
            if outcome == "COMMITTED"
            else f"{path.name} is not provably that create's result"
        )
        raise Unresolved("create-fact", task_id, detail)
    return Repair("create-fact", task_id, f"create fact {fact_path.name} published")


def _original_claim(port: PortBase, task_id: str, initial: str) -> Path:
    """The one valid ``inbox → active`` receipt of a TASK that left the inbox: its
    ``source_digest`` is the digest of the TASK's bytes as created."""
    from fcop.errors import FcopError
    from fcop.v4.receipts import validate_receipt

    claims = []
    for path, value in _receipts_for(port, task_id):
        if value.get("from_stage") != "inbox" or value.get("source_path") != initial:
            continue
        try:
            validate_receipt(port.root, path, value)
        except FcopError:
            continue
        claims.append(path)
    if len(claims) != 1:
        raise Unresolved(
            "create-fact",
            task_id,
            f"the TASK left the inbox and {len(claims)} valid claim receipts name its original "
            "bytes (exactly one is required)",
        )
    return claims[0]


def clean_temporaries(port: PortBase) -> list[Repair]:
    """R4: remove the publication temporaries no live writer owns (see the module docstring)."""
    with no_live_writer(port.root) as alone:
        return _remove_temporaries(port) if alone else []


def _remove_temporaries(port: PortBase) -> list[Repair]:
    directories = [port.stage_dir(s) for s in STAGES]
    directories += [port.fcop_dir / b for b in _BUCKETS]
    repairs = []
    for directory in directories:
        try:
            entries = list(os.scandir(directory))
        except FileNotFoundError:
            continue
        for entry in entries:
            if publish_temporary(entry.name) is None:
                continue
            final = _final_name(Path(entry.path))
            residue = final.is_file() and _same(final, Path(entry.path))
            try:
                os.unlink(entry.path)
            except FileNotFoundError:
                continue
            repairs.append(
                Repair(
                    "temporaries",
                    None,
                    f"removed {directory.name}/{entry.name} "
                    + ("(a finished link's residue)" if residue else "(abandoned)"),
                    "cleaned",
                )
            )
    return repairs


def _final_name(temp: Path) -> Path:
    """``.fcop-create-TASK-x-<random>.tmp`` → ``TASK-x.md`` (``.json`` for operation facts)."""
    found = publish_temporary(temp.name)
    assert found is not None
    suffix = ".json" if temp.parent.name == "operations" else ".md"
    return temp.parent / f"{found[1]}{suffix}"


def _same(a: Path, b: Path) -> bool:
    try:
        return a.read_bytes() == b.read_bytes()
    except OSError:
        return False
