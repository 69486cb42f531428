"""Role-slot credentials for the team loop's MCP endpoint: one per slot and session, rotated.

The team loop serves every role's MCP tools from one endpoint
(:mod:`baton.role_tools.hub`), so what a connection may do is decided by the
credential it presents, not by which process it is. :class:`Credentials` is that rule,
pure (no sockets, no clock): :meth:`~Credentials.issue` mints a fresh random token for a
slot each time the slot's session (re)starts and retires the previous one;
:meth:`~Credentials.check` compares in constant time (``hmac.compare_digest`` over
digests, so neither the token's length nor its prefix leaks through timing) and answers
who the connection speaks for, or why not. Only digests of retired tokens are kept
(a few per slot), so a refusal can say "replaced" rather than "wrong".

The table holds digests only, so it can be kept in the store (:class:`CredentialFact`,
:meth:`~Credentials.facts` after each change, :meth:`~Credentials.restore` at start): a
restarted cluster coordinator then accepts the live credential a re-attached role actor's
agent still holds, and refuses a retired one as before. These rules are the only ones;
the store only keeps what they produced (:mod:`baton.store.credential_sql`).
"""

from __future__ import annotations

import hashlib
import hmac
import secrets
from collections import deque
from collections.abc import Iterable
from dataclasses import dataclass

__all__ = ["CredentialFact", "Credentials", "Refusal", "SlotCredential", "SlotGrant"]

TOKEN_PREFIX = "bmcp_"  # noqa: S105 - a prefix, not a secret
"""Marks the token as a credential for humans and for redaction patterns."""
RETIRED_PER_SLOT = 8
MAX_TOKEN = 256


@dataclass(frozen=True, slots=True)
class SlotCredential:
    """What one session of one slot presents: the slot and its bearer token."""

    slot: str
    token: str
    generation: int

    def __repr__(self) -> str:  # never print the token
        return f"SlotCredential(slot={self.slot!r}, generation={self.generation})"


@dataclass(frozen=True, slots=True)
class SlotGrant:
    """A connection the table accepted: it speaks for ``slot``, session ``generation``."""

    slot: str
    generation: int


@dataclass(frozen=True, slots=True)
class Refusal:
    """Why a connection is refused (``code`` machine-readable, ``message`` for the agent)."""

    code: str
    message: str


@dataclass(frozen=True, slots=True)
class CredentialFact:
    """One credential of a slot as the store keeps it: its token's digest, never the token."""

    slot: str
    generation: int
    digest: bytes
    live: bool


def _digest(token: str) -> bytes:
    return hashlib.sha256(token.encode("utf-8", "surrogatepass")).digest()


class Credentials:
    """The live credential of every slot (one each), and the recently retired ones."""

    def __init__(self) -> None:
        self._live: dict[str, tuple[bytes, int]] = {}
        self._retired: dict[str, deque[tuple[bytes, int]]] = {}
        self._generation = 0

    def facts(self, slot: str) -> list[CredentialFact]:
        """What the table holds for ``slot`` (to keep it: the slot's rows, replaced)."""
        out = [CredentialFact(slot, g, d, False) for d, g in self._retired.get(slot, ())]
        live = self._live.get(slot)
        if live is not None:
            out.append(CredentialFact(slot, live[1], live[0], True))
        return out

    def restore(self, facts: Iterable[CredentialFact]) -> None:
        """Take back what an earlier table kept (a restarted coordinator, before serving).

        Generations go on from the highest seen, so a credential issued now never shares
        a generation with one issued before the restart."""
        for fact in sorted(facts, key=lambda f: f.generation):
            self._generation = max(self._generation, fact.generation)
            if fact.live:
                self.revoke(fact.slot)
                self._live[fact.slot] = (fact.digest, fact.generation)
            else:
                self._retire(fact.slot, fact.digest, fact.generation)

    def issue(self, slot: str) -> SlotCredential:
        """A new credential for ``slot``'s next session; the previous one stops working."""
        self.revoke(slot)
        self._generation += 1
        token = TOKEN_PREFIX + secrets.token_urlsafe(32)
        self._live[slot] = (_digest(token), self._generation)
        return SlotCredential(slot, token, self._generation)

    def revoke(self, slot: str, generation: int | None = None) -> None:
        """Retire ``slot``'s live credential (of that ``generation`` only, when given)."""
        live = self._live.get(slot)
        if live is None or (generation is not None and live[1] != generation):
            return  # already replaced: a late close must not retire its successor
        del self._live[slot]
        self._retire(slot, *live)

    def _retire(self, slot: str, digest: bytes, generation: int) -> None:
        self._retired.setdefault(slot, deque(maxlen=RETIRED_PER_SLOT)).append((digest, generation))

    def generation(self, slot: str) -> int | None:
        live = self._live.get(slot)
        return live[1] if live is not None else None

    def live(self, slot: str) -> SlotGrant | None:
        """The session ``slot``'s live credential speaks for (kept for a re-attached holder)."""
        live = self._live.get(slot)
        return SlotGrant(slot, live[1]) if live is not None else None

    def check(self, slot: object, token: object) -> SlotGrant | Refusal:
        """Who a connection presenting ``(slot, token)`` speaks for, or why it may not."""
        if not isinstance(slot, str) or not isinstance(token, str) or not token:
            return Refusal("BAD_HELLO", "the connection must name its slot and credential")
        if len(token) > MAX_TOKEN:
            return Refusal("CREDENTIAL_REFUSED", f"the credential does not match slot {slot!r}")
        digest = _digest(token)
        live = self._live.get(slot)
        if live is not None and hmac.compare_digest(live[0], digest):
            return SlotGrant(slot, live[1])
        if any(hmac.compare_digest(old, digest) for old, _ in self._retired.get(slot, ())):
            return Refusal(
                "CREDENTIAL_REPLACED",
                f"this credential belongs to an earlier session of slot {slot!r}, which "
                "ended or was replaced; only the slot's current session may use its tools",
            )
        if live is None and slot not in self._retired:
            return Refusal("UNKNOWN_SLOT", f"no role slot {slot!r} is served by this baton up")
        return Refusal("CREDENTIAL_REFUSED", f"the credential does not match slot {slot!r}")
