"""select_config: exact values or a refusal, only advertised ids, legacy fallbacks."""

from __future__ import annotations

from typing import Any

import pytest

from baton.providers.registry import ConfigRefusal, ConfigSelection, select_config

CLAUDE: list[dict[str, Any]] = [
    {
        "id": "mode",
        "name": "Mode",
        "category": "mode",
        "type": "select",
        "currentValue": "default",
        "options": [{"value": v, "name": v} for v in ("default", "acceptEdits", "plan")],
    },
    {
        "id": "model",
        "name": "Model",
        "category": "model",
        "type": "select",
        "currentValue": "sonnet",
        "options": [
            {
                "group": "claude",
                "name": "Claude",
                "options": [{"value": "sonnet", "name": "S"}, {"value": "opus", "name": "O"}],
            }
        ],
    },
    {
        "id": "effort",
        "name": "Effort",
        "type": "select",
        "currentValue": "medium",
        "options": [{"value": "high", "name": "High"}, {"value": "medium", "name": "Med"}],
    },
    {"id": "fast", "name": "Fast", "type": "boolean", "currentValue": False},
]


def test_requested_values_become_set_calls_model_first() -> None:
    got = select_config(CLAUDE, mode="plan", model="opus", extra={"effort": "high", "fast": "true"})
    assert got == ConfigSelection(
        options=(("model", "opus"), ("mode", "plan"), ("effort", "high"), ("fast", "true"))
    )


def test_current_values_are_not_resent_and_everything_current_is_empty() -> None:
    got = select_config(CLAUDE, mode="default", model="sonnet", extra={"effort": "medium"})
    assert isinstance(got, ConfigSelection) and got.empty


def test_a_model_not_offered_is_refused_naming_the_offer_never_substituted() -> None:
    got = select_config(CLAUDE, model="Opus")
    assert isinstance(got, ConfigRefusal)
    assert got.setting == "model" and got.advertised == ("sonnet", "opus")
    assert "sonnet, opus" in got.message()


def test_unadvertised_extra_ids_are_never_sent() -> None:
    got = select_config(CLAUDE, extra={"timeout": "30"})
    assert isinstance(got, ConfigSelection)
    assert got.options == () and got.skipped[0][0] == "timeout"


def test_an_advertised_extra_with_a_value_not_offered_is_refused() -> None:
    assert isinstance(select_config(CLAUDE, extra={"effort": "max"}), ConfigRefusal)
    assert isinstance(select_config(CLAUDE, extra={"fast": "yes"}), ConfigRefusal)


CURSOR_MODES = {
    "currentModeId": "agent",
    "availableModes": [{"id": "agent"}, {"id": "plan"}, {"id": "ask"}],
}


def test_legacy_modes_are_used_only_without_a_mode_option() -> None:
    options = [o for o in CLAUDE if o["id"] == "model"]
    got = select_config(options, mode="ask", advertised_modes=CURSOR_MODES)
    assert got == ConfigSelection(legacy_mode="ask")
    got = select_config(CLAUDE, mode="plan", advertised_modes=CURSOR_MODES)
    assert got == ConfigSelection(options=(("mode", "plan"),))
    assert isinstance(
        select_config(options, mode="yolo", advertised_modes=CURSOR_MODES), ConfigRefusal
    )


def test_nothing_advertised_is_a_refusal() -> None:
    got = select_config(None, mode="agent")
    assert isinstance(got, ConfigRefusal) and got.advertised == ()
    got = select_config(
        [],
        model="m",
        advertised_models={"availableModels": [{"modelId": "m"}], "currentModelId": "x"},
    )
    assert got == ConfigSelection(legacy_model="m")


@pytest.mark.parametrize("category_only", [True, False])
def test_options_are_found_by_id_or_category(category_only: bool) -> None:
    option = {
        "id": "agent_mode" if category_only else "mode",
        "category": "mode",
        "type": "select",
        "currentValue": "a",
        "options": [{"value": "a"}, {"value": "b"}],
    }
    got = select_config([option], mode="b")
    assert isinstance(got, ConfigSelection) and got.options == ((option["id"], "b"),)
