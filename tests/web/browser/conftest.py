"""A real ``baton up --serve`` on the built-in agents, and Debian's chromium driven by Playwright.

Each test gets its own project in a temporary directory (``baton init``, a git
repository, QA asking before it runs anything) and its own team process on a
free port; the browser logs in with the one-time code that process printed.
Screenshots go to ``.cache/artifacts/web/`` in the worktree (a stable path
the closing note names). Waits are on page conditions, never sleeps.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import signal
import subprocess
import sys
import threading
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from tests.support.chromium import CHROMIUM, CHROMIUM_ARGS
from tests.support.project import baton_in, project_env

REPO = Path(__file__).resolve().parents[3]
ARTIFACTS = REPO / ".cache" / "artifacts" / "web"
_URL = re.compile(r"baton dashboard: (http://\S+/login#code=\S+)")

if not Path(CHROMIUM).exists() or shutil.which("git") is None:
    if os.environ.get("BATON_REQUIRE_BROWSER") == "1":
        raise RuntimeError("the browser tests need /usr/bin/chromium (scripts/install-chromium)")
    pytest.skip("no /usr/bin/chromium (run scripts/install-chromium)", allow_module_level=True)

playwright_api = pytest.importorskip("playwright.sync_api")


def baton(root: Path, *args: str) -> str:
    """``baton ARGS`` in the project, as a user runs it (isolated HOME and state)."""
    result = baton_in(root, *args, timeout=120)
    assert result.returncode == 0, result.stdout + result.stderr
    return result.stdout


@dataclass
class Team:
    """One project and its ``baton up --serve`` (restartable on the same port)."""

    root: Path
    port: int = 0
    proc: subprocess.Popen[str] | None = None
    url: str = ""
    output: list[str] = field(default_factory=list)

    def start(self) -> str:
        """Start the team and its dashboard; returns the printed one-time login URL."""
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "baton", "up", "--serve", "--port", str(self.port)],
            cwd=self.root,
            env=project_env(self.root),
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
            text=True,
            start_new_session=True,
        )
        assert self.proc.stderr is not None
        found = threading.Event()

        def read(stream: Any) -> None:
            for line in stream:
                self.output.append(line)
                match = _URL.search(line)
                if match and not found.is_set():
                    self.url = match.group(1)
                    found.set()
            found.set()

        threading.Thread(target=read, args=(self.proc.stderr,), daemon=True).start()
        assert found.wait(60), "baton up printed no dashboard URL"
        assert self.url, "".join(self.output)
        self.port = int(re.search(r":(\d+)/", self.url).group(1))  # type: ignore[union-attr]
        return self.url

    @property
    def origin(self) -> str:
        return self.url.split("/login", 1)[0]

    def new_login_url(self) -> str:
        """Another one-time code (``baton serve --login-code``) for another browser."""
        out = baton(self.root, "serve", "--login-code")
        code = re.search(r"login code: (\S+)", out).group(1)  # type: ignore[union-attr]
        return f"{self.origin}/login#code={code}"

    def stop(self) -> None:
        if self.proc is None or self.proc.poll() is not None:
            return
        self.proc.send_signal(signal.SIGINT)
        try:
            self.proc.wait(60)
        except subprocess.TimeoutExpired:
            os.killpg(self.proc.pid, signal.SIGKILL)
            self.proc.wait(10)

    def task(self, to: str, subject: str, body: str) -> str:
        """``baton task new`` as the human, as a user types it."""
        body_file = self.root.parent / f"task-{len(self.output)}-{abs(hash(subject))}.md"
        body_file.write_text(body, encoding="utf-8")
        out = baton(
            self.root,
            "task",
            "new",
            "--to",
            to,
            "--subject",
            subject,
            "--body-file",
            str(body_file),
            "--json",
        )
        return str(json.loads(out)["task_id"])


@pytest.fixture
def team(tmp_path: Path) -> Iterator[Team]:
    root = tmp_path / "proj"
    root.mkdir()
    (tmp_path / "home").mkdir()
    git = ["git", "-c", "user.email=t@example.invalid", "-c", "user.name=t"]
    subprocess.run([*git, "init", "-q", "."], cwd=root, check=True)
    subprocess.run([*git, "commit", "-q", "--allow-empty", "-m", "start"], cwd=root, check=True)
    baton(root, "init")
    # What baton init tells a user to commit: task trees branch from the commit, so their
    # worktrees have baton.toml (the QA step checks for it).
    subprocess.run([*git, "add", "-A"], cwd=root, check=True)
    subprocess.run([*git, "commit", "-q", "-m", "baton init"], cwd=root, check=True)
    config = root / "baton.toml"
    text = config.read_text()
    # QA asks before each command and edit: the permissions the tests answer by clicking.
    qa = text.index("[team.roles.QA]")
    end = text.index('permissions = "all"', qa)
    text = text[:end] + 'permissions = "ask"' + text[end + len('permissions = "all"') :]
    config.write_text(text)
    t = Team(root=root)
    try:
        yield t
    finally:
        t.stop()


@pytest.fixture(scope="module")
def browser() -> Iterator[Any]:
    """Module-scoped: Playwright's sync API runs its own event loop, which must be gone
    before the async tests of the other modules start theirs."""
    with playwright_api.sync_playwright() as p:
        instance = p.chromium.launch(executable_path=CHROMIUM, headless=True, args=CHROMIUM_ARGS)
        try:
            yield instance
        finally:
            instance.close()


def login(browser: Any, url: str, *, width: int = 1280, height: int = 900) -> Any:
    """A fresh browser context, logged in through the printed URL; returns its page."""
    context = browser.new_context(viewport={"width": width, "height": height})
    context.set_default_timeout(60_000)
    page = context.new_page()
    page.goto(url)
    page.wait_for_url(re.compile(r"/$"))
    page.locator("#shell").wait_for(state="detached")
    return page


def goto(page: Any, url: str) -> None:
    """Open a dashboard page and wait until it shows its data: a navigation gets the page
    shell, whose script fetches the page with the session's proof (``baton.web.auth``)."""
    page.goto(url)
    page.locator("#shell").wait_for(state="detached")


def shoot(page: Any, name: str) -> Path:
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    path = ARTIFACTS / f"{name}.png"
    page.screenshot(path=str(path), full_page=True)
    return path
