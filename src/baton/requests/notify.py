"""Tell someone a human is needed: a command, a webhook, a desktop notification.

Only escalations notify: an auto-allowed read or a policy denial must not page
anyone, or people learn to ignore the page. Every channel is bounded by a
timeout and runs off the request's path: a failing hook becomes a
``harness.diagnostic`` payload for the runner to emit, never an exception and
never a delay to the request itself (the runner schedules this in its task
group).

- ``command``: an argv list (never a shell), given the request as JSON on stdin,
  with a minimal environment (``PATH``, ``HOME``, ``LANG`` plus
  ``BATON_REQUEST_ID``/``BATON_REQUEST_KIND``), in its own process group so a
  timeout can kill all of it;
- ``webhook``: an ``http(s)`` URL that receives the same JSON by POST; redirects
  are not followed (a redirect could forward the request elsewhere);
- ``desktop``: ``notify-send`` when installed.
"""

from __future__ import annotations

import asyncio
import json
import os
import shutil
import urllib.error
import urllib.request
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlsplit

from baton.errors import ConfigError
from baton.events.model import HarnessDiagnostic
from baton.procgroup import exited_within, stop_group
from baton.requests.ledger import RequestRecord
from baton.requests.policy import Decision
from baton.requests.render import safe_text, to_data

__all__ = ["NOTIFY_KEYS", "NotifyConfig", "notify", "notify_if_escalated", "notify_notice"]

_PREVIEW = 4096


NOTIFY_KEYS = frozenset({"command", "webhook", "desktop", "timeout"})
"""The keys of the ``[notify]`` table."""


@dataclass(frozen=True, slots=True)
class NotifyConfig:
    """The ``[notify]`` table of ``baton.toml``."""

    command: tuple[str, ...] = ()
    webhook: str | None = None
    desktop: bool = False
    timeout: float = 10.0

    def __post_init__(self) -> None:
        if self.webhook is not None and urlsplit(self.webhook).scheme not in ("http", "https"):
            raise ConfigError(f"[notify] webhook must be an http(s) URL, got {self.webhook!r}")
        if self.timeout <= 0:
            raise ConfigError("[notify] timeout must be positive")

    @property
    def enabled(self) -> bool:
        return bool(self.command or self.webhook or self.desktop)

    @classmethod
    def from_table(cls, table: Mapping[str, Any]) -> NotifyConfig:
        unknown = sorted(set(table) - NOTIFY_KEYS)
        if unknown:
            raise ConfigError(f"[notify] has unknown keys {unknown}")
        command = table.get("command", ())
        if isinstance(command, str) or not all(isinstance(a, str) for a in command):
            raise ConfigError(
                "[notify] command must be a list of strings (an argv, not a shell line)"
            )
        webhook = table.get("webhook")
        if webhook is not None and not isinstance(webhook, str):
            raise ConfigError("[notify] webhook must be a string")
        return cls(
            command=tuple(command),
            webhook=webhook,
            desktop=bool(table.get("desktop", False)),
            timeout=float(table.get("timeout", 10.0)),
        )


def _diagnostic(
    summary: str, stderr: bytes = b"", exit_code: int | None = None
) -> HarnessDiagnostic:
    return HarnessDiagnostic(
        category="notification",
        summary=safe_text(summary)[:_PREVIEW],
        stderr_preview=safe_text(stderr[-_PREVIEW:].decode("utf-8", "replace")),
        exit_code=exit_code,
    )


async def _run(
    argv: Sequence[str], stdin: bytes, env: Mapping[str, str], timeout: float
) -> HarnessDiagnostic | None:
    try:
        proc = await asyncio.create_subprocess_exec(
            *argv,
            stdin=asyncio.subprocess.PIPE,
            stdout=asyncio.subprocess.DEVNULL,
            stderr=asyncio.subprocess.PIPE,
            env=dict(env),
            start_new_session=True,
        )
    except OSError as exc:
        return _diagnostic(f"notification command {argv[0]!r} could not start: {exc}")
    try:
        _, stderr = await asyncio.wait_for(proc.communicate(stdin), timeout)
    except TimeoutError:
        await stop_group(proc.pid, exited_within(proc), grace=5, term=False)
        return _diagnostic(f"notification command {argv[0]!r} timed out after {timeout:g}s")
    if proc.returncode != 0:
        return _diagnostic(
            f"notification command {argv[0]!r} exited with {proc.returncode}",
            stderr,
            proc.returncode,
        )
    return None


class _NoRedirect(urllib.request.HTTPRedirectHandler):
    def redirect_request(self, *args: Any, **kwargs: Any) -> None:
        return None


def _post(url: str, body: bytes, timeout: float) -> int:
    opener = urllib.request.build_opener(_NoRedirect)
    request = urllib.request.Request(  # noqa: S310 - scheme checked to be http(s)
        url,
        data=body,
        method="POST",
        headers={"Content-Type": "application/json", "User-Agent": "baton"},
    )
    with opener.open(request, timeout=timeout) as response:
        status: int = response.status
        return status


async def _webhook(url: str, body: bytes, timeout: float) -> HarnessDiagnostic | None:
    if urlsplit(url).scheme not in ("http", "https"):
        return _diagnostic(f"notification webhook refused: {url!r} is not http(s)")
    try:
        status = await asyncio.to_thread(_post, url, body, timeout)
    except urllib.error.HTTPError as exc:
        return _diagnostic(f"notification webhook answered HTTP {exc.code}")
    except (OSError, ValueError) as exc:
        return _diagnostic(f"notification webhook failed: {exc}")
    if not 200 <= status < 300:
        return _diagnostic(f"notification webhook answered HTTP {status}")
    return None


async def notify(record: RequestRecord, config: NotifyConfig) -> list[HarnessDiagnostic]:
    """Run every configured channel for ``record``; returns diagnostics for the failures."""
    return await notify_notice(
        record.request_id, record.kind, record.title, to_data(record), config
    )


async def notify_notice(
    ident: str, kind: str, title: str, data: Mapping[str, Any], config: NotifyConfig
) -> list[HarnessDiagnostic]:
    """Every configured channel for one notice (a request's record, or a request-like
    notice such as a budget threshold: ``data`` is its JSON); diagnostics for failures."""
    body = json.dumps(dict(data), ensure_ascii=False).encode("utf-8")
    env = {k: v for k, v in os.environ.items() if k in ("PATH", "HOME", "LANG", "LC_ALL")}
    env |= {"BATON_REQUEST_ID": ident, "BATON_REQUEST_KIND": kind}
    jobs = []
    if config.command:
        jobs.append(_run(config.command, body, env, config.timeout))
    if config.webhook:
        jobs.append(_webhook(config.webhook, body, config.timeout))
    diagnostics: list[HarnessDiagnostic] = []
    if config.desktop:
        notify_send = shutil.which("notify-send")
        if notify_send is None:
            diagnostics.append(
                _diagnostic("desktop notification unavailable: notify-send not found")
            )
        else:
            heading = f"baton needs you: {kind}"
            jobs.append(
                _run(
                    [notify_send, "--app-name=baton", heading, safe_text(title)],
                    b"",
                    env,
                    config.timeout,
                )
            )
    results = await asyncio.gather(*jobs)
    diagnostics += [d for d in results if d is not None]
    return diagnostics


async def notify_if_escalated(
    decision: Decision, record: RequestRecord, config: NotifyConfig
) -> list[HarnessDiagnostic]:
    """Notify only when ``decision`` sends the request to a human."""
    if not decision.needs_human or not config.enabled:
        return []
    return await notify(record, config)
