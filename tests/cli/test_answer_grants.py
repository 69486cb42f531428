"""``baton answer`` (one vocabulary, grants, what happens next), ``baton grants`` and
``[notify]`` in ``baton run``, end to end with the built-in runbook agent."""

from __future__ import annotations

import json
import sys
from pathlib import Path

from baton.events.model import CanonicalEvent
from tests.cli.test_cli import baton, start_baton, tmp

__all__ = ["tmp"]

RUNBOOK = """Touch three files.

```sh
touch one.txt
```

```sh
touch two.txt
```

```sh
touch three.txt; echo sneaky
```
"""

APPEND = (
    "import json, sys\n"
    "data = json.load(sys.stdin)\n"
    "open(sys.argv[1], 'a').write(json.dumps([data['id'], data['kind']]) + '\\n')\n"
)


def _project(tmp: Path, log: Path) -> None:
    argv = json.dumps([sys.executable, "-c", APPEND, str(log)])
    (tmp / "ws" / "baton.toml").write_text(f"[notify]\ncommand = {argv}\n", encoding="utf-8")


def test_a_run_grant_answers_the_same_command_and_notify_fires_once_per_request(
    tmp: Path,
) -> None:
    log = tmp / "notices.ndjson"
    _project(tmp, log)
    runner = start_baton(tmp, "run", "--json", "--wait-timeout", "60", "-", stdin=RUNBOOK)
    assert runner.stdout is not None
    seen: list[CanonicalEvent] = []
    outputs: list[str] = []
    try:
        for line in runner.stdout:
            event = CanonicalEvent.model_validate_json(line)
            seen.append(event)
            if event.type == "request.created" and not (event.payload.rule or "").startswith(
                "grant:"
            ):
                request_id = event.payload.request_id
                first = not outputs
                args = ["--allow", "--scope", "run", "--uses", "5"] if first else ["--deny"]
                answered = baton(tmp, "answer", request_id, *args)
                if answered.returncode == 0:
                    outputs.append(answered.stdout)
            if event.type == "session.closed":
                break
        runner.wait(timeout=60)
    finally:
        runner.kill()
    answered_events = [e.payload for e in seen if e.type == "request.answered"]
    rules = [a.rule for a in answered_events]
    assert rules[0] == "cli" and rules[1].startswith("grant:"), rules
    assert answered_events[1].decided_by == "policy"
    assert rules[2] == "cli" and answered_events[2].answer["decision"] == "deny"
    assert (tmp / "ws" / "one.txt").exists() and (tmp / "ws" / "two.txt").exists()
    assert not (tmp / "ws" / "three.txt").exists(), "a line with ; is never granted"
    assert "granted grant-" in outputs[0] and "execute 'touch' for run" in outputs[0]
    assert "the waiting agent has your answer" in outputs[0]
    # The hook ran for the two requests that waited for a human, once each; not for the
    # one the grant answered.
    notices = [json.loads(line) for line in log.read_text().splitlines()]
    asked = [e.payload.request_id for e in seen if e.type == "request.created"]
    assert sorted(n[0] for n in notices) == sorted([asked[0], asked[2]])
    listed = [json.loads(line) for line in baton(tmp, "grants", "--json").stdout.splitlines()]
    assert len(listed) == 1 and listed[0]["uses"] == 1 and listed[0]["uses_left"] == 4
    revoked = baton(tmp, "grants", "revoke", listed[0]["grant_id"][:10])
    assert revoked.returncode == 0 and "revoked" in revoked.stdout
    after = json.loads(baton(tmp, "grants", "--json").stdout.splitlines()[0])
    assert after["state"] == "revoked"


def test_the_answer_vocabulary(tmp: Path) -> None:
    _project(tmp, tmp / "n.ndjson")
    runner = start_baton(tmp, "run", "--json", "--wait-timeout", "60", "-", stdin=RUNBOOK)
    assert runner.stdout is not None
    said: list[tuple[str, int, str, str]] = []
    try:
        for line in runner.stdout:
            event = CanonicalEvent.model_validate_json(line)
            if event.type == "request.created":
                rid = event.payload.request_id
                for args in (["--select", "option-1"], ["--text", "a=b"], ["--deny", "--allow"]):
                    r = baton(tmp, "answer", rid, *args)
                    said.append((args[0], r.returncode, r.stderr, r.stdout))
                ok = baton(tmp, "answer", rid, "--approve" if len(said) < 4 else "--reject")
                said.append(("answer", ok.returncode, ok.stderr, ok.stdout))
            if event.type == "session.closed":
                break
        runner.wait(timeout=60)
    finally:
        runner.kill()
    refusals = [s for s in said if s[0] != "answer"]
    assert all(code == 1 for _, code, _, _ in refusals)
    assert "takes --allow or --deny" in refusals[0][2]
    assert "choose one decision" in refusals[2][2]
    answers = [s for s in said if s[0] == "answer"]
    assert answers[0][1] == 0 and "answered" in answers[0][3], "--approve allows a permission"
    assert all(code == 0 for _, code, _, _ in answers), answers


def test_scope_without_allow_and_grant_flags_without_scope_are_refused(tmp: Path) -> None:
    _project(tmp, tmp / "n.ndjson")
    runner = start_baton(tmp, "run", "--json", "--wait-timeout", "60", "-", stdin=RUNBOOK)
    assert runner.stdout is not None
    errors: list[str] = []
    try:
        for line in runner.stdout:
            event = CanonicalEvent.model_validate_json(line)
            if event.type == "request.created":
                rid = event.payload.request_id
                for args in (
                    ["--deny", "--scope", "run"],
                    ["--allow", "--for", "1h"],
                    ["--allow", "--scope", "galaxy"],
                    ["--allow", "--scope", "task"],
                    ["--allow", "--scope", "run", "--for", "soon"],
                ):
                    r = baton(tmp, "answer", rid, *args)
                    assert r.returncode != 0
                    errors.append(r.stderr.strip())
                baton(tmp, "answer", rid, "--deny")
            if event.type == "session.closed":
                break
        runner.wait(timeout=60)
    finally:
        runner.kill()
    first = errors[:5]
    assert "go with --allow, not --deny" in first[0]
    assert "need --scope" in first[1]
    assert "choose one of turn, task, role, run, project" in first[2]
    assert "outside a team task" in first[3]
    assert "write a duration such as 30m" in first[4]
    assert all(e.startswith("baton: ") and "\n" not in e for e in errors)
