"""Browser logins: a one-time code exchanged for a session in two halves, bound to this server.

Why not the API token in a cookie (what baton did first): browsers scope cookies
by host name, not by port, so any other web server on ``127.0.0.1`` (a dev
server an agent started and the user opened) received it, and with it could
approve commands. The rules now (the threat model is in ``docs/security.md``):

* **A login code** is printed by ``baton serve`` / ``baton up --serve`` (and
  ``baton serve --login-code`` for a running server): 60 random bits, typable
  (``ABCD-EFGH-JKLM``), valid **once** and for :data:`CODE_TTL_S` seconds. It
  travels in the URL *fragment* (``/login#code=…``), which browsers never send to
  a server; the login page's script strips it from the address bar before
  posting it, and once spent the code opens nothing, so the history holds no
  usable secret.
* **A session is two secrets.** The *cookie* half (256 random bits,
  ``HttpOnly; SameSite=Strict``, named after the port) is what a browser sends
  by itself, to every port of the host name. The *proof* half (256 random bits)
  is handed to the login page's script, which keeps it in ``localStorage`` (one
  per origin: scheme, host *and port*) and sends it as the ``X-Baton-Proof``
  header. Only the digest of both together is stored, so neither half alone is
  a credential: a server on another port that receives the cookie cannot obtain
  the proof (the browser keeps another origin's storage from it) nor forge it.
* **The origin** the session was opened on is stored with it and checked too;
  that only stops a *browser* (a page cannot choose its ``Origin`` or ``Host``),
  a replaying client sends whatever it likes, which is why the proof exists.
* Logins happen on a login host name ``baton-<project>-<random>.localhost``
  (:func:`baton.web.auth.login_host_name`, new for every server start and derived
  from nothing another process can know), so the browser sends the cookie to no
  other local server unless that server guesses the name.
* Sessions survive a restart (the page keeps working) and are revoked by
  ``baton serve --logout-all``. Validity is cached for :data:`CACHE_S` seconds and
  every open stream re-checks every :data:`WATCH_S`, so a revocation from another
  process ends a page's requests and streams within ``CACHE_S + WATCH_S``.
"""

from __future__ import annotations

import asyncio
import hashlib
import secrets
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Final

from baton.app.facade.store import Store, web_sessions

__all__ = [
    "CACHE_S",
    "CODE_TTL_S",
    "SESSION_TTL_S",
    "WATCH_S",
    "Session",
    "SessionAuth",
    "format_code",
    "normalize_code",
]

CODE_TTL_S: Final = 600.0
"""A login code is good for ten minutes (long enough to switch to the browser)."""
SESSION_TTL_S: Final = 30 * 86400.0
"""A session lasts thirty days after its last use."""
CACHE_S: Final = 3.0
"""How long a session found live is believed without reading the store again."""
WATCH_S: Final = 1.0
"""How often an open stream asks whether its session still holds (``CACHE_S + WATCH_S``
is the most a revoked session keeps a page streaming: the docs promise 5 s)."""
_MAX_SECRET: Final = 128
_TOUCH_S: Final = 60.0
_ALPHABET: Final = "ABCDEFGHJKMNPQRSTVWXYZ23456789"
"""No I/L/O/U/0/1: a code read off a terminal is typed without ambiguity."""
_CODE_LEN: Final = 12


def _digest(secret: str) -> str:
    return hashlib.sha256(secret.encode("utf-8")).hexdigest()


def _session_digest(cookie: str, proof: str) -> str:
    """What is stored of a session: the digest of both halves together."""
    return _digest(f"{cookie}\x00{proof}")


@dataclass(frozen=True, slots=True)
class Session:
    """A freshly opened session: the cookie half and the proof half (never stored)."""

    cookie: str
    proof: str


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

    async def exchange(self, code: str, *, origin: str, user_agent: str = "") -> Session | None:
        """Spend ``code`` and open a session on ``origin``; its two halves, or None."""
        canonical = normalize_code(code)
        if canonical is None:
            return None
        now = self.clock()
        if not await web_sessions.consume_code(self.store, _digest(canonical), now=now):
            return None
        opened = Session(cookie=secrets.token_urlsafe(32), proof=secrets.token_urlsafe(32))
        await web_sessions.insert_session(
            self.store,
            web_sessions.SessionRow(
                session_sha256=_session_digest(opened.cookie, opened.proof),
                origin=origin,
                created_at=now,
                last_seen_at=now,
                expires_at=now + SESSION_TTL_S,
                user_agent=user_agent[:200],
            ),
        )
        return opened

    async def check(self, cookie: str | None, proof: str | None, *, origin: str) -> bool:
        """Whether ``cookie`` and ``proof`` are the halves of a live session opened on ``origin``."""
        if not cookie or not proof or len(cookie) > _MAX_SECRET or len(proof) > _MAX_SECRET:
            return False
        digest = _session_digest(cookie, proof)
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
