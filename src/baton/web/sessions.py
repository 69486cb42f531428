"""Browser logins: a one-time code exchanged for a stored session bound to this server.

Why not the API token in a cookie (what baton did first): browsers scope cookies
by host name, not by port, so any other web server on ``127.0.0.1`` (a dev
server an agent started and the user opened) received it, and with it could
approve commands. The rules now:

* **A login code** is printed by ``baton serve`` / ``baton up --serve`` (and
  ``baton serve --login-code`` for a running server): 60 random bits, typable
  (``ABCD-EFGH-JKLM``), valid **once** and for :data:`CODE_TTL_S` seconds. It
  travels in the URL *fragment* (``/login#code=…``), which browsers never send to
  a server; the login page's script strips it from the address bar before
  posting it, and once spent the code opens nothing, so the history holds no
  usable secret.
* **A session** is 256 random bits in an ``HttpOnly; SameSite=Strict`` cookie
  named after the port. It is not the API token (that one stays for
  ``Authorization: Bearer`` clients). The session is stored (digest only) with
  the *origin* it was opened on, and is only accepted on that origin: the
  session check. Logins happen on a per-project ``baton-<project>-<hash>.localhost``
  host name (browsers resolve ``*.localhost`` to loopback by themselves), so the
  browser sends the cookie to this project's server only, never to another server
  on ``127.0.0.1`` or ``localhost``.
* Sessions survive a restart (the page keeps working) and are revoked by
  ``baton serve --logout-all``. Validity is cached for :data:`CACHE_S` seconds,
  so a revocation from another process takes effect within that.
"""

from __future__ import annotations

import asyncio
import hashlib
import secrets
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Final

from baton.store import web_sessions
from baton.store.store import Store

__all__ = [
    "CACHE_S",
    "CODE_TTL_S",
    "SESSION_TTL_S",
    "SessionAuth",
    "format_code",
    "normalize_code",
]

CODE_TTL_S: Final = 600.0
"""A login code is good for ten minutes (long enough to switch to the browser)."""
SESSION_TTL_S: Final = 30 * 86400.0
"""A session lasts thirty days after its last use."""
CACHE_S: Final = 5.0
_TOUCH_S: Final = 60.0
_ALPHABET: Final = "ABCDEFGHJKMNPQRSTVWXYZ23456789"
"""No I/L/O/U/0/1: a code read off a terminal is typed without ambiguity."""
_CODE_LEN: Final = 12


def _digest(secret: str) -> str:
    return hashlib.sha256(secret.encode("utf-8")).hexdigest()


def format_code(raw: str) -> str:
    """``ABCDEFGHJKMN`` → ``ABCD-EFGH-JKMN`` (how it is printed)."""
    return "-".join(raw[i : i + 4] for i in range(0, len(raw), 4))


def normalize_code(given: str) -> str | None:
    """The canonical form of a typed code (case, dashes, spaces ignored), or None."""
    text = "".join(ch for ch in given.upper() if ch not in "- \t")
    if len(text) != _CODE_LEN or any(ch not in _ALPHABET for ch in text):
        return None
    return text


@dataclass
class SessionAuth:
    """Codes and sessions over the store, with a small validity cache."""

    store: Store
    clock: Callable[[], float] = time.time
    _cache: dict[str, tuple[str, float]] = field(default_factory=dict)
    """digest -> (origin, when the row was last read and found live)."""

    async def issue_code(self) -> str:
        """A fresh one-time code, as printed (``ABCD-EFGH-JKMN``)."""
        raw = "".join(secrets.choice(_ALPHABET) for _ in range(_CODE_LEN))
        now = self.clock()
        await web_sessions.insert_code(
            self.store, _digest(raw), now=now, expires_at=now + CODE_TTL_S
        )
        return format_code(raw)

    async def exchange(self, code: str, *, origin: str, user_agent: str = "") -> str | None:
        """Spend ``code`` and open a session on ``origin``; the session secret, or None."""
        canonical = normalize_code(code)
        if canonical is None:
            return None
        now = self.clock()
        if not await web_sessions.consume_code(self.store, _digest(canonical), now=now):
            return None
        secret = secrets.token_urlsafe(32)
        await web_sessions.insert_session(
            self.store,
            web_sessions.SessionRow(
                session_sha256=_digest(secret),
                origin=origin,
                created_at=now,
                last_seen_at=now,
                expires_at=now + SESSION_TTL_S,
                user_agent=user_agent[:200],
            ),
        )
        return secret

    async def check(self, secret: str | None, *, origin: str) -> bool:
        """Whether ``secret`` is a live session opened on exactly ``origin``."""
        if not secret or len(secret) > 128:
            return False
        digest = _digest(secret)
        now = self.clock()
        cached = self._cache.get(digest)
        if cached is None or now - cached[1] > CACHE_S:
            row = await asyncio.to_thread(web_sessions.find_session, self.store, digest)
            if row is None or row.expires_at < now:
                self._cache.pop(digest, None)
                return False
            if now - row.last_seen_at > _TOUCH_S:
                await web_sessions.touch_session(
                    self.store, digest, now=now, expires_at=now + SESSION_TTL_S
                )
            cached = (row.origin, now)
            if len(self._cache) >= 1000:
                self._cache.pop(next(iter(self._cache)))
            self._cache[digest] = cached
        return secrets.compare_digest(cached[0], origin)
