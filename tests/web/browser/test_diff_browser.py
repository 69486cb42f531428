"""The diff is the review (issue 26): Chromium against a real ``baton up --serve``, the
built-in agent writing files in its task tree's worktree, a real git repository.

The review card shows the tree's files, the merge preflight and one collapsible diff per
file; Accept merges it into main; two trees touching one file show the overlap, then the
conflict and a one-click "Send back to rebase" once the first is merged. Screenshots at
1280 and 390 px go to ``.cache/artifacts/web/`` (and ``$BATON_SHOTS_DIR`` when set)."""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest

from tests.web.browser.conftest import Team, goto, login, shoot

pytestmark = pytest.mark.slow

APP = """import sys


def greet(name):
    return "hello " + name


if __name__ == "__main__":
    print(greet(sys.argv[1] if len(sys.argv) > 1 else "you"))
"""

GREETING = """Make the greeting friendlier and write down why.

```file app.py
import sys


def greet(name):
    return f"Hello, {name}! Good to see you."


if __name__ == "__main__":
    print(greet(sys.argv[1] if len(sys.argv) > 1 else "you"))
```

```file notes/greeting.md
# Greeting

The greeting now says hello by name, with a capital H.
```
"""


def _writes(text: str) -> str:
    return f"Write the shared file.\n\n```file shared.txt\n{text}\n```\n"


HOSTILE_STEP = r"""
```sh
printf '<script>window.pwned=1</script></pre><img src=x onerror="window.pwned=2"> \033[2J \342\200\256txt.exe\n' > hostile.html
```
"""
"""A file whose diff is markup, an escape sequence and a bidi override (made at run time:
the TASK itself carries no control character)."""


GIT = ["git", "-c", "user.email=t@example.invalid", "-c", "user.name=t"]


def _on_main(root: Path) -> None:
    """The project's branch is ``main`` (git's default name depends on the machine)."""
    subprocess.run([*GIT, "branch", "-M", "main"], cwd=root, check=True)


def _commit(root: Path, name: str, text: str) -> None:
    (root / name).write_text(text)
    subprocess.run([*GIT, "add", name], cwd=root, check=True)
    subprocess.run([*GIT, "commit", "-q", "-m", f"add {name}"], cwd=root, check=True)


def _review_of(page: Any, task_id: str) -> Any:
    """The pending review card of ``task_id`` (by its link to the task), once it is there."""
    card = page.locator(
        "#cards article.kind-review:not(.done)",
        has=page.locator(f'dl a[href="/tasks/{task_id}"]'),
    ).first
    card.wait_for(timeout=180_000)
    return page.locator(f'article[data-request-id="{card.get_attribute("data-request-id")}"]')


def _keep(page: Any, name: str) -> None:
    page.evaluate("window.scrollTo(0, 0)")
    page.wait_for_timeout(200)  # one frame for the scroll to land; nothing to wait on
    path = shoot(page, name)
    where = os.environ.get("BATON_SHOTS_DIR")
    if where:
        Path(where).mkdir(parents=True, exist_ok=True)
        shutil.copy(path, Path(where) / path.name)


def _no_sideways_scroll(page: Any) -> None:
    assert page.evaluate("document.documentElement.scrollWidth") <= 390


def test_the_review_card_shows_a_real_trees_diff_and_accept_merges_it(
    team: Team, browser: Any
) -> None:
    _on_main(team.root)
    _commit(team.root, "app.py", APP)
    url = team.start()
    desktop = login(browser, url)
    task_id = team.task("DEV", "Friendlier greeting", GREETING)
    review = _review_of(desktop, task_id)
    assert review.locator("header h3").inner_text() == "Review: Friendlier greeting"
    changes = review.locator("section.review-changes")
    files = changes.locator("ul.files").inner_text()
    assert "app.py" in files and "notes/greeting.md" in files
    assert changes.locator("ul.files .fstatus-M").count() == 1
    assert changes.locator("ul.files .fstatus-A").count() == 1
    assert "merges cleanly into main" in changes.locator(".preflight.ok").inner_text()
    assert "checked just now" in changes.locator(".preflights h4").inner_text()
    assert review.get_by_role("button", name="Send back to rebase").count() == 0
    # One collapsible diff per file, line-numbered, added and removed lines apart.
    diffs = changes.locator("details.file-diff")
    assert diffs.count() == 2
    app = changes.locator("details.file-diff", has_text="app.py")
    removed = app.locator("tr.del").first.inner_text()
    added = app.locator("tr.add").first.inner_text()
    assert "hello " in removed and "Good to see you" in added
    assert app.locator("tr.del td.ln").first.inner_text() == "5"
    assert app.locator("tr.add td.ln").nth(1).inner_text() == "5"
    table = app.locator("table.diff-lines")
    assert table.is_visible()
    app.locator("summary").click()
    table.wait_for(state="hidden")
    assert app.get_attribute("open") is None
    app.locator("summary").click()
    table.wait_for(state="visible")
    _keep(desktop, "review-diff-1280")

    phone = login(browser, team.new_login_url(), width=390, height=844)
    phone_card = _review_of(phone, task_id)
    phone_card.locator("details.file-diff table.diff-lines").first.wait_for()
    _no_sideways_scroll(phone)
    box = phone_card.get_by_role("button", name="Accept").bounding_box()
    assert box is not None and box["width"] >= 300
    _keep(phone, "review-diff-390")
    for page, name in ((desktop, "task-diff-1280"), (phone, "task-diff-390")):
        goto(page, team.origin + f"/tasks/{task_id}")
        tree = page.locator("section.changes.tree")
        tree.locator("details.file-diff").first.wait_for()
        assert tree.locator("details.file-diff").count() == 2
        assert "merges cleanly into main" in tree.locator(".preflight.ok").inner_text()
        if "390" in name:
            _no_sideways_scroll(page)
        _keep(page, name)

    # Accept = merge: the card says where the merge stands, and main has the work.
    goto(desktop, team.origin + "/")
    review = _review_of(desktop, task_id)
    review.get_by_role("button", name="Accept").click()
    done = desktop.locator(f'article[data-request-id="{review.get_attribute("data-request-id")}"]')
    done.locator(".merge-state", has_text="Merged into main").wait_for(timeout=120_000)
    assert "Good to see you" in (team.root / "app.py").read_text()
    assert (team.root / "notes" / "greeting.md").exists()
    _keep(desktop, "review-merged-1280")
    goto(desktop, team.origin + f"/tasks/{task_id}")
    merged = desktop.locator("section.changes.tree")
    merged.locator(".merge-state", has_text="Merged into main").wait_for()
    assert merged.locator(".preflights").count() == 0  # merged: no preflight to show
    assert merged.locator("details.file-diff").count() == 2  # what it brought, still shown


def test_two_trees_on_one_file_overlap_then_conflict_and_go_back_to_rebase(
    team: Team, browser: Any
) -> None:
    _on_main(team.root)
    url = team.start()
    desktop = login(browser, url)
    first = team.task("DEV", "Shared one", _writes("one"))
    second = team.task("DEV", "Shared two", _writes("two") + HOSTILE_STEP)
    later = _review_of(desktop, second)
    earlier = _review_of(desktop, first)
    overlap = later.locator(".preflight.warn").inner_text()
    assert "overlaps live branch baton/" in overlap and "shared.txt" in overlap
    assert "merges cleanly into main" in later.locator(".preflight.ok").inner_text()
    assert later.get_by_role("button", name="Send back to rebase").count() == 0
    # The hostile file's diff is shown as text, never obeyed.
    hostile = later.locator("details.file-diff", has_text="hostile.html").inner_text()
    assert '<script>window.pwned=1</script></pre><img src=x onerror="window.pwned=2">' in hostile
    assert "␛[2J" in hostile and "<U+202E>txt.exe" in hostile
    assert desktop.evaluate("() => window.pwned") is None

    earlier.get_by_role("button", name="Accept").click()
    earlier.locator(".merge-state", has_text="Merged into main").wait_for(timeout=120_000)
    assert (team.root / "shared.txt").read_text() == "one\n"
    # The open page draws the second's card again: it conflicts with main now.
    conflict = later.locator(".preflight.bad")
    conflict.wait_for(timeout=60_000)
    assert "conflicts with main in shared.txt" in conflict.inner_text()
    assert later.locator(".preflight.warn").count() == 0  # the first is no longer live
    rebase = later.get_by_role("button", name="Send back to rebase")
    rebase.wait_for()
    _keep(desktop, "review-conflict-1280")
    phone = login(browser, team.new_login_url(), width=390, height=844)
    _review_of(phone, second).locator(".preflight.bad").wait_for()
    _no_sideways_scroll(phone)
    _keep(phone, "review-conflict-390")

    later.locator("textarea[data-reason]").fill("Keep the word two.")
    rebase.click()
    later.locator(".status", has_text="sent back").wait_for()
    # The role owning the branch reads the rebase prompt (the rejection REVIEW quotes it)
    # and reports again: a new review of the same tree, still in conflict.
    again = _review_of(desktop, second)
    assert again.get_attribute("data-request-id") != later.get_attribute("data-request-id")
    again.locator(".preflight.bad").wait_for()
    goto(desktop, team.origin + f"/tasks/{second}")
    sent = desktop.locator("article.doc.kind-review", has_text="Your branch conflicts with main")
    sent.first.wait_for()
    text = sent.first.inner_text()
    assert "shared.txt" in text and "git merge main" in text and "Keep the word two." in text
