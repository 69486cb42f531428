"""The whole agent-to-screen pipeline under random hostile update streams.

framing → JSON-RPC classification → normalizer (real redactor, a provider extension) →
sequencer → store (real SQLite) → renderers. For any stream of updates holding hostile
strings (escape sequences, bidi and zero-width characters, rich markup, forged baton
lines, lone surrogates, NUL, secrets), cut at any byte boundaries:

* nothing raises;
* no valid update is lost: every update yields an event, and (where no redaction
  marker appears) the transcript text is exactly what was sent, surrogates repaired;
* every stored event re-serializes to the very line that was stored;
* every rendered line passes the display-safety check (it is a fixed point of
  :func:`baton.security.display.neutralize_terminal`).

Bounded in CI (``max_examples`` below); ``BATON_PROPERTY_EXAMPLES=5000`` runs the long mode.
"""

from __future__ import annotations

import io
import itertools
import json
import os
from collections.abc import Iterator

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from rich.console import Console

from baton.acp import jsonrpc
from baton.acp.framing import Frame, FrameError, LineDecoder
from baton.app.recovery import open_store
from baton.cli.render import HumanRenderer, NdjsonRenderer
from baton.events.acp_normalizer import AcpNormalizer, Draft
from baton.events.model import (
    CanonicalEvent,
    HarnessDiagnostic,
    TranscriptAssistant,
    TranscriptThinking,
    TranscriptUser,
)
from baton.events.sequencer import Sequencer
from baton.providers.registry import extension_for
from baton.security.display import neutralize_terminal
from baton.security.redact import MARKER, Redactor
from baton.store.store import Store
from tests.support.records import run_record

EXAMPLES = int(os.environ.get("BATON_PROPERTY_EXAMPLES", "60"))
SESSION = "sess-1"

HOSTILE = (
    "\x1b[2J\x1b[H",  # clear screen, home
    "\x1b]0;pwned\x07",  # window title
    "\x1b]8;;https://evil.example/\x1b\\click\x1b]8;;\x1b\\",  # OSC 8 hyperlink
    "\x1b]52;c;ZWNobyBwd25lZA==\x07",  # clipboard write
    "\x9b31m",  # C1 CSI
    "\r",
    "\x00",
    "\x08\x08\x08",
    "\u202e",  # RLO
    "\u2066",  # LRI
    "\u200b",
    "\u200d",
    "\u2060",
    "\ufeff",
    "\U000e0041\U000e0042",  # tag characters
    "[link=https://evil.example]x[/link]",
    "[baton]",
    "[y/N]",
    "[bold red]",
    "\nbaton ▸ turn.completed (end_turn)\n",
    "\n✔ turn completed (end_turn, 0.1s)\n",
    "\nAllow this? [y/N]\n",
    "\ud800",  # lone surrogates: valid JSON, not UTF-8
    "\udfff",
    '"',
    "\\",
    "{",
    "\n",
    "password=hunter2hunter2",
    "ghp_1234567890abcdefghijABCDEFGHIJ123456",
    "https://hooks.slack.com/services/T0/B0/Z4PB3oMSAQBkl6R5w5JFuRl7",
)

_surrogates = st.integers(0xD800, 0xDFFF).map(chr)
texts = st.lists(
    st.one_of(st.sampled_from(HOSTILE), st.text(max_size=8), _surrogates), max_size=6
).map("".join)
ids = st.one_of(st.sampled_from(["m1", "m2", "t1", "t2"]), texts)
json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | texts,
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(texts, inner, max_size=3),
    max_leaves=8,
)
content_blocks = st.one_of(
    st.builds(lambda t: {"type": "text", "text": t}, texts),
    st.builds(lambda t: {"type": "resource_link", "uri": t, "name": t}, texts),
    st.builds(lambda t, v: {"type": t, "data": v}, texts, json_values),
)
chunks = st.builds(
    lambda variant, mid, block: {"sessionUpdate": variant, "messageId": mid, "content": block},
    st.sampled_from(["agent_message_chunk", "agent_thought_chunk", "user_message_chunk"]),
    ids,
    content_blocks,
)
tools = st.builds(
    lambda variant, tid, title, kind, status, raw, text: {
        "sessionUpdate": variant,
        "toolCallId": tid,
        "title": title,
        "kind": kind,
        "status": status,
        "rawInput": raw,
        "locations": [{"path": title}],
        "content": [
            {"type": "content", "content": {"type": "text", "text": text}},
            {"type": "diff", "path": title, "oldText": None, "newText": text},
        ],
    },
    st.sampled_from(["tool_call", "tool_call_update"]),
    ids,
    texts,
    st.one_of(st.sampled_from(["read", "edit", "execute", "other"]), texts),
    st.one_of(st.sampled_from(["pending", "in_progress", "completed", "failed"]), texts),
    json_values,
    texts,
)
others = st.one_of(
    st.builds(
        lambda entries: {"sessionUpdate": "plan", "entries": entries},
        st.lists(
            st.fixed_dictionaries(
                {"content": texts, "status": st.sampled_from(["pending", "completed"]) | texts}
            ),
            max_size=3,
        ),
    ),
    st.builds(lambda m: {"sessionUpdate": "current_mode_update", "currentModeId": m}, texts),
    st.builds(lambda t: {"sessionUpdate": "session_info_update", "title": t}, texts),
    st.builds(
        lambda c: {"sessionUpdate": "available_commands_update", "availableCommands": c},
        st.lists(st.fixed_dictionaries({"name": texts, "description": texts}), max_size=2),
    ),
    st.builds(lambda v, x: {"sessionUpdate": v, "x": x}, texts, json_values),  # unknown
    st.builds(lambda x: {"sessionUpdate": "usage_update", "used": x, "size": 100}, st.integers()),
)
updates = st.one_of(chunks, tools, others)
notifications = st.builds(
    lambda update, foreign: jsonrpc.notification(
        "session/update", {"sessionId": "child-9" if foreign else SESSION, "update": update}
    ),
    updates,
    st.booleans(),
)
lines = st.one_of(
    notifications.map(lambda m: json.dumps(m, ensure_ascii=True).encode()),
    st.sampled_from([b"", b"   ", b'{"jsonrpc":"2.0",', b"[1,2]", b"\xff\xfe"]),
)


_runs = itertools.count()


@pytest.fixture(scope="module")
def store(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Store]:
    """One real store for all examples (each example is its own run)."""
    store = open_store(tmp_path_factory.mktemp("pipeline") / "baton.db")
    try:
        yield store
    finally:
        store.close()


def _repaired(text: str) -> str:
    return "".join("\ufffd" if 0xD800 <= ord(c) <= 0xDFFF else c for c in text)


def _display_safe(rendered: str) -> bool:
    return neutralize_terminal(rendered) == rendered


@settings(
    max_examples=EXAMPLES,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)
@given(
    st.lists(lines, min_size=1, max_size=25),
    st.lists(st.integers(min_value=0), max_size=8),
    st.sampled_from(["generic", "claude", "cursor", "codex"]),
)
def test_any_update_stream_survives_the_whole_pipeline(
    store: Store, frames: list[bytes], cuts: list[int], family: str
) -> None:
    data = b"".join(line + b"\n" for line in frames)
    points = sorted({c % (len(data) + 1) for c in cuts})
    reads = [data[a:b] for a, b in zip([0, *points], [*points, len(data)], strict=True)]

    normalizer = AcpNormalizer(
        redaction=Redactor(),
        display_path=lambda p: p,
        extension=extension_for(family),
        workspace="/w",
    )
    decoder = LineDecoder()
    drafts: list[Draft] = list(normalizer.begin_turn(SESSION, "turn-1"))
    sent: dict[tuple[str, str], list[str]] = {}
    valid_updates = 0
    for read in reads:
        for item in decoder.feed(read):
            if isinstance(item, FrameError):
                drafts.append(Draft(HarnessDiagnostic(category="protocol", summary=item.kind)))
                continue
            assert isinstance(item, Frame)
            kind = jsonrpc.classify(item.message)
            assert isinstance(kind, jsonrpc.Notification)
            params = kind.params
            before = len(drafts)
            if params["sessionId"] != SESSION:
                drafts += normalizer.foreign(params["sessionId"], params)
                assert len(drafts) > before, "a foreign update vanished"
                continue
            valid_updates += 1
            update = params["update"]
            out = normalizer.update(params, now_ms=0)
            drafts += out
            block = update.get("content")
            if update["sessionUpdate"].endswith("_chunk") and isinstance(block, dict):
                mid = update.get("messageId")
                if block.get("type") == "text" and isinstance(mid, str) and mid:
                    key = (update["sessionUpdate"], update["messageId"])
                    sent.setdefault(key, []).append(block["text"])
            else:
                assert out, f"update {update['sessionUpdate']!r} vanished"
        drafts += normalizer.flush_ready()
    drafts += normalizer.flush()
    drafts += normalizer.end_turn(None)

    # transcript text: kept exactly (surrogates repaired) unless redaction changed it
    shown: dict[tuple[str, str], str] = {}
    for d in drafts:
        if isinstance(d.payload, TranscriptAssistant | TranscriptThinking | TranscriptUser):
            key = (_CHUNK_VARIANT[d.payload.TYPE], d.payload.message_id)
            shown[key] = shown.get(key, "") + d.payload.text
    for key, parts in sent.items():
        got = _repaired(shown.get(key, ""))
        if MARKER not in got:
            assert _repaired("".join(parts)) in got, key

    run_id = f"run-{next(_runs)}"
    store.create_run(run_record(run_id))
    sequencer = Sequencer(run_id)
    events: list[CanonicalEvent] = []
    for d in drafts:
        event = sequencer.stamp(d.payload, session_id=SESSION, turn_id="turn-1", raw=d.raw)
        store.append(event)
        events.append(event)
    store.flush_sync()
    stored = list(store.iter_event_json(run_id))
    assert len(stored) == len(events), "the store lost events"
    for line in stored:
        assert CanonicalEvent.model_validate_json(line).to_json() == line

    buffer = io.StringIO()
    renderer = HumanRenderer(
        Console(file=buffer, force_terminal=False, color_system=None, width=120), live=False
    )
    ndjson = io.StringIO()
    machine = NdjsonRenderer(ndjson)
    for event in events:
        renderer(event)
        machine(event)
    renderer.close()
    rendered = buffer.getvalue()
    rendered.encode("utf-8")  # nothing unprintable reaches the terminal writer
    for line in rendered.splitlines():
        assert _display_safe(line), repr(line)
    assert [json.loads(x)["seq"] for x in ndjson.getvalue().splitlines()] == [e.seq for e in events]


_CHUNK_VARIANT = {
    "transcript.assistant": "agent_message_chunk",
    "transcript.thinking": "agent_thought_chunk",
    "transcript.user": "user_message_chunk",
}
