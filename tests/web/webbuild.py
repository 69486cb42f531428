"""Builders for the web tests: runs, events, and request documents from plain data.

Documents go through ``parse_document`` (the boundary a normalizer uses), so
the tests exercise the same validation as real requests.
"""

from __future__ import annotations

from baton.events.model import CanonicalEvent, TranscriptAssistant
from baton.request_model.documents import RequestDocument, parse_document
from baton.requests.ledger import Ledger, RequestRecord
from baton.store.store import Store
from tests.support.records import TS

TOKEN = "test-token-0123456789abcdefghijklmnopqrstuvwxyz"


def event(seq: int, run_id: str = "run-1", text: str | None = None) -> CanonicalEvent:
    payload = TranscriptAssistant(
        message_id="m1", text=text if text is not None else f"chunk {seq}"
    )
    return CanonicalEvent(
        type=payload.TYPE,
        seq=seq,
        run_id=run_id,
        session_id="sess-1",
        turn_id="turn-1",
        ts=TS,
        payload=payload,
    )


async def append(store: Store, seqs: range, run_id: str = "run-1") -> None:
    """Append and commit (``flush`` returns after subscribers were handed the events)."""
    for seq in seqs:
        store.append(event(seq, run_id))
    await store.flush()


def permission_doc(command: str = "rm -rf build", *, title: str | None = None) -> RequestDocument:
    return parse_document(
        {
            "kind": "permission",
            "tool_call": {
                "tool_call_id": "call_1",
                "title": title or command,
                "kind": "execute",
                "command": command,
            },
            "options": [
                {"option_id": "allow-once", "name": "Allow", "kind": "allow_once"},
                {"option_id": "allow-always", "name": "Always", "kind": "allow_always"},
                {"option_id": "reject-once", "name": "Reject", "kind": "reject_once"},
            ],
        }
    )


def question_doc(prompt: str = "Which database?") -> RequestDocument:
    return parse_document(
        {
            "kind": "question",
            "title": "Setup",
            "questions": [
                {
                    "id": "question-1",
                    "native_id": "db",
                    "prompt": prompt,
                    "options": [
                        {"id": "option-1", "native_id": "pg", "label": "Postgres"},
                        {"id": "option-2", "native_id": "lite", "label": "SQLite"},
                    ],
                },
                {
                    "id": "question-2",
                    "native_id": "features",
                    "prompt": "Which features?",
                    "selection": "multiple",
                    "options": [
                        {"id": "option-1", "native_id": "auth", "label": "Auth"},
                        {"id": "option-2", "native_id": "billing", "label": "Billing"},
                        {"id": "option-3", "native_id": "search", "label": "Search"},
                    ],
                },
            ],
        }
    )


def plan_doc(markdown: str = "# Plan\n\n1. Do it\n", *, name: str = "Refactor") -> RequestDocument:
    return parse_document(
        {
            "kind": "plan",
            "name": name,
            "overview": "Split the module",
            "markdown": markdown,
            "todos": [{"id": "t1", "content": "Extract parser"}],
            "phases": [{"name": "Phase 1", "todos": [{"id": "t1", "content": "Extract parser"}]}],
        }
    )


_rpc_ids = iter(range(1, 1_000_000))


async def create(ledger: Ledger, document: RequestDocument, run_id: str = "run-1") -> RequestRecord:
    return await ledger.create(
        document,
        run_id=run_id,
        connection_id="conn-1",
        jsonrpc_id=next(_rpc_ids),
        session_id="sess-1",
        turn_id="turn-1",
    )
