"""The check every budget and pricing table starts with: a TOML table whose keys are all known.

One rule, one message shape (``[budget]: unknown keys x (known: a, b)``), so a person
fixing ``baton.toml`` reads the same sentence for every table.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from baton.errors import ConfigError

__all__ = ["checked_table"]


# Any: a TOML table as parsed; its values are checked by the caller, key by key.
def checked_table(
    table: object, where: str, known: Sequence[str], *, like: str = "", listed: str = "known"
) -> Mapping[str, Any]:
    """``table`` when it is a table whose keys are all in ``known``, else a ConfigError
    naming ``where`` (``like``: an example shown when it is not a table)."""
    if not isinstance(table, Mapping):
        raise ConfigError(f"{where} must be a table" + (f" like {like}" if like else ""))
    unknown = sorted(set(table) - set(known))
    if unknown:
        raise ConfigError(
            f"{where}: unknown keys {', '.join(unknown)} ({listed}: {', '.join(known)})"
        )
    return table
