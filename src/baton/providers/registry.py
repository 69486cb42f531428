"""Provider family → extension and inventory, the dispatch rules, and session settings.

What the runner calls, all sans-I/O:

* :func:`extension_for` / :func:`inventory_for`: a fresh extension (one per agent
  session; extensions hold per-session state) and the closed inventory of a family.
  An unknown family gets a stable-ACP-only extension with an empty inventory, so
  everything it sends beyond stable ACP is visible as ``unclassified``.
* :func:`dispatch_update`, :func:`dispatch_method`, :func:`dispatch_foreign`: the
  inventory as authority. A variant or method the extension does not claim becomes
  ``provider.notice`` ``unclassified``; an unknown *request* is answered with
  :class:`ErrorReply` (JSON-RPC -32601) so the agent never waits on baton.
* :func:`select_config`: which ``session/set_config_option`` calls (or, for legacy
  agents, ``session/set_mode``/``session/set_model``) realize the requested mode,
  model and extra options, for every provider. Only advertised config ids are ever
  sent: claude-agent-acp ends the session on an unknown id (acp.md §1.9). A
  requested mode or model is matched exactly or refused with the advertised values,
  never substituted.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from baton.events.extension import STABLE_VARIANTS, ProviderExtension, TurnContext, VendorOutcome
from baton.events.model import Payload
from baton.jsontypes import JsonMapping
from baton.providers.builtin_ext import BuiltinExtension
from baton.providers.claude import ClaudeExtension
from baton.providers.codex import CodexExtension
from baton.providers.cursor import CursorExtension
from baton.providers.cursor_sdk.extension import CursorSdkExtension
from baton.providers.gemini import GeminiExtension
from baton.providers.inventory import (
    GENERIC_METHODS,
    INVENTORIES,
    ProviderInventory,
    TableExtension,
    notice,
)
from baton.providers.opencode import OpenCodeExtension
from baton.providers.qwen import QwenExtension

__all__ = [
    "EXTENSIONS",
    "METHOD_NOT_FOUND",
    "ConfigRefusal",
    "ConfigSelection",
    "ErrorReply",
    "as_provider_extension",
    "dispatch_foreign",
    "dispatch_method",
    "dispatch_update",
    "extension_for",
    "families",
    "inventory_for",
    "select_config",
]

EXTENSIONS: Mapping[str, Callable[[], TableExtension]] = {
    "builtin": BuiltinExtension,
    "cursor": CursorExtension,
    "claude": ClaudeExtension,
    "codex": CodexExtension,
    "gemini": GeminiExtension,
    "opencode": OpenCodeExtension,
    "qwen": QwenExtension,
    "cursor-sdk": CursorSdkExtension,
}
"""One factory per family, in capability-matrix column order."""

METHOD_NOT_FOUND = -32601


def families() -> tuple[str, ...]:
    return tuple(EXTENSIONS)


def inventory_for(family: str) -> ProviderInventory:
    """The closed inventory of ``family`` (empty for a family baton does not know)."""
    return INVENTORIES.get(family) or ProviderInventory(family, ())


def as_provider_extension(ext: TableExtension) -> ProviderExtension:
    """The seam's type: mypy proves here that every table extension is a ``ProviderExtension``."""
    return ext


def extension_for(family: str) -> TableExtension:
    """A new extension for one agent session of ``family``."""
    factory = EXTENSIONS.get(family)
    if factory is not None:
        return factory()
    return TableExtension(inventory_for(family))


@dataclass(frozen=True, slots=True)
class ErrorReply:
    """Answer a vendor request with this JSON-RPC error instead of a result."""

    code: int
    message: str

    def to_json(self) -> dict[str, Any]:  # Any: JSON out (json.dumps)
        return {"code": self.code, "message": self.message}


def dispatch_update(
    ext: TableExtension, variant: str, update: JsonMapping, ctx: TurnContext
) -> list[Payload]:
    """A non-stable variant: the extension's payloads, or one ``unclassified`` notice.

    Stable variants are the generic normalizer's (an extension may only add to them,
    through ``observe_update``) and are refused here.
    """
    if variant in STABLE_VARIANTS:
        raise LookupError(f"{variant} is a stable ACP variant owned by the generic normalizer")
    claimed = ext.classify_update(variant, update, ctx)
    if claimed is not None:
        return claimed
    return [
        notice(
            "unclassified",
            f"{ext.family}: session/update variant {variant!r} is not in its inventory; kept raw",
            ctx=ctx,
            variant=variant,
        )
    ]


def dispatch_method(
    ext: TableExtension, method: str, params: JsonMapping, *, has_id: bool, ctx: TurnContext
) -> VendorOutcome:
    """A vendor method: the extension's outcome, or a notice plus an immediate answer.

    Stable methods (``session/request_permission`` ...) are the runner's and are
    refused here so a wiring mistake cannot route them through an extension.
    """
    if method in GENERIC_METHODS:
        raise LookupError(f"{method} is a stable ACP method owned by the runner")
    outcome = ext.vendor_method(method, params, has_id=has_id, ctx=ctx)
    if outcome is not None:
        return outcome
    return VendorOutcome(
        payloads=[
            notice(
                "unclassified",
                f"{ext.family}: method {method!r} is not in its inventory"
                + ("; answered method-not-found" if has_id else "; kept raw"),
                ctx=ctx,
                method=method,
            )
        ],
        route="reply",
        result=ErrorReply(METHOD_NOT_FOUND, f"method not found: {method}") if has_id else None,
    )


def dispatch_foreign(
    ext: TableExtension, session_id: str, update: JsonMapping, ctx: TurnContext
) -> list[Payload]:
    """A ``session/update`` for a session that is not the turn's: never fails the parent."""
    return ext.foreign_session_update(session_id, update, ctx)


# ------------------------------------------------------------------ session settings


@dataclass(frozen=True, slots=True)
class ConfigSelection:
    """The calls that realize a requested session configuration, in order.

    ``options``: ``(config_id, value)`` pairs for ``session/set_config_option``,
    model first (on Claude a model change can change the modes on offer), then mode,
    then extras. ``legacy_model``/``legacy_mode``: send ``session/set_model`` /
    ``session/set_mode`` instead, only for agents advertising the legacy
    ``models``/``modes`` and no config option for it. ``skipped``: extra options not
    sent, and why. Values already current are not re-sent. After each set, the
    runner should call :func:`select_config` again with the returned
    ``configOptions``: an empty selection means the agent confirmed everything.
    """

    options: tuple[tuple[str, str], ...] = ()
    legacy_model: str | None = None
    legacy_mode: str | None = None
    skipped: tuple[tuple[str, str], ...] = ()

    @property
    def empty(self) -> bool:
        return not self.options and self.legacy_model is None and self.legacy_mode is None


@dataclass(frozen=True, slots=True)
class ConfigRefusal:
    """A requested setting the agent does not offer: the session must not start."""

    setting: str
    requested: str
    advertised: tuple[str, ...]
    reason: str

    def message(self) -> str:
        shown = ", ".join(self.advertised[:32]) or "none"
        more = "" if len(self.advertised) <= 32 else f" (+{len(self.advertised) - 32} more)"
        return (
            f"{self.setting} {self.requested!r} refused: {self.reason}; advertised: {shown}{more}"
        )


def select_config(
    advertised_config_options: Sequence[JsonMapping] | None,
    *,
    mode: str | None = None,
    model: str | None = None,
    extra: Mapping[str, str] | None = None,
    advertised_modes: JsonMapping | None = None,
    advertised_models: JsonMapping | None = None,
) -> ConfigSelection | ConfigRefusal:
    """Plan the settings calls, or refuse (see :class:`ConfigSelection`).

    ``advertised_config_options`` is ``configOptions`` from ``session/new``/``load``
    (or a ``set_config_option`` answer); ``advertised_modes``/``advertised_models``
    the legacy ``modes``/``models`` objects. Select options may list values flat or
    in groups (``{group, name, options}``); both are read. Matching is exact (case
    and all): a near miss is a refusal naming what is on offer.
    """
    options = [o for o in advertised_config_options or () if isinstance(o, Mapping)]
    chosen: list[tuple[str, str]] = []
    legacy_model = legacy_mode = None
    for setting, requested, legacy in (
        ("model", model, advertised_models),
        ("mode", mode, advertised_modes),
    ):
        if requested is None:
            continue
        option = _option_for(options, setting)
        if option is not None:
            refusal = _check_value(option, setting, requested)
            if refusal is not None:
                return refusal
            if option.get("currentValue") != requested:
                chosen.append((str(option["id"]), requested))
            continue
        values, current = _legacy(legacy, setting)
        if not values:
            return ConfigRefusal(
                setting, requested, (), f"the agent advertises no {setting} option"
            )
        if requested not in values:
            return ConfigRefusal(
                setting, requested, values, f"the agent does not offer this {setting}"
            )
        if current != requested:
            if setting == "model":
                legacy_model = requested
            else:
                legacy_mode = requested
    skipped: list[tuple[str, str]] = []
    for config_id, value in (extra or {}).items():
        option = next((o for o in options if o.get("id") == config_id), None)
        if option is None:
            skipped.append((config_id, "not advertised by the agent; not sent"))
            continue
        refusal = _check_value(option, config_id, value)
        if refusal is not None:
            return refusal
        if _current(option) != value:
            chosen.append((config_id, value))
    return ConfigSelection(
        options=tuple(chosen),
        legacy_model=legacy_model,
        legacy_mode=legacy_mode,
        skipped=tuple(skipped),
    )


def _option_for(options: Sequence[Mapping[str, Any]], setting: str) -> Mapping[str, Any] | None:
    """The option for ``mode``/``model``: by id first, then by category."""
    by_id = next((o for o in options if o.get("id") == setting), None)
    if by_id is not None:
        return by_id
    return next((o for o in options if o.get("category") == setting), None)


def _values(option: Mapping[str, Any]) -> tuple[str, ...]:
    if option.get("type") == "boolean":
        return ("true", "false")
    values: list[str] = []
    for entry in option.get("options") or ():
        if not isinstance(entry, Mapping):
            continue
        if isinstance(entry.get("options"), list):  # a group
            values.extend(
                str(v["value"]) for v in entry["options"] if isinstance(v, Mapping) and "value" in v
            )
        elif "value" in entry:
            values.append(str(entry["value"]))
    return tuple(values)


def _current(option: Mapping[str, Any]) -> str | None:
    current = option.get("currentValue")
    if isinstance(current, bool):
        return "true" if current else "false"
    return None if current is None else str(current)


def _check_value(option: Mapping[str, Any], setting: str, requested: str) -> ConfigRefusal | None:
    if "id" not in option:
        return ConfigRefusal(setting, requested, (), "the advertised option has no id")
    values = _values(option)
    if requested in values:
        return None
    return ConfigRefusal(
        setting,
        requested,
        values,
        f"not among the values of config option {option['id']!r}",
    )


def _legacy(legacy: Mapping[str, Any] | None, setting: str) -> tuple[tuple[str, ...], str | None]:
    if not isinstance(legacy, Mapping):
        return (), None
    if setting == "mode":
        entries, key, current = legacy.get("availableModes"), "id", legacy.get("currentModeId")
    else:
        entries, key, current = (
            legacy.get("availableModels"),
            "modelId",
            legacy.get("currentModelId"),
        )
    values = tuple(str(e[key]) for e in entries or () if isinstance(e, Mapping) and key in e)
    return values, current if isinstance(current, str) else None
