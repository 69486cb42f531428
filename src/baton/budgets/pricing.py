"""Dollars for tokens when an agent reports tokens but no cost: always an *estimate*.

A maintained price table, the ``genai-prices`` package (pinned), prices a model's
tokens; ``[pricing]`` in ``baton.toml`` overrides it per model (a local server, a
negotiated rate) or turns estimates off::

    [pricing]
    estimate = true                         # false: dollars stay unavailable unless reported
    [pricing.models."qwen2.5-coder"]        # USD per million tokens
    input = 0.20
    output = 0.60
    cached_read = 0.02                      # optional, default: input
    cached_write = 0.25                     # optional, default: input

Importing ``genai_prices`` takes a few hundred milliseconds, so it is imported only
when a price is needed, and :meth:`PriceTable.estimate` blocks: the runner calls it
in a worker thread, never on the event loop's ingest path. ACP's ``inputTokens``
excludes cached tokens (claude-agent-acp, codex-acp); the table is given the input
with them, and the cached parts at their own rates.
"""

from __future__ import annotations

import math
import threading
import warnings
from collections.abc import Mapping
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import TYPE_CHECKING, Any, Final

from baton.budgets.config_tables import checked_table
from baton.errors import ConfigError

if TYPE_CHECKING:  # the ledger needs the event model (pydantic): baton.config must not
    from baton.budgets.ledger import Estimate, TokenCounts

__all__ = ["MODEL_PRICE_KEYS", "PRICING_KEYS", "ModelPrice", "PriceTable", "PricingConfig"]

PRICING_KEYS: Final = frozenset({"estimate", "models"})
"""The keys of the ``[pricing]`` table."""
MODEL_PRICE_KEYS: Final = frozenset({"input", "output", "cached_read", "cached_write"})
"""The keys of one ``[pricing.models."NAME"]`` table (USD per million tokens)."""
PRICE_TABLE: Final = "genai-prices"


@dataclass(frozen=True, slots=True)
class ModelPrice:
    """USD per million tokens of one model (``[pricing.models."NAME"]``)."""

    input: float
    output: float
    cached_read: float | None = None
    cached_write: float | None = None

    def cost(self, counts: TokenCounts) -> float:
        per = 1_000_000.0
        return (
            (counts.input or 0) * self.input
            + (counts.output or 0) * self.output
            + (counts.cached_read or 0)
            * (self.input if self.cached_read is None else self.cached_read)
            + (counts.cached_write or 0)
            * (self.input if self.cached_write is None else self.cached_write)
        ) / per

    # Any: a TOML table as parsed, checked key by key here.
    @classmethod
    def from_table(cls, table: Any, where: str) -> ModelPrice:
        table = checked_table(
            table, where, sorted(MODEL_PRICE_KEYS), like="{ input = 3.0, output = 15.0 }"
        )
        for required in ("input", "output"):
            if required not in table:
                raise ConfigError(f"{where}: needs {required} (USD per million tokens)")
        return cls(**{str(k): _rate(v, f"{where} {k}") for k, v in table.items()})


def _rate(value: Any, where: str) -> float:
    if (
        isinstance(value, bool)
        or not isinstance(value, int | float)
        or not math.isfinite(value)
        or value < 0
    ):
        raise ConfigError(f"{where}: must be a number of USD per million tokens (got {value!r})")
    return float(value)


@dataclass(frozen=True, slots=True)
class PricingConfig:
    """The ``[pricing]`` table."""

    estimate: bool = True
    models: Mapping[str, ModelPrice] = field(default_factory=lambda: MappingProxyType({}))

    # Any: a TOML table as parsed, checked key by key here.
    @classmethod
    def from_table(cls, table: Any) -> PricingConfig:
        table = checked_table(table, "[pricing]", sorted(PRICING_KEYS))
        estimate = table.get("estimate", True)
        if not isinstance(estimate, bool):
            raise ConfigError(f"[pricing] estimate: must be true or false (got {estimate!r})")
        models = table.get("models", {})
        if not isinstance(models, Mapping):
            raise ConfigError('[pricing] models must be a table of [pricing.models."NAME"]')
        return cls(
            estimate=estimate,
            models=MappingProxyType(
                {
                    str(name): ModelPrice.from_table(price, f'[pricing.models."{name}"]')
                    for name, price in models.items()
                }
            ),
        )


class PriceTable:
    """``[pricing]`` first, then ``genai-prices`` (imported on first use, in the caller's
    thread: call :meth:`estimate` off the event loop)."""

    def __init__(self, config: PricingConfig | None = None) -> None:
        self.config = config or PricingConfig()
        self._lock = threading.Lock()

    def estimate(self, model: str | None, counts: TokenCounts) -> tuple[Estimate | None, str]:
        """Dollars for ``counts`` of ``model``, labelled with their source; or ``None`` and
        why not."""
        if model is not None and model in self.config.models:
            cost = self.config.models[model].cost(counts)
            from baton.budgets.ledger import Estimate

            return Estimate(cost, f'[pricing.models."{model}"] in baton.toml (an estimate)'), ""
        if not self.config.estimate:
            return None, "estimates are off ([pricing] estimate = false)"
        if not model:
            return None, "the agent's model is unknown, so no price applies"
        with self._lock:  # one import, one snapshot
            return _genai_price(model, counts)


def _genai_price(model: str, counts: TokenCounts) -> tuple[Estimate | None, str]:
    import genai_prices  # a few hundred ms: only here, only when a price is needed

    cached = (counts.cached_read or 0) + (counts.cached_write or 0)
    usage: dict[str, int] = {
        "input_tokens": (counts.input or 0) + cached,
        "output_tokens": counts.output or 0,
    }
    if counts.cached_read:
        usage["cache_read_tokens"] = counts.cached_read
    if counts.cached_write:
        usage["cache_write_tokens"] = counts.cached_write
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            price = genai_prices.calc_price(genai_prices.Usage(**usage), model)
    except (LookupError, ValueError) as exc:
        return None, f"{PRICE_TABLE} {genai_prices.__version__} has no price for {model!r} ({exc})"
    source = (
        f"{PRICE_TABLE} {genai_prices.__version__}: {price.provider.id}/{price.model.id} "
        "(an estimate)"
    )
    from baton.budgets.ledger import Estimate

    return Estimate(float(price.total_price), source), ""
