"""Session persistence: one JSON file per session, so `session/load` works across restarts.

Each file holds what `session/load` replays (the user prompt, each step's ``tool_call`` and final
``tool_call_update``, the agent's messages) for the last `MAX_TURNS` turns, with long strings
cut to `MAX_STRING` characters. Files are replaced atomically (temp file + ``os.replace``), so a
crash never leaves a half-written session; a file that cannot be read counts as missing.
"""

import json
import logging
import re
import uuid
from dataclasses import dataclass, field
from pathlib import Path

from baton.fsutil import atomic_write
from baton.jsontypes import JsonValue

from .jsonrpc import JsonObject

__all__ = [
    "MAX_STRING",
    "MAX_TURNS",
    "SessionStore",
    "StoredSession",
    "TurnRecord",
    "bounded",
    "new_session_id",
]

log = logging.getLogger(__name__)

FORMAT_VERSION = 1
MAX_TURNS = 50
MAX_STRING = 16 * 1024
_HEAD = MAX_STRING // 4
_SESSION_ID = re.compile(r"rb-[0-9a-f]{32}")


def new_session_id() -> str:
    """A fresh id; its shape (checked on load) keeps ids safe to use as file names."""
    return f"rb-{uuid.uuid4().hex}"


def bounded(value: JsonValue) -> JsonValue:
    """A copy of a JSON value whose strings are cut to `MAX_STRING` (head and tail kept)."""
    if isinstance(value, str):
        if len(value) <= MAX_STRING:
            return value
        tail = MAX_STRING - _HEAD
        elided = len(value) - MAX_STRING
        return f"{value[:_HEAD]}\n…[{elided} characters not stored]…\n{value[-tail:]}"
    if isinstance(value, dict):
        return {key: bounded(item) for key, item in value.items()}
    if isinstance(value, list):
        return [bounded(item) for item in value]
    return value


@dataclass(frozen=True, slots=True)
class TurnRecord:
    """One past turn: the ``session/update`` payloads to replay, in order."""

    number: int
    updates: tuple[JsonObject, ...]


@dataclass(slots=True)
class StoredSession:
    """A session as stored: identity, working directory and recent history."""

    session_id: str
    cwd: str
    created_at: str
    updated_at: str
    title: str | None = None
    turn_count: int = 0
    turns: list[TurnRecord] = field(default_factory=list)

    def add_turn(self, turn: TurnRecord, now: str) -> None:
        """Append a finished turn, dropping the oldest beyond `MAX_TURNS`."""
        self.turns.append(TurnRecord(turn.number, tuple(bounded(u) for u in turn.updates)))
        del self.turns[:-MAX_TURNS]
        self.turn_count = max(self.turn_count, turn.number)
        self.updated_at = now

    def summary(self) -> JsonObject:
        """This session as a `session/list` entry."""
        entry: JsonObject = {
            "sessionId": self.session_id,
            "cwd": self.cwd,
            "updatedAt": self.updated_at,
        }
        if self.title:
            entry["title"] = self.title
        return entry

    def to_json(self) -> JsonObject:
        """The stored document."""
        return {
            "version": FORMAT_VERSION,
            "sessionId": self.session_id,
            "cwd": self.cwd,
            "title": self.title,
            "createdAt": self.created_at,
            "updatedAt": self.updated_at,
            "turnCount": self.turn_count,
            "turns": [{"number": t.number, "updates": list(t.updates)} for t in self.turns],
        }

    @classmethod
    def from_json(cls, data: JsonValue) -> "StoredSession":
        """Read a stored document; raises ValueError when it is not one."""
        if not isinstance(data, dict) or data.get("version") != FORMAT_VERSION:
            raise ValueError("not a version 1 session document")
        try:
            turns = [TurnRecord(int(t["number"]), tuple(t["updates"])) for t in data["turns"]]
            return cls(
                session_id=str(data["sessionId"]),
                cwd=str(data["cwd"]),
                title=data.get("title"),
                created_at=str(data["createdAt"]),
                updated_at=str(data["updatedAt"]),
                turn_count=int(data["turnCount"]),
                turns=turns,
            )
        except (KeyError, TypeError) as exc:
            raise ValueError(f"malformed session document: {exc!r}") from exc


class SessionStore:
    """Session files under ``<state dir>/sessions``."""

    def __init__(self, state_dir: Path) -> None:
        self._dir = state_dir / "sessions"

    def save(self, record: StoredSession) -> None:
        """Write ``record`` atomically; a failure is logged (the turn itself went fine)."""
        try:
            self._dir.mkdir(parents=True, exist_ok=True)
            data = json.dumps(record.to_json(), ensure_ascii=False).encode()
            atomic_write(self._path(record.session_id), data)
        except OSError:
            log.exception("could not save session %s", record.session_id)

    def load(self, session_id: str) -> StoredSession | None:
        """The stored session, or None when it does not exist or cannot be read."""
        if not _SESSION_ID.fullmatch(session_id):
            return None
        return self._read(self._path(session_id))

    def list(self, cwd: str | None = None) -> list[StoredSession]:
        """Stored sessions (optionally only those in ``cwd``), most recently updated first."""
        try:
            paths = sorted(self._dir.glob("rb-*.json"))
        except OSError:
            return []
        records = [r for p in paths if (r := self._read(p)) is not None]
        if cwd is not None:
            records = [r for r in records if r.cwd == cwd]
        return sorted(records, key=lambda r: r.updated_at, reverse=True)

    def _path(self, session_id: str) -> Path:
        return self._dir / f"{session_id}.json"

    def _read(self, path: Path) -> StoredSession | None:
        try:
            return StoredSession.from_json(json.loads(path.read_bytes()))
        except FileNotFoundError:
            return None
        except (OSError, ValueError) as exc:
            log.warning("ignoring unreadable session file %s: %s", path, exc)
            return None
