"""The inventories are the authority: tests iterate them, both ways.

- every handler an extension registers is listed in its inventory;
- every listed, mapped native that the generic layer does not own has a handler and
  a sample, and the sample yields payloads of the listed canonical family;
- a listed-but-unmapped native yields an ``unsupported`` info notice;
- a native that is not listed yields ``provider.notice`` ``unclassified``.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from pydantic import BaseModel

from baton.events.acp_normalizer import STABLE_VARIANTS
from baton.events.extension import TurnContext
from baton.events.model import PAYLOAD_TYPES, Payload, ProviderNotice
from baton.providers.inventory import (
    GENERIC_METHODS,
    INVENTORIES,
    NativeEvent,
    ProviderInventory,
    TableExtension,
    is_canonical_family,
)
from baton.providers.registry import (
    EXTENSIONS,
    ErrorReply,
    as_provider_extension,
    dispatch_method,
    dispatch_update,
    extension_for,
    inventory_for,
)

from .samples import SAMPLES, SETUP

FAMILIES = list(EXTENSIONS)


def ctx() -> TurnContext:
    return TurnContext(session_id="sess", turn_id="t1", workspace="/nonexistent-ws")


def entries() -> list[tuple[str, NativeEvent]]:
    return [(f, e) for f, inv in INVENTORIES.items() for e in inv.entries]


def _ids(items: list[tuple[str, NativeEvent]]) -> list[str]:
    return [f"{f}:{e.kind}:{e.native}" for f, e in items]


def _matches(payload: Payload, canonical: str) -> bool:
    return canonical == payload.TYPE or payload.TYPE.startswith(canonical + ".")


def test_every_family_has_an_inventory_and_an_extension() -> None:
    assert list(INVENTORIES) == FAMILIES
    for family in FAMILIES:
        ext = extension_for(family)
        assert ext.family == family
        assert as_provider_extension(ext) is ext


@pytest.mark.parametrize("family,entry", entries(), ids=_ids(entries()))
def test_entry_maps_to_a_canonical_family_or_says_why(family: str, entry: NativeEvent) -> None:
    assert entry.kind in ("update", "method", "meta")
    if entry.canonical is None:
        assert entry.note, "an unmapped entry must say why"
    else:
        assert is_canonical_family(entry.canonical)
    if entry.kind == "update" and entry.native in STABLE_VARIANTS:
        assert entry.canonical == STABLE_VARIANTS[entry.native]


@pytest.mark.parametrize("family", FAMILIES)
def test_extensions_handle_nothing_their_inventory_does_not_list(family: str) -> None:
    inventory = inventory_for(family)
    for kind, native in extension_for(family).handled():
        entry = inventory.get(kind, native)
        assert entry is not None, f"{family} handles {kind} {native!r} not in its inventory"
        assert entry.canonical is not None, f"{family} handles {native!r} listed as unmapped"


def test_registration_refuses_an_unlisted_native() -> None:
    ext = TableExtension(ProviderInventory("x", ()))
    with pytest.raises(LookupError):
        ext.on_update("made_up", lambda update, ctx: [])
    with pytest.raises(LookupError):
        ext.on_method("x/made_up", lambda params, has_id, ctx: None, fallback=None)  # type: ignore[arg-type,return-value]


@pytest.mark.parametrize("family,entry", entries(), ids=_ids(entries()))
def test_every_listed_native_behaves_as_its_entry_says(
    family: str, entry: NativeEvent, tmp_path: Path
) -> None:
    (tmp_path / "img.png").write_bytes(b"")
    c = TurnContext(session_id="sess", turn_id="t1", workspace=str(tmp_path))
    ext = extension_for(family)
    ext.begin_turn(c)
    generic = (entry.kind == "update" and entry.native in STABLE_VARIANTS) or (
        entry.kind == "method" and entry.native in GENERIC_METHODS
    )
    if generic:
        assert (family, entry.kind, entry.native) not in SAMPLES
        if entry.kind == "update":
            assert ext.classify_update(entry.native, {"sessionUpdate": entry.native}, c) is None
        else:
            assert ext.vendor_method(entry.native, {}, has_id=True, ctx=c) is None
        return
    for variant, before in SETUP.get((family, entry.kind, entry.native), []):
        ext.classify_update(variant, {"sessionUpdate": variant, **before}, c)
    sample = SAMPLES.get((family, entry.kind, entry.native))
    assert sample is not None, f"no sample for {family} {entry.kind} {entry.native}"
    payloads: list[Payload]
    if entry.kind == "update":
        got = ext.classify_update(entry.native, {"sessionUpdate": entry.native, **sample}, c)
        assert got is not None
        payloads = got
    elif entry.kind == "method":
        outcome = ext.vendor_method(entry.native, sample, has_id=True, ctx=c)
        assert outcome is not None
        assert not isinstance(outcome.result, ErrorReply)
        payloads = list(outcome.payloads)
        if entry.canonical == "request":
            assert outcome.route == "human" and outcome.request is not None
            assert outcome.result is not None, "a headless-safe answer must be ready"
        else:
            assert outcome.route == "reply"
    else:
        variant, value = sample
        payloads = ext.observe_update(
            variant, {"sessionUpdate": variant, "_meta": {entry.native: value}}, ctx()
        )
    notices = [p for p in payloads if isinstance(p, ProviderNotice)]
    assert not any(n.category == "unclassified" for n in notices)
    if entry.canonical is None:
        if entry.kind != "meta":
            assert [n.category for n in notices] == ["unsupported"]
        else:
            assert payloads == []
    elif entry.canonical not in ("request",) and entry.kind != "meta":
        produced = [p for p in payloads if not isinstance(p, ProviderNotice)] or notices
        assert produced and all(_matches(p, entry.canonical) for p in produced), payloads


def test_samples_are_only_for_listed_natives() -> None:
    for family, kind, native in SAMPLES:
        assert inventory_for(family).get(kind, native) is not None, (family, kind, native)


@pytest.mark.parametrize("family", FAMILIES)
def test_an_unlisted_variant_becomes_an_unclassified_notice(family: str) -> None:
    ext = extension_for(family)
    assert ext.classify_update("subagent_teleported", {}, ctx()) is None
    (payload,) = dispatch_update(ext, "subagent_teleported", {"sessionUpdate": "x"}, ctx())
    assert isinstance(payload, ProviderNotice)
    assert payload.category == "unclassified"
    assert payload.variant == "subagent_teleported"


@pytest.mark.parametrize("family", FAMILIES)
def test_an_unlisted_method_becomes_unclassified_and_is_answered_at_once(family: str) -> None:
    ext = extension_for(family)
    assert ext.vendor_method("vendor/made_up", {}, has_id=True, ctx=ctx()) is None
    outcome = dispatch_method(ext, "vendor/made_up", {}, has_id=True, ctx=ctx())
    (payload,) = outcome.payloads
    assert isinstance(payload, ProviderNotice) and payload.category == "unclassified"
    assert outcome.route == "reply"
    assert isinstance(outcome.result, ErrorReply) and outcome.result.code == -32601
    quiet = dispatch_method(ext, "vendor/made_up", {}, has_id=False, ctx=ctx())
    assert quiet.result is None


@pytest.mark.parametrize("family", FAMILIES)
def test_an_unknown_meta_key_is_noticed_once(family: str) -> None:
    ext = extension_for(family)
    update = {"sessionUpdate": "agent_message_chunk", "_meta": {"zz_vendor": 1, "traceparent": "x"}}
    first = ext.observe_update("agent_message_chunk", update, ctx())
    assert [p.category for p in first if isinstance(p, ProviderNotice)] == ["unclassified"]
    assert ext.observe_update("agent_message_chunk", update, ctx()) == []


def test_stable_natives_are_refused_by_the_vendor_dispatch() -> None:
    ext = extension_for("cursor")
    with pytest.raises(LookupError):
        dispatch_method(ext, "session/request_permission", {}, has_id=True, ctx=ctx())
    with pytest.raises(LookupError):
        dispatch_update(ext, "tool_call", {}, ctx())


def test_unknown_family_is_stable_acp_only() -> None:
    ext = extension_for("mystery")
    assert ext.family == "mystery" and ext.handled() == frozenset()
    (payload,) = dispatch_update(ext, "anything", {}, ctx())
    assert isinstance(payload, ProviderNotice) and payload.category == "unclassified"


def test_inventory_rejects_duplicates_and_unexplained_gaps() -> None:
    entry = NativeEvent("x", "update", "plan.updated")
    with pytest.raises(ValueError):
        ProviderInventory("f", (entry, entry))
    with pytest.raises(ValueError):
        ProviderInventory("f", (NativeEvent("y", "update", None),))
    with pytest.raises(ValueError):
        ProviderInventory("f", (NativeEvent("y", "update", "no.such.family"),))


def test_payload_types_used_as_families_exist() -> None:
    for _, entry in entries():
        if entry.canonical is not None:
            assert any(
                t == entry.canonical or t.startswith(entry.canonical + ".") for t in PAYLOAD_TYPES
            )


json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(max_size=20),
    lambda children: (
        st.lists(children, max_size=4) | st.dictionaries(st.text(max_size=10), children, max_size=4)
    ),
    max_leaves=20,
)


@settings(max_examples=300, deadline=None)
@given(
    family=st.sampled_from(FAMILIES),
    name=st.sampled_from(sorted({e.native for _, e in entries()} | {"cursor/x", "nope"})),
    params=st.dictionaries(st.text(max_size=12), json_values, max_size=6),
    has_id=st.booleans(),
)
def test_any_payload_yields_payloads_or_notices_never_an_exception(
    family: str, name: str, params: dict[str, object], has_id: bool
) -> None:
    ext = extension_for(family)
    c = ctx()
    produced: list[object] = list(ext.begin_turn(c))
    if name not in GENERIC_METHODS:
        outcome = dispatch_method(ext, name, params, has_id=has_id, ctx=c)
        produced += outcome.payloads
    if name not in STABLE_VARIANTS:
        produced += dispatch_update(ext, name, {"sessionUpdate": name, **params}, c)
    else:
        produced += ext.observe_update(name, {"sessionUpdate": name, **params}, c)
    produced += ext.foreign_session_update("other", {"sessionUpdate": name, **params}, c)
    produced += ext.end_turn(c)
    for payload in produced:
        assert isinstance(payload, BaseModel) and payload.TYPE in PAYLOAD_TYPES  # type: ignore[attr-defined]
        assert type(payload).model_validate_json(payload.model_dump_json()) == payload
