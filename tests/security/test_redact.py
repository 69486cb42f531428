"""Redaction: the corpus shows zero leaks; counts and schema ids survive; properties hold."""

from __future__ import annotations

import json
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from baton.errors import ConfigError
from baton.events.model import CanonicalEvent
from baton.security.redact import (
    MARKER,
    MIN_SECRET_LENGTH,
    Redactor,
    bench_redactor,
    classify_key,
    secret_variants,
)
from tests.security.corpus import BOUND_SECRETS, SHAPES, corpus_events, keep_events, leaks


def redact_event(redactor: Redactor, event: CanonicalEvent) -> CanonicalEvent:
    return CanonicalEvent.model_validate(redactor.value(event.model_dump(mode="json")))


@pytest.fixture
def redactor() -> Redactor:
    return Redactor(BOUND_SECRETS)


def test_corpus_has_at_least_60_shapes() -> None:
    assert len(SHAPES) >= 60
    assert len({s.name for s in SHAPES}) == len(SHAPES)
    for shape in SHAPES:
        assert shape.secret in shape.text or any(
            v in shape.text for v in secret_variants(shape.secret)
        ), shape.name


@pytest.mark.parametrize("shape", SHAPES, ids=lambda s: s.name)
def test_text_redaction_leaks_nothing(redactor: Redactor, shape: Any) -> None:
    out = redactor.text_checked(shape.text)
    assert leaks(out.value, [shape]) == []
    assert out.redacted
    assert MARKER in out.value


def test_corpus_events_leak_nothing_in_ndjson(redactor: Redactor) -> None:
    checked = 0
    for shape, event in corpus_events():
        before = event.to_json()
        assert leaks(before, [shape]) == [shape.name], "the corpus must start leaky"
        line = redact_event(redactor, event).to_json()
        assert leaks(line) == [], (shape.name, event.type, line)
        checked += 1
    assert checked >= 60 * 8


def test_counts_and_schema_ids_survive(redactor: Redactor) -> None:
    for event in keep_events():
        dumped = event.model_dump(mode="json")
        assert redactor.value(dumped) == dumped
        assert redact_event(redactor, event) == event


def test_value_rules() -> None:
    r = Redactor()
    out = r.value(
        {
            "apiKey": "abc",
            "api_key": "abc",
            "X-Api-Key": "abc",
            "AWS_SECRET_ACCESS_KEY": "abc",
            "privateKey": "abc",
            "connectionString": "abc",
            "refresh_token": "abc",
            "authorization": "abc",
            "password": 12345678,
            "token": 12345678,
            "input_tokens": 12,
            "totalTokens": 13,
            "used": 14,
            "author": "Bob",
            "auth_methods": ["oauth", "api-key"],
            "env": [{"name": "GITHUB_TOKEN", "value": "abc"}, {"name": "PATH", "value": "/bin"}],
            "argv": ["gh", "--token", "abc", "--repo", "x"],
            "credentials": {"schema": "cred/v1", "user": "bob", "expires_in": 60, "ok": True},
            "tokenUsage": {"input": 5},
        }
    )
    for key in (
        "apiKey",
        "api_key",
        "X-Api-Key",
        "AWS_SECRET_ACCESS_KEY",
        "privateKey",
        "connectionString",
        "refresh_token",
        "authorization",
        "password",
        "token",
    ):
        assert out[key] == MARKER, key
    assert out["input_tokens"] == 12 and out["totalTokens"] == 13 and out["used"] == 14
    assert out["author"] == "Bob"
    assert out["auth_methods"] == ["oauth", "api-key"]
    assert out["env"] == [
        {"name": "GITHUB_TOKEN", "value": MARKER},
        {"name": "PATH", "value": "/bin"},
    ]
    assert out["argv"] == ["gh", "--token", MARKER, "--repo", "x"]
    assert out["credentials"] == {
        "schema": "cred/v1",
        "user": MARKER,
        "expires_in": MARKER,
        "ok": True,
    }
    assert out["tokenUsage"] == {"input": 5}


def test_key_classes() -> None:
    assert classify_key("inputTokens").counts and classify_key("inputTokens").secret
    assert not classify_key("token_type").secret
    assert not classify_key("tokenizer").secret
    assert classify_key("GITHUB_TOKEN").secret
    assert classify_key("key", flag=True).secret and not classify_key("key").secret
    assert classify_key("Proxy-Authorization").header


def test_text_exemptions_and_non_secrets(redactor: Redactor) -> None:
    for s in (
        '"input_tokens": 1234, "total_tokens": 99',
        "--max-tokens 4096",
        "Running tests: 42 passed, 0 failed",
        "Author: Bob <bob@example.com>",
        "ssh git@github.com:org/repo.git",
        "bearer authentication is supported",
        "the task-abcdefghijklmnopqrstuvwxyz id",
        '{"schema": "baton.pin/v1"}',
        # near misses of the wider shapes: must stay readable
        "Slack docs: https://api.slack.com/messaging/webhooks explain incoming hooks",
        "git hooks live in .git/hooks/pre-commit",
        "monkey-patch the key-value store",
        "TASK SKILLS: ASK the DESK",
        "see https://discord.com/developers/docs/resources/webhook",
        "version 1.2.3 of sl.app and dp.io",
        "the design signal: ok",
        "Private-Lines are documented in PuTTY's manual",
        "~/projects/app/Q~ notes",
    ):
        assert redactor.text(s) == s, s


def test_fast_path_returns_same_object(redactor: Redactor) -> None:
    s = "Reading file src/baton/runner/session.py"
    assert redactor.text(s) is s
    res = redactor.text_checked(s)
    assert res.value is s and not res.redacted and not res.fallback


@pytest.mark.parametrize(
    "text",
    [
        'password: "never closed and more text',
        "-----BEGIN EC PRIVATE KEY-----\nMHcCAQEEIB and no end",
        "--token 'unterminated quoted value",
    ],
)
def test_malformed_fails_closed(text: str) -> None:
    res = Redactor().text_checked(text)
    assert res.fallback and res.redacted
    assert "never closed" not in res.value and "no end" not in res.value
    assert "unterminated quoted" not in res.value


def test_non_json_values_fail_closed() -> None:
    class Weird:
        pass

    res = Redactor().value_checked({"a": Weird(), "b": b"bytes", 3: "x"})
    assert res.fallback
    assert res.value["a"] == MARKER and res.value["b"] == MARKER
    deep: Any = "x"
    for _ in range(100):
        deep = [deep]
    assert Redactor().value_checked(deep).fallback


def test_short_secret_refused_at_binding() -> None:
    with pytest.raises(ConfigError, match="shorter than 8"):
        Redactor(["short"])
    r = Redactor()
    with pytest.raises(ConfigError):
        r.bind(["x" * (MIN_SECRET_LENGTH - 1)])
    r.bind(["x" * MIN_SECRET_LENGTH + "yz"])
    assert r.secret_count == 1


def test_bind_rebuilds_matcher() -> None:
    r = Redactor()
    s = "value Zq8wX2pL9mN4 here"
    assert r.text(s) == s
    r.bind(["Zq8wX2pL9mN4"])
    assert r.text(s) == f"value {MARKER} here"
    r.bind(["Zq8wX2pL9mN4"])  # idempotent
    assert r.secret_count == 1


def test_numbers_equal_to_a_bound_secret_are_hidden() -> None:
    r = Redactor(["8675309123"])
    assert r.value({"pin": 8675309123}) == {"pin": MARKER}
    assert r.value({"total_tokens": 8675309123}) == {"total_tokens": 8675309123}


def test_secret_variants_cover_encodings() -> None:
    v = secret_variants('a/b"c d&e')
    assert 'a/b\\"c d&e' in v
    assert "a%2Fb%22c%20d%26e" in v and "a%2Fb%22c+d%26e" in v and "a%2fb%22c%20d%26e" in v
    assert 'a\\/b\\"c d&e' in v


def test_bench_redactor_reports_microseconds() -> None:
    results = bench_redactor(200)
    assert set(results) >= {"text: short plain", "value: small tool event"}
    assert all(v > 0 for v in results.values())


# ----------------------------------------------------------------------- properties

_FRAGMENTS = [s.text for s in SHAPES] + [
    "token=",
    "--token ",
    "Authorization: Bearer ",
    '"password": "',
    "://u:p@h",
    "eyJ",
    "-----BEGIN RSA PRIVATE KEY-----",
    '\\"',
    "'",
    '"',
    " ",
    "\n",
    "=",
    ":",
    MARKER,
]


@settings(max_examples=400, deadline=None)
@given(st.text())
def test_text_never_crashes_and_is_idempotent(s: str) -> None:
    r = Redactor(BOUND_SECRETS)
    once = r.text(s)
    assert isinstance(once, str)
    assert r.text(once) == once


@settings(max_examples=400, deadline=None)
@given(st.lists(st.one_of(st.sampled_from(_FRAGMENTS), st.text(max_size=12)), max_size=8))
def test_idempotent_on_secret_like_text(parts: list[str]) -> None:
    r = Redactor(BOUND_SECRETS)
    once = r.text("".join(parts))
    assert r.text(once) == once


_json = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(),
    lambda children: (
        st.lists(children, max_size=4)
        | st.dictionaries(
            st.text(max_size=12)
            | st.sampled_from(["token", "apiKey", "input_tokens", "schema", "value", "name"]),
            children,
            max_size=4,
        )
    ),
    max_leaves=20,
)


@settings(max_examples=300, deadline=None)
@given(_json)
def test_value_never_crashes_and_is_idempotent(v: Any) -> None:
    r = Redactor(BOUND_SECRETS)
    once = r.value(v)
    json.dumps(once)
    assert r.value(once) == once


def test_a_preview_never_shows_part_of_a_secret_cut_by_its_limit() -> None:
    r = Redactor(BOUND_SECRETS)
    lines = [f"line {i}: {shape.text}\n" for i, shape in enumerate(SHAPES)]
    text = "".join(lines)
    for limit in (256, 1000, 4096):
        preview = r.preview(text, limit)
        assert preview.startswith("…")
        assert len(preview.encode()) <= limit + len("…".encode())
        assert leaks(preview) == []
        # only whole lines: the first shown line is a complete corpus line, redacted
        assert preview[1:].split("\n")[0].startswith("line ")
        for shape in SHAPES:  # no tail of any secret survives at the cut
            tail = shape.secret[len(shape.secret) // 2 :]
            assert len(tail) < 12 or tail not in preview, shape.name


def test_a_preview_of_a_wrapped_ring_drops_its_partial_first_line() -> None:
    r = Redactor()
    assert r.preview("rStUvWxYz0123456789abcdEF ok\nnext line\n", 4096, whole=False) == (
        "…next line\n"
    )
    assert r.preview("short\n", 4096) == "short\n"


def test_the_whole_corpus_in_one_text_is_redacted_without_falling_back() -> None:
    """One odd shape must not hide everything after it (a preview, a log of many lines)."""
    r = Redactor(BOUND_SECRETS)
    text = "".join(f"line {i}: {shape.text}\n" for i, shape in enumerate(SHAPES))
    res = r.text_checked(text)
    assert not res.fallback, res.reasons
    assert leaks(res.value) == []
    assert res.value.count("\nline ") == len(SHAPES) - 1
    assert r.text(res.value) == res.value
