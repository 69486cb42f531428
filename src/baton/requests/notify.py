"""Tell someone a human is needed: a command, a webhook, a desktop notification.

One small service, :class:`Notifier`, that any part calls with a :class:`Notice`
(a human request, or anything request-like: a budget threshold, a task that needs
attention): ``baton run``'s broker for the agent's escalated requests, ``baton up``'s
team loop for reviews, questions, needs-attention requests and its role sessions'
permissions. Each notice is sent **at most once** (its id is claimed in the store's
``notifications`` table first, so neither a restart nor a second process repeats it),
**never blocking** the caller (it runs in the background), and a failing channel
becomes a ``harness.diagnostic`` event (category ``notification``), never an exception.

Only what needs a human notifies: an auto-allowed read or a policy denial must not
page anyone, or people learn to ignore the page.

- ``command``: an argv list (never a shell), given the notice as JSON on stdin,
  with a minimal environment (``PATH``, ``HOME``, ``LANG`` plus
  ``BATON_REQUEST_ID``/``BATON_REQUEST_KIND``), in its own process group so a
  timeout can kill all of it;
- ``webhook``: an ``http(s)`` URL that receives the same JSON by POST; redirects
  are not followed (a redirect could forward the request elsewhere);
- ``desktop``: ``notify-send`` when installed.

The JSON: ``id``, ``kind``, ``title``, ``project``, ``answer_with`` (the command line
that answers it), ``link`` (the dashboard page, when ``dashboard`` is set) and, for a
request, every field of its record as ``baton inbox --json`` prints it (``request_id``,
``document``, …).
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import shutil
import urllib.error
import urllib.request
from collections.abc import Awaitable, Callable, Coroutine, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import urlsplit

from baton.errors import ConfigError
from baton.events.model import HarnessDiagnostic, Payload
from baton.events.sequencer import format_dt
from baton.procgroup import exited_within, stop_group
from baton.requests.ledger import RequestRecord
from baton.requests.ledger_changes import utc_clock
from baton.requests.ledger_reads import LedgerReads
from baton.requests.policy import Decision
from baton.requests.render import answer_hint, safe_text, to_data
from baton.store import notify_sql
from baton.store.store import Store

__all__ = ["NOTIFY_KEYS", "Notice", "Notifier", "NotifyConfig", "notify", "notify_if_escalated"]

_PREVIEW = 4096


NOTIFY_KEYS = frozenset({"command", "webhook", "desktop", "timeout", "dashboard"})
"""The keys of the ``[notify]`` table."""


def _url(value: Any, key: str) -> str | None:
    if value is None:
        return None
    if not isinstance(value, str) or not value.strip():
        raise ConfigError(f"[notify] {key} must be an http(s) URL string")
    if urlsplit(value).scheme not in ("http", "https"):
        raise ConfigError(f"[notify] {key} must be an http(s) URL, got {value!r}")
    return value


@dataclass(frozen=True, slots=True)
class NotifyConfig:
    """The ``[notify]`` table of ``baton.toml``."""

    command: tuple[str, ...] = ()
    webhook: str | None = None
    desktop: bool = False
    timeout: float = 10.0
    dashboard: str | None = None
    """The dashboard's base URL (``baton serve``'s), for the notice's link."""

    def __post_init__(self) -> None:
        _url(self.webhook, "webhook")
        _url(self.dashboard, "dashboard")
        if self.timeout <= 0:
            raise ConfigError("[notify] timeout must be a positive number of seconds")

    @property
    def enabled(self) -> bool:
        return bool(self.command or self.webhook or self.desktop)

    # Any: a TOML table as parsed, checked key by key here.
    @classmethod
    def from_table(cls, table: Any) -> NotifyConfig:
        """``[notify]`` checked key by key: a wrong type or unknown key is a ConfigError."""
        if not isinstance(table, Mapping):
            raise ConfigError("[notify] must be a table")
        unknown = sorted(set(table) - NOTIFY_KEYS)
        if unknown:
            raise ConfigError(f"[notify]: unknown keys {', '.join(unknown)}")
        command = table.get("command", [])
        if (
            not isinstance(command, list)
            or not all(isinstance(a, str) for a in command)
            or (command and not command[0])
        ):
            raise ConfigError(
                "[notify] command must be a list of strings (an argv, not a shell line)"
            )
        desktop = table.get("desktop", False)
        if not isinstance(desktop, bool):
            raise ConfigError("[notify] desktop must be true or false")
        timeout = table.get("timeout", 10.0)
        if isinstance(timeout, bool) or not isinstance(timeout, int | float) or timeout <= 0:
            raise ConfigError("[notify] timeout must be a positive number of seconds")
        return cls(
            command=tuple(command),
            webhook=_url(table.get("webhook"), "webhook"),
            desktop=desktop,
            timeout=float(timeout),
            dashboard=_url(table.get("dashboard"), "dashboard"),
        )


@dataclass(frozen=True, slots=True)
class Notice:
    """What a notification says: request-like, so any part can send one."""

    id: str
    """Unique per thing to announce (a request id; ``budget:…`` for other parts)."""
    kind: str
    title: str
    project: str = ""
    answer_with: str = ""
    """How to answer it (a command line), or what to do."""
    link: str | None = None
    request: Mapping[str, Any] | None = field(default=None)
    """The whole request record, for a request."""

    @classmethod
    def for_request(
        cls, record: RequestRecord, *, project: str = "", dashboard: str | None = None
    ) -> Notice:
        return cls(
            id=record.request_id,
            kind=record.kind,
            title=record.title,
            project=project,
            answer_with=answer_hint(record),
            link=f"{dashboard.rstrip('/')}/#{record.request_id}" if dashboard else None,
            request=to_data(record),
        )

    def body(self) -> bytes:
        """The JSON sent: a request's record (as ``baton inbox --json`` prints it) with the
        notice's fields, or the notice alone."""
        data: dict[str, Any] = dict(self.request) if self.request is not None else {}
        data |= {
            "id": self.id,
            "kind": self.kind,
            "title": self.title,
            "project": self.project,
            "answer_with": self.answer_with,
            "link": self.link,
        }
        return json.dumps(data, ensure_ascii=False).encode("utf-8")


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


async def send(notice: Notice, config: NotifyConfig) -> list[HarnessDiagnostic]:
    """Run every configured channel for ``notice``; returns diagnostics for the failures."""
    body = notice.body()
    env = {k: v for k, v in os.environ.items() if k in ("PATH", "HOME", "LANG", "LC_ALL")}
    env |= {"BATON_REQUEST_ID": notice.id, "BATON_REQUEST_KIND": notice.kind}
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
            title = f"baton needs you: {notice.kind}"
            jobs.append(
                _run(
                    [notify_send, "--app-name=baton", title, safe_text(notice.title)],
                    b"",
                    env,
                    config.timeout,
                )
            )
    results = await asyncio.gather(*jobs)
    diagnostics += [d for d in results if d is not None]
    return diagnostics


async def notify(record: RequestRecord, config: NotifyConfig) -> list[HarnessDiagnostic]:
    """Run every configured channel for a request; returns diagnostics for the failures."""
    return await send(Notice.for_request(record, dashboard=config.dashboard), config)


async def notify_if_escalated(
    decision: Decision, record: RequestRecord, config: NotifyConfig
) -> list[HarnessDiagnostic]:
    """Notify only when ``decision`` sends the request to a human."""
    if not decision.needs_human or not config.enabled:
        return []
    return await notify(record, config)


Report = Callable[[Payload], Awaitable[Any]]


class Notifier:
    """The one notification service: :meth:`request` / :meth:`send` return at once.

    ``store``: where each notice id is claimed before it is sent (at most once across
    processes and restarts; without one, at most once in this process). ``report``:
    how a failure becomes an event (the run's emitter).
    """

    def __init__(
        self,
        config: NotifyConfig,
        *,
        store: Store | None = None,
        project: str = "",
        report: Report | None = None,
    ) -> None:
        self.config = config
        self.store = store
        self.project = project
        self.report = report
        self._seen: set[str] = set()
        self._tasks: set[asyncio.Task[None]] = set()

    @property
    def enabled(self) -> bool:
        return self.config.enabled

    def request(self, record: RequestRecord) -> None:
        """Announce a request that waits for a human (at most once, in the background)."""
        self.send(Notice.for_request(record, project=self.project, dashboard=self.config.dashboard))

    def send_request(self, request_id: str, ledger: LedgerReads) -> None:
        """Announce a request known by id (read from the ledger first, in the background)."""
        if not self.config.enabled or request_id in self._seen:
            return

        async def read_and_send() -> None:
            try:
                record = await ledger.get(request_id)
            except Exception as exc:  # a notifier never fails its caller
                await self._report([_diagnostic(f"notification for {request_id} failed: {exc}")])
                return
            if record.state.value == "pending":
                self.request(record)

        self._spawn(read_and_send())

    def _spawn(self, job: Coroutine[Any, Any, None]) -> None:
        task = asyncio.get_running_loop().create_task(job, name="notify")
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    def send(self, notice: Notice) -> None:
        """Announce ``notice`` in the background; a second call for its id does nothing."""
        if not self.config.enabled or notice.id in self._seen:
            return
        self._seen.add(notice.id)
        self._spawn(self._deliver(notice))

    async def _deliver(self, notice: Notice) -> None:
        try:
            if self.store is not None:
                now = format_dt(utc_clock())
                claimed = await self.store.write(
                    lambda tx: notify_sql.claim(tx, notice.id, notice.kind, now)
                )
                if not claimed:
                    return
            diagnostics = await send(notice, self.config)
        except Exception as exc:  # a notifier never fails its caller
            diagnostics = [_diagnostic(f"notification for {notice.id} failed: {exc}")]
        await self._report(diagnostics)

    async def _report(self, diagnostics: Sequence[HarnessDiagnostic]) -> None:
        if self.report is None:
            return
        for diagnostic in diagnostics:
            with contextlib.suppress(Exception):  # the run may be closing: nobody to tell
                await self.report(diagnostic)

    async def drain(self) -> None:
        """Wait for the notifications under way (shutdown, tests)."""
        while self._tasks:
            await asyncio.gather(*list(self._tasks), return_exceptions=True)
