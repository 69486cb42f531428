"""The redaction corpus: secret shapes, where they appear, and a leak check.

Reusable by any test that writes something (the store, NDJSON output, logs)::

    from tests.security.corpus import BOUND_SECRETS, SHAPES, corpus_events, leaks

    redactor = Redactor(BOUND_SECRETS)
    for event in corpus_events():
        line = write_it_somewhere(redactor, event)
        assert leaks(line) == []

Each :class:`SecretShape` holds the ``secret`` (the part that must never survive, in
any spelling :func:`baton.security.redact.secret_variants` knows) and the ``text`` an
agent or a tool would produce around it. Shapes marked ``bound`` are credentials bound
to the session: no pattern knows them, only their value (:data:`BOUND_SECRETS`).
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from typing import Any
from urllib.parse import quote

from baton.events.model import (
    CanonicalEvent,
    DiffContent,
    HarnessDiagnostic,
    Payload,
    RequestCreated,
    SessionFailed,
    ToolExecutionCompleted,
    ToolExecutionStarted,
    ToolOutput,
    TranscriptAssistant,
    TranscriptThinking,
    TurnSubmitted,
    UsageReported,
)
from baton.security.redact import secret_variants


@dataclass(frozen=True)
class SecretShape:
    name: str
    secret: str
    text: str
    bound: bool = False


_JWT = (
    "eyJhbGciOiJIUzI1NiIsInR5cCI6IkpXVCJ9."
    "eyJzdWIiOiIxMjM0NTY3ODkwIiwibmFtZSI6IkpvaG4gRG9lIiwiaWF0IjoxNTE2MjM5MDIyfQ."
    "SflKxwRJSMeKKF2QT4fwpMeJf36POk6yJV_adQssw5c"
)
_PEM_BODY = "MIIEowIBAAKCAQEA0Z3VS5JJcds3xfn/ygWyF8PbnGy0AHB7MhgwMbRvI0MBZhpI\nXk0j0bZ1nMFgkC0MhxpVbL2eMHbDo1JIkDp1eQIDAQABAoIBAQCXvYQ0yIbrQ7Xz"
_BOUND_OPAQUE = "Qm9uZC1vcGFxdWUtc2VjcmV0LTQyNDI0Mg"  # no pattern knows this shape
_BOUND_SPECIAL = 'p@ss/w:rd"\\with spaces&more'

SHAPES: tuple[SecretShape, ...] = (
    SecretShape(
        "openai key",
        "sk-proj-4fJk2LmN9pQrStUvWxYz0123456789abcdEF",
        "OPENAI_KEY is sk-proj-4fJk2LmN9pQrStUvWxYz0123456789abcdEF ok",
    ),
    SecretShape(
        "anthropic key",
        "sk-ant-api03-AbCdEfGhIjKlMnOpQrStUvWxYz0123456789-_xyz",
        "using sk-ant-api03-AbCdEfGhIjKlMnOpQrStUvWxYz0123456789-_xyz now",
    ),
    SecretShape(
        "github classic pat",
        "ghp_1234567890abcdefghijABCDEFGHIJ123456",
        "remote uses ghp_1234567890abcdefghijABCDEFGHIJ123456",
    ),
    SecretShape(
        "github fine-grained pat",
        "github_pat_11ABCDEFG0123456789_abcdefghijklmnopqrstuvwxyzABCDEF",
        "token github_pat_11ABCDEFG0123456789_abcdefghijklmnopqrstuvwxyzABCDEF",
    ),
    SecretShape(
        "github oauth",
        "gho_16C7e42F292c6912E7710c838347Ae178B4a",
        "gho_16C7e42F292c6912E7710c838347Ae178B4a was issued",
    ),
    SecretShape(
        "github app token",
        "ghs_abcdefghijklmnopqrstuvwxyz0123456789",
        "GH_APP=ghs_abcdefghijklmnopqrstuvwxyz0123456789",
    ),
    SecretShape(
        "slack bot token",
        "xoxb-123456789012-1234567890123-AbCdEfGhIjKlMnOpQrStUvWx",
        "slack: xoxb-123456789012-1234567890123-AbCdEfGhIjKlMnOpQrStUvWx",
    ),
    SecretShape(
        "slack user token",
        "xoxp-123456789012-123456789012-123456789012-abcdef0123456789abcdef0123456789",
        "xoxp-123456789012-123456789012-123456789012-abcdef0123456789abcdef0123456789",
    ),
    SecretShape(
        "aws access key id",
        "AKIAIOSFODNN7EXAMPLE",
        "aws_access_key_id AKIAIOSFODNN7EXAMPLE in config",
    ),
    SecretShape(
        "aws secret access key",
        "wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY",
        "export AWS_SECRET_ACCESS_KEY=wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY",
    ),
    SecretShape(
        "aws session key id", "ASIAY34FZKBOKMUTVV7A", "temporary ASIAY34FZKBOKMUTVV7A creds"
    ),
    SecretShape("gitlab pat", "glpat-xxxxXXXXxxxxXXXX1234", "CI_TOKEN glpat-xxxxXXXXxxxxXXXX1234"),
    SecretShape(
        "google api key",
        "AIzaSyDdI0hCZtE6vySjMm-WEfRq3CPzqKqqsHI",
        "key=AIzaSyDdI0hCZtE6vySjMm-WEfRq3CPzqKqqsHI&q=x",
    ),
    SecretShape(
        "google oauth token",
        "ya29.a0AfH6SMBx1234567890abcdefghijkl",
        "gcloud printed ya29.a0AfH6SMBx1234567890abcdefghijkl",
    ),
    SecretShape(
        "npm token",
        "npm_abcdefghijklmnopqrstuvwxyz0123456789",
        "//registry.npmjs.org/:_authToken=npm_abcdefghijklmnopqrstuvwxyz0123456789",
    ),
    SecretShape(
        "hugging face token",
        "hf_abcdefghijklmnopqrstuvwxyzABCDEFGH",
        "HF says hf_abcdefghijklmnopqrstuvwxyzABCDEFGH",
    ),
    SecretShape(
        "stripe live key",
        "sk_live_51HxYzAbCdEfGhIjKlMnOp",
        "stripe sk_live_51HxYzAbCdEfGhIjKlMnOp charge",
    ),
    SecretShape(
        "pypi token",
        "pypi-AgEIcHlwaS5vcmcCJGFiY2RlZmdoLWlqa2wtbW5vcC1xcnN0LXV2d3h5ejAxMjM0",
        "password = pypi-AgEIcHlwaS5vcmcCJGFiY2RlZmdoLWlqa2wtbW5vcC1xcnN0LXV2d3h5ejAxMjM0",
    ),
    SecretShape("jwt", _JWT, f"id token {_JWT} decoded"),
    SecretShape(
        "bearer header",
        "opaque-bearer-7f3a9c2e41",
        "curl -H 'Authorization: Bearer opaque-bearer-7f3a9c2e41' https://api.example.com",
    ),
    SecretShape(
        "basic header",
        "YWxhZGRpbjpvcGVuc2VzYW1l",
        "Authorization: Basic YWxhZGRpbjpvcGVuc2VzYW1l\r\nHost: x",
    ),
    SecretShape(
        "bearer in escaped json",
        "esc4ped-j50n-b3arer-t0ken",
        '{\\"headers\\": {\\"Authorization\\": \\"Bearer esc4ped-j50n-b3arer-t0ken\\"}}',
    ),
    SecretShape(
        "cookie header", "s3ss10n-c00k13-v4lu3", "Cookie: sid=s3ss10n-c00k13-v4lu3; theme=dark"
    ),
    SecretShape("x-api-key header", "xk-51e2f9a0b7c34d1e", "X-Api-Key: xk-51e2f9a0b7c34d1e"),
    SecretShape(
        "url userinfo",
        "Sup3rS3cretPw",
        "DATABASE_URL=postgres://app:Sup3rS3cretPw@db.internal:5432/app",
    ),
    SecretShape(
        "git remote token",
        "gh-remote-t0ken-abc123",
        "git push https://x-access-token:gh-remote-t0ken-abc123@github.com/o/r.git",
    ),
    SecretShape("cli --token", "cl1-t0ken-v4lue", "deploy --token cl1-t0ken-v4lue --region eu"),
    SecretShape("cli --api-key=", "ap1-k3y-v4lue-99", "tool --api-key=ap1-k3y-v4lue-99 run"),
    SecretShape(
        "cli --password quoted",
        "quoted pass phrase 42",
        'mysql --password "quoted pass phrase 42" -h db',
    ),
    SecretShape(
        "argv in json text",
        "cl13nt-s3cr3t-v4l",
        '["login", "--client-secret", "cl13nt-s3cr3t-v4l"]',
    ),
    SecretShape(
        "pem rsa key",
        _PEM_BODY,
        f"-----BEGIN RSA PRIVATE KEY-----\n{_PEM_BODY}\n-----END RSA PRIVATE KEY-----",
    ),
    SecretShape(
        "pem openssh key",
        "b3BlbnNzaC1rZXktdjEAAAAABG5vbmU",
        "-----BEGIN OPENSSH PRIVATE KEY-----\nb3BlbnNzaC1rZXktdjEAAAAABG5vbmU\n-----END OPENSSH PRIVATE KEY-----",
    ),
    SecretShape(
        "json password", "hunter2-but-longer", '{"user": "bob", "password": "hunter2-but-longer"}'
    ),
    SecretShape(
        "yaml client secret",
        "yaml-cl1ent-s3cret",
        "oauth:\n  client_secret: yaml-cl1ent-s3cret\n  client_id: abc",
    ),
    SecretShape("dotenv password", "d0tenv-pa55w0rd", "DATABASE_PASSWORD=d0tenv-pa55w0rd"),
    SecretShape(
        "connection string",
        "C0nnStr1ngPwd",
        "Server=tcp:db;Database=app;User Id=sa;Password=C0nnStr1ngPwd;",
    ),
    SecretShape(
        "azure account key",
        "dGhpcyBpcyBhbiBhY2NvdW50IGtleQ==",
        "DefaultEndpointsProtocol=https;AccountName=x;AccountKey=dGhpcyBpcyBhbiBhY2NvdW50IGtleQ==;",
    ),
    SecretShape(
        "bare bearer in prose",
        "pr0se-bearer-9f8e7d",
        "then send Bearer pr0se-bearer-9f8e7d to the API",
    ),
    SecretShape(
        "bound opaque secret", _BOUND_OPAQUE, f"the agent echoed {_BOUND_OPAQUE} back", bound=True
    ),
    SecretShape(
        "bound secret, json-escaped",
        _BOUND_SPECIAL,
        '{"note": "' + _BOUND_SPECIAL.replace("\\", "\\\\").replace('"', '\\"') + '"}',
        bound=True,
    ),
    SecretShape(
        "bound secret, url-encoded",
        _BOUND_SPECIAL,
        "https://example.com/cb?state=" + quote(_BOUND_SPECIAL, safe=""),
        bound=True,
    ),
)
"""At least 30 secret shapes (see the module docstring)."""

BOUND_SECRETS: tuple[str, ...] = tuple(sorted({s.secret for s in SHAPES if s.bound}))


def leaks(text: str, shapes: Iterable[SecretShape] = SHAPES) -> list[str]:
    """Names of shapes whose secret survives in ``text`` in any known spelling."""
    found: list[str] = []
    for shape in shapes:
        if any(v in text for v in secret_variants(shape.secret)):
            found.append(shape.name)
    return found


def _event(seq: int, payload: Payload, raw: Any = None) -> CanonicalEvent:
    return CanonicalEvent(
        type=payload.TYPE,
        seq=seq,
        run_id="run-1",
        session_id="sess-1",
        turn_id="turn-1",
        ts="2026-01-01T00:00:00.000Z",
        payload=payload,
        raw=raw,
    )


def _diff(text: str) -> str:
    return f"--- a/config.py\n+++ b/config.py\n@@ -1,2 +1,2 @@\n-OLD = 1\n+{text}\n context\n"


def placements(shape: SecretShape, seq: int = 1) -> Iterator[CanonicalEvent]:
    """The shape's text in tool inputs, outputs, stderr, diffs and agent messages."""
    text = shape.text
    yield _event(seq, TranscriptAssistant(message_id="m1", text=f"Here you go:\n{text}\n"))
    yield _event(seq + 1, TranscriptThinking(message_id="m2", text=text))
    yield _event(
        seq + 2,
        ToolExecutionStarted(
            tool_call_id="call_1",
            title=f"Run {text}"[:200],
            kind="execute",
            status="pending",
            raw_input={"command": text, "argv": ["sh", "-c", text], "cwd": "."},
        ),
        raw={"sessionUpdate": "tool_call", "rawInput": {"command": text}},
    )
    yield _event(
        seq + 3,
        ToolExecutionCompleted(
            tool_call_id="call_1",
            title="Run",
            kind="execute",
            status="completed",
            raw_output={"stdout": text, "stderr": "", "exit_code": 0},
            output=ToolOutput(tail=text, total_bytes=len(text), sha256="0" * 64, truncated=False),
            diffs=[DiffContent(path="config.py", old_text="OLD = 1\n", new_text=_diff(text))],
        ),
    )
    yield _event(
        seq + 4,
        HarnessDiagnostic(
            category="stderr", summary="agent wrote to stderr", stderr_preview=f"warn: {text}\n"
        ),
    )
    yield _event(
        seq + 5,
        RequestCreated(
            request_id="r1", kind="permission", title="Allow?", summary={"command": text}
        ),
    )
    yield _event(
        seq + 6,
        SessionFailed(error_type="AgentExited", message=f"agent died: {text}", stderr_preview=text),
    )
    yield _event(
        seq + 7, TurnSubmitted(prompt_preview=text, prompt_bytes=len(text), prompt_sha256="1" * 64)
    )


def corpus_events() -> Iterator[tuple[SecretShape, CanonicalEvent]]:
    """Every shape in every placement."""
    for i, shape in enumerate(SHAPES):
        for event in placements(shape, seq=1 + i * 10):
            yield shape, event


def keep_events() -> list[CanonicalEvent]:
    """Events whose numbers and schema ids must come out of redaction unchanged."""
    return [
        _event(
            1,
            UsageReported(
                available=True,
                input_tokens=1234,
                output_tokens=567,
                total_tokens=1801,
                cached_read_tokens=99,
                context_used=4096,
                context_size=200000,
            ),
            raw={
                "usage": {"inputTokens": 1234, "outputTokens": 567, "totalTokens": 1801},
                "tokenUsage": {"input": 1234, "output": 567},
                "max_tokens": 8192,
                "used": 4096,
                "size": 200000,
                "schema": "baton.pin/v1",
                "$schema": "https://json-schema.org/draft/2020-12/schema",
                "token_type": "Bearer",
            },
        ),
    ]
