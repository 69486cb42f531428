"""Recorded Cursor traces replay to golden canonical output.

Every ``tests/traces/cursor/*.ndjson`` must have a ``*.expected.json`` beside it
(payload dicts and baton's replies, in order). ``BATON_REGEN_GOLDEN=1`` rewrites
the goldens; review the diff before committing it.
"""

from __future__ import annotations

import builtins
import json
import os
from pathlib import Path

import pytest

from ._replay import OUTSIDE, WORKSPACE, detokenize, load_trace, replay

TRACES = Path(__file__).resolve().parents[1] / "traces" / "cursor"
REGEN = os.environ.get("BATON_REGEN_GOLDEN") == "1"


def _names() -> list[str]:
    return sorted(p.name.removesuffix(".ndjson") for p in TRACES.glob("*.ndjson"))


@pytest.fixture
def tokens(tmp_path: Path) -> dict[str, str]:
    """A workspace with images, a symlink escaping it, and a directory outside it."""
    ws = tmp_path / "ws"
    outside = tmp_path / "outside"
    (ws / "art").mkdir(parents=True)
    outside.mkdir()
    (ws / "art" / "diagram.png").write_bytes(b"\x89PNG not really")
    (ws / "art" / "sketch.jpg").write_bytes(b"not a jpeg")
    (outside / "secret.png").write_bytes(b"private")
    (ws / "art" / "link.png").symlink_to(outside / "secret.png")
    return {WORKSPACE: str(ws), OUTSIDE: str(outside)}


def test_there_are_traces() -> None:
    assert len(_names()) >= 7


def test_every_trace_has_an_expected_file_and_no_orphans() -> None:
    traces = set(_names())
    expected = {p.name.removesuffix(".expected.json") for p in TRACES.glob("*.expected.json")}
    if not REGEN:
        assert traces - expected == set(), "traces without an expected file"
    assert expected - traces == set(), "expected files without a trace"


@pytest.mark.parametrize("name", _names())
def test_trace_replays_to_golden(
    name: str, tokens: dict[str, str], monkeypatch: pytest.MonkeyPatch
) -> None:
    lines = load_trace(TRACES / f"{name}.ndjson", tokens)

    def no_open(*args: object, **kwargs: object) -> None:
        raise AssertionError(f"an extension opened a file: {args!r}")

    # Extensions never read bytes: only lstat/realpath are allowed (containment).
    monkeypatch.setattr(builtins, "open", no_open)
    monkeypatch.setattr(os, "open", no_open)
    got = replay(lines, "cursor", tokens[WORKSPACE])
    monkeypatch.undo()

    got = detokenize(got, tokens)
    path = TRACES / f"{name}.expected.json"
    if REGEN:
        path.write_text(json.dumps(got, indent=2, ensure_ascii=False) + "\n", encoding="utf-8")
    assert path.exists(), f"{path.name} is missing (run with BATON_REGEN_GOLDEN=1)"
    assert got == json.loads(path.read_text(encoding="utf-8"))
    mismatched = [r for r in got if r.get("client_answer_matches") is False]
    assert mismatched == [], "baton's replies differ from the recorded client answers"
