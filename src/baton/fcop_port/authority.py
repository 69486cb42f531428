"""baton's trusted evaluator: what lets FCoP T4–T7 (approve, reject, reopen, archive) happen.

FCoP 4.0 refuses every authorized transition unless three things line up
(``fcop/v4/authorization.py``):

1. the workspace manifest *adopted* a Profile id when it was created
   (``fcop.json`` ``profiles``; the manifest is immutable afterwards, Core
   re-checks it on every call);
2. the ``fcop.Project`` doing the work was built with
   ``trusted_profiles={profile_id: evaluator}``, an in-process callable the
   stock ``fcop-mcp`` CLI never registers;
3. the authorization REVIEW carries an ``issuer_proof`` for which
   ``evaluator(profile_ref=..., issuer=<REVIEW sender>, proof=...)`` returns
   the string ``"AUTHORIZED"``. Core calls it twice: when the REVIEW is
   published (``mark_human_approved``) and when the transition consumes it.

The proof is stored *in the REVIEW file*, readable by every agent, so it must
not be a bearer secret. baton's proof is an HMAC-SHA256 over the claims
(issuer, subject TASK, edge, attempt, issue time, nonce) with a key only the
team loop holds (``authority.key``, mode 0600, in baton's state directory, never
in ``fcop/``). The evaluator only sees ``(profile_ref, issuer, proof)``, so it
checks the MAC and that the claimed issuer is the REVIEW's sender; the
binding to the actual TASK/edge/attempt is checked through an *expectation*
the port sets (a context variable) around its own ``mark_human_approved`` and
``transition`` calls. A copied proof is useless for another TASK, edge or
attempt, and an agent process cannot approve at all: it has neither the key
nor the evaluator registered in its ``fcop.Project``.
"""

from __future__ import annotations

import contextlib
import contextvars
import hashlib
import hmac
import os
import secrets
import stat
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path

from baton.fcop_errors import CoordinationError

__all__ = [
    "AUTHORIZED",
    "PROFILE_REF",
    "Expectation",
    "TrustedAuthority",
    "load_or_create_key",
]

PROFILE_REF = "baton.dev/trusted-evaluator/v1"
"""The Profile id baton adopts in every workspace it creates."""

AUTHORIZED = "AUTHORIZED"
"""The exact string Core requires from an evaluator."""

_PROOF_KEYS = frozenset(
    {"v", "alg", "issuer", "subject_ref", "from", "to", "attempt_id", "issued_at", "nonce", "mac"}
)
_KEY_BYTES = 32


@dataclass(frozen=True, slots=True)
class Expectation:
    """What the port is about to authorize; the evaluator refuses anything else."""

    issuer: str
    subject_ref: str
    from_stage: str
    to_stage: str
    attempt_id: str


_EXPECTED: contextvars.ContextVar[Expectation | None] = contextvars.ContextVar(
    "baton_fcop_expectation", default=None
)


class TrustedAuthority:
    """Mints and verifies issuer proofs; ``evaluator`` goes into ``trusted_profiles``."""

    def __init__(self, key: bytes, *, profile_ref: str = PROFILE_REF) -> None:
        if len(key) < 16:
            raise CoordinationError("authority key must be at least 16 bytes")
        self._key = key
        self.profile_ref = profile_ref

    @property
    def trusted_profiles(self) -> Mapping[str, Callable[..., str]]:
        """The mapping to pass as ``fcop.Project(..., trusted_profiles=...)``."""
        return {self.profile_ref: self.evaluator}

    def mint(self, claims: Expectation, *, issued_at: str) -> dict[str, str]:
        """A proof for exactly one (issuer, TASK, edge, attempt) authorization."""
        body = {
            "v": "1",
            "alg": "HMAC-SHA256",
            "issuer": claims.issuer,
            "subject_ref": claims.subject_ref,
            "from": claims.from_stage,
            "to": claims.to_stage,
            "attempt_id": claims.attempt_id,
            "issued_at": issued_at,
            "nonce": secrets.token_hex(16),
        }
        return {**body, "mac": self._mac(body)}

    def evaluator(self, *, profile_ref: str, issuer: str, proof: object) -> str:
        """Core's callback. Returns ``AUTHORIZED`` or a refusal word (never raises)."""
        if profile_ref != self.profile_ref or not isinstance(proof, Mapping):
            return "REFUSED"
        if set(proof) != _PROOF_KEYS or not all(isinstance(v, str) for v in proof.values()):
            return "REFUSED"
        body = {k: v for k, v in proof.items() if k != "mac"}
        if not hmac.compare_digest(self._mac(body), proof["mac"]):
            return "REFUSED"
        if proof["issuer"] != issuer:
            return "REFUSED"
        expected = _EXPECTED.get()
        if expected is None:
            # Only the port's own calls are ever authorized: Core consults the
            # evaluator inside them, with the expectation set.
            return "REFUSED"
        claimed = Expectation(
            issuer=proof["issuer"],
            subject_ref=proof["subject_ref"],
            from_stage=proof["from"],
            to_stage=proof["to"],
            attempt_id=proof["attempt_id"],
        )
        return AUTHORIZED if claimed == expected else "REFUSED"

    @contextlib.contextmanager
    def expecting(self, expectation: Expectation) -> Iterator[None]:
        """Authorize ``expectation`` (and nothing else) for the calls inside the block."""
        token = _EXPECTED.set(expectation)
        try:
            yield
        finally:
            _EXPECTED.reset(token)

    def _mac(self, body: Mapping[str, str]) -> str:
        text = "\n".join(f"{k}={body[k]}" for k in sorted(body))
        return hmac.new(self._key, text.encode("utf-8"), hashlib.sha256).hexdigest()


def load_or_create_key(path: Path) -> bytes:
    """Read the team loop's authority key, creating it (0600, exclusive) on first use.

    A key readable by group/others is refused: whoever reads it can approve work.
    """
    path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
    try:
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    except FileExistsError:
        pass
    else:
        with os.fdopen(fd, "w", encoding="ascii") as stream:
            stream.write(secrets.token_hex(_KEY_BYTES) + "\n")
            stream.flush()
            os.fsync(stream.fileno())
    info = path.lstat()
    if not stat.S_ISREG(info.st_mode):
        raise CoordinationError(f"{path}: authority key must be a regular file")
    if info.st_mode & 0o077:
        raise CoordinationError(
            f"{path}: authority key is readable by others (mode {info.st_mode & 0o777:o}); "
            "chmod 600 it or delete it to mint a new one"
        )
    text = path.read_text(encoding="ascii").strip()
    try:
        key = bytes.fromhex(text)
    except ValueError as exc:
        raise CoordinationError(f"{path}: authority key is not hex") from exc
    if len(key) < 16:
        raise CoordinationError(f"{path}: authority key is too short")
    return key
