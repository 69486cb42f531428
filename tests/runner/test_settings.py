"""Session settings: only advertised ids, the exact value, or a refusal."""

from __future__ import annotations

import dataclasses
from types import MappingProxyType
from typing import Any

import pytest

from baton.errors import ConfigError
from baton.providers.catalog import CLAUDE
from baton.runner.settings import apply_settings

OPTIONS = [
    {
        "id": "model",
        "name": "Model",
        "category": "model",
        "type": "select",
        "currentValue": "m1",
        "options": [{"value": "m1", "name": "M1"}, {"value": "m2", "name": "M2"}],
    },
    {
        "id": "mode",
        "name": "Mode",
        "category": "mode",
        "type": "select",
        "currentValue": "default",
        "options": [{"value": "default", "name": "D"}, {"value": "plan", "name": "P"}],
    },
]


class Agent:
    """Answers set_config_option like claude-agent-acp: the full, updated option list."""

    def __init__(self) -> None:
        self.calls: list[tuple[str, dict[str, Any]]] = []
        self.notices: list[str] = []
        self.options = [dict(o) for o in OPTIONS]

    async def call(self, method: str, params: dict[str, Any], *, timeout: float) -> Any:
        self.calls.append((method, params))
        for option in self.options:
            if option["id"] == params.get("configId"):
                option["currentValue"] = params["value"]
        return {"configOptions": [dict(o) for o in self.options]}

    async def notice(self, summary: str) -> None:
        self.notices.append(summary)


async def test_exact_values_through_advertised_ids_only() -> None:
    profile = dataclasses.replace(
        CLAUDE, model="m2", mode="plan", config_options=MappingProxyType({"timeout": "5"})
    )
    agent = Agent()
    advertised = {"configOptions": [dict(o) for o in OPTIONS]}
    await apply_settings(profile, "s1", advertised, call=agent.call, notice=agent.notice)
    sent = [(p["configId"], p["value"]) for _, p in agent.calls]
    assert ("model", "m2") in sent and ("mode", "plan") in sent
    assert all(config_id != "timeout" for config_id, _ in sent), "unadvertised id never sent"
    assert any("timeout" in n for n in agent.notices)


async def test_a_model_the_agent_does_not_offer_is_refused_not_substituted() -> None:
    profile = dataclasses.replace(CLAUDE, model="m9")
    agent = Agent()
    with pytest.raises(ConfigError) as info:
        await apply_settings(
            profile,
            "s1",
            {"configOptions": [dict(o) for o in OPTIONS]},
            call=agent.call,
            notice=agent.notice,
        )
    assert "'m9'" in str(info.value) and "m1, m2" in str(info.value)
    assert agent.calls == []
