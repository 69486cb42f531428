"""Calling into ``fcop``: import it once, primed and hardened, and map what it raises.

Every module that calls ``fcop`` (the port, workspace set-up, recovery) goes
through these two, so the library's import-time warning and its error classes
are dealt with in one place.
"""

from __future__ import annotations

import threading
import warnings
from collections.abc import Iterator
from contextlib import contextmanager

from baton.fcop_errors import InvalidEnvelope, map_fcop_error
from baton.fcop_port import publication
from baton.intake.yaml_guard import harden_fcop

__all__ = ["fcop_errors", "prime_fcop"]

_PRIMED = threading.Lock()
_primed = False


def prime_fcop() -> None:
    """Import ``fcop`` and build its schema validators once, deprecation warnings muted.

    fcop 4.0.5 imports ``jsonschema.RefResolver``, deprecated since jsonschema
    4.18; the warning fires once per process, at first use. Building the
    (cached) validators here keeps it out of callers that run with warnings
    as errors, without muting anything else.
    """
    global _primed
    with _PRIMED:
        if _primed:
            return
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", DeprecationWarning)
            from fcop.v4 import schema

            schema._validators()
        # Every envelope Core parses in this process is bounded (intake's limits).
        harden_fcop()
        # Every publication holds the workspace's lock: recovery knows its owner.
        publication.install()
        _primed = True


@contextmanager
def fcop_errors() -> Iterator[None]:
    """``fcop``'s errors raised as baton's tree (:func:`~baton.fcop_errors.map_fcop_error`)."""
    from fcop.errors import FcopError

    try:
        yield
    except FcopError as exc:
        raise map_fcop_error(exc) from exc
    except RecursionError as exc:
        # Core's JSON facts (operations/*.json, fcop.json) parse with the stdlib's
        # unbounded-depth decoder; deep nesting in one of them is an invalid file.
        raise InvalidEnvelope(
            "a file under fcop/ nests too deeply to parse", code="INVALID_ENVELOPE"
        ) from exc
