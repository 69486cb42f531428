"""Session settings (mode, model, config options): exactly what was asked, or a refusal.

Only config ids the agent advertised are ever sent (Claude kills a session on an unknown
one); a requested value the agent does not offer is a :class:`ConfigError` naming what
is on offer, never a silent substitute. Legacy ``session/set_mode``/``set_model`` are
used only when the agent advertises the legacy objects and no config option.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any

from baton.agent_profile import AgentProfile
from baton.errors import ConfigError
from baton.jsontypes import JsonObject
from baton.providers.registry import ConfigRefusal, select_config

__all__ = [
    "MAX_ROUNDS",
    "Call",
    "Notice",
    "apply_settings",
]

Call = Callable[..., Awaitable[Any]]
Notice = Callable[[str], Awaitable[None]]

MAX_ROUNDS = 4
"""Each answer re-advertises the options; converge on what was asked within a few rounds."""


async def apply_settings(
    profile: AgentProfile,
    session_id: str,
    advertised: JsonObject,
    *,
    call: Call,
    notice: Notice,
) -> None:
    """Bring ``advertised`` (the session/new or load result, updated in place) to the
    profile's settings through ``call(method, params, timeout=...)``."""
    if not (profile.mode or profile.model or profile.config_options):
        return
    for _ in range(MAX_ROUNDS):
        plan = select_config(
            advertised.get("configOptions"),
            mode=profile.mode,
            model=profile.model,
            extra=profile.config_options,
            advertised_modes=advertised.get("modes"),
            advertised_models=advertised.get("models"),
        )
        if isinstance(plan, ConfigRefusal):
            offered = ", ".join(plan.advertised) or "none"
            raise ConfigError(
                f"{profile.name}: {plan.setting} {plan.requested!r} refused: {plan.reason} "
                f"(offered: {offered}); no substitute is chosen"
            )
        for config_id, reason in plan.skipped:
            await notice(f"{config_id}: {reason}")
        if plan.empty:
            return
        timeout = profile.session_timeout
        legacy = (
            ("session/set_model", "modelId", "models", "currentModelId", plan.legacy_model),
            ("session/set_mode", "modeId", "modes", "currentModeId", plan.legacy_mode),
        )
        for method, member, section, current, value in legacy:
            if value is not None:
                await call(method, {"sessionId": session_id, member: value}, timeout=timeout)
                _mark_legacy(advertised, section, current, value)
        for config_id, value in plan.options:
            result = await call(
                "session/set_config_option",
                {"sessionId": session_id, "configId": config_id, "value": value},
                timeout=timeout,
            )
            if isinstance(result, dict) and isinstance(result.get("configOptions"), list):
                advertised["configOptions"] = result["configOptions"]
            else:
                _mark_option(advertised, config_id, value)
            if _is_mode_option(advertised, config_id):
                # The legacy ``modes`` snapshot from session/new is the same setting; keep it
                # in step, so the approval check reads one effective mode, not a stale one.
                _mark_legacy(advertised, "modes", "currentModeId", value)
    raise ConfigError(f"{profile.name}: the agent did not confirm the requested settings")


def _mark_legacy(advertised: dict[str, Any], key: str, current: str, value: str) -> None:
    block = advertised.get(key)
    if isinstance(block, dict):
        block[current] = value


def _is_mode_option(advertised: dict[str, Any], config_id: str) -> bool:
    if config_id == "mode":
        return True
    return any(
        isinstance(o, dict) and o.get("id") == config_id and o.get("category") == "mode"
        for o in advertised.get("configOptions") or []
    )


def _mark_option(advertised: dict[str, Any], config_id: str, value: str) -> None:
    for option in advertised.get("configOptions") or []:
        if isinstance(option, dict) and option.get("id") == config_id:
            option["currentValue"] = value
