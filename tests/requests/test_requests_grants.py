"""Scoped grants: normalized subjects, matching, and their life in the ledger and the broker."""

from __future__ import annotations

from dataclasses import replace
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from baton.request_model.documents import (
    GrantContext,
    GrantSpec,
    PermissionAnswer,
    PermissionRequest,
)
from baton.request_model.errors import InvalidAnswer
from baton.requests.grant_book import GrantBook
from baton.requests.grants import (
    Grant,
    Subject,
    command_argv,
    grant_subject,
    matches,
    path_glob_matches,
    request_subject,
)
from baton.requests.ledger import Ledger
from baton.requests.policy import Policy
from baton.requests.validate import validate_answer
from baton.runner.requests_broker import RequestBroker, RequestContext
from tests.requests.reqbuild import META, permission

# ------------------------------------------------------------------ commands


@pytest.mark.parametrize(
    ("line", "argv"),
    [
        ("pytest", ("pytest",)),
        ("pytest -x tests/unit", ("pytest", "-x", "tests/unit")),
        ("npm test -- --ci", ("npm", "test", "--", "--ci")),
        ("git 'status'", ("git", "status")),
        ("  ls  ", ("ls",)),
        ("touch one.txt\n", ("touch", "one.txt")),
    ],
)
def test_a_plain_command_has_an_argv(line: str, argv: tuple[str, ...]) -> None:
    assert command_argv(line) == argv


@pytest.mark.parametrize(
    "line",
    [
        "pytest; rm -rf /",
        "pytest && rm -rf /",
        "pytest || true",
        "pytest | tee out",
        "pytest > out.txt",
        "pytest < in",
        "pytest 2>&1",
        "pytest $(rm -rf /)",
        "pytest `rm -rf /`",
        "pytest $HOME",
        "(pytest)",
        "pytest &",
        "pytest\nrm -rf /",
        "pytest 'unterminated",
        "",
        "sh -c 'pytest; rm -rf /'",
        "bash -lc 'pytest && curl x'",
    ],
)
def test_a_command_line_with_any_shell_construct_has_no_argv(line: str) -> None:
    assert command_argv(line) is None


def test_an_argv_list_is_taken_as_is_but_a_shell_c_line_is_parsed() -> None:
    assert command_argv(["pytest", "-k", "a;b"]) == ("pytest", "-k", "a;b")
    assert command_argv(["bash", "-lc", "pytest -q"]) == ("pytest", "-q")
    assert command_argv(["/bin/sh", "-c", "pytest; rm -rf /"]) is None


@given(st.text(max_size=40), st.sampled_from([";", "&&", "|", ">", "<", "$(", "`", "\n"]))
@settings(deadline=None, max_examples=200)
def test_no_line_with_an_operator_matches_any_prefix_grant(text: str, op: str) -> None:
    line = f"pytest {text}{op}rm -rf /"
    grant = _grant(tool_kind="execute", subject="pytest")
    subject = Subject("execute", argv=command_argv(line))
    assert not matches(grant, subject, now=NOW, run_id="r", turn_id="t", task=None, role=None)


def test_the_default_subject_is_the_program_and_its_sub_command() -> None:
    def default(line: str) -> str:
        return grant_subject(Subject("execute", argv=command_argv(line)))

    assert default("pytest -x tests") == "pytest"
    assert default("npm test -- --ci") == "npm test"
    assert default("git status --short") == "git status"
    assert default("./run.sh a.txt") == "./run.sh"
    with pytest.raises(InvalidAnswer, match="not one plain command"):
        default("pytest; rm -rf /")
    with pytest.raises(InvalidAnswer, match="does not cover"):
        grant_subject(Subject("execute", argv=("pytest", "-x")), "npm test")
    assert grant_subject(Subject("execute", argv=("npm", "test", "--ci")), "npm") == "npm"


# ------------------------------------------------------------------- paths, hosts


@pytest.mark.parametrize(
    ("glob", "path", "hit"),
    [
        ("src/a.py", "src/a.py", True),
        ("src/*.py", "src/a.py", True),
        ("src/*.py", "src/pkg/a.py", False),
        ("src/**", "src/pkg/a.py", True),
        ("src/**/*.py", "src/a.py", True),
        ("src/**/*.py", "src/x/y/a.py", True),
        ("src/**", "srcx/a.py", False),
        ("docs/?.md", "docs/a.md", True),
    ],
)
def test_path_globs(glob: str, path: str, hit: bool) -> None:
    assert path_glob_matches(glob, path) is hit


def test_an_edit_subject_is_inside_the_workspace_or_nothing() -> None:
    doc = permission("edit", paths=("src/a.py",), command=None)
    assert request_subject(doc, "/ws", ["/ws/src/a.py"]).paths == ("src/a.py",)
    assert request_subject(doc, "/ws", ["/ws/src/a.py", "/etc/passwd"]).paths is None
    assert request_subject(doc, "/ws", ["/ws/../ws2/x"]).paths is None
    with pytest.raises(InvalidAnswer, match="inside the workspace"):
        grant_subject(Subject("edit"))
    with pytest.raises(InvalidAnswer, match="stay inside"):
        grant_subject(Subject("edit", paths=("src/a.py",)), "../**")
    assert grant_subject(Subject("edit", paths=("src/a.py", "src/b/c.py"))) == "src/**"


def test_a_fetch_subject_is_its_host() -> None:
    doc = permission("fetch", command=None, raw_input={"url": "https://Docs.Python.org/3/"})
    subject = request_subject(doc, "/ws", [])
    assert subject.host == "docs.python.org"
    assert grant_subject(subject) == "docs.python.org"
    assert grant_subject(subject, "*.python.org") == "*.python.org"
    with pytest.raises(InvalidAnswer, match="does not cover"):
        grant_subject(subject, "evil.com")


def test_other_tool_kinds_cannot_be_granted() -> None:
    with pytest.raises(InvalidAnswer, match="cannot be granted"):
        grant_subject(Subject("other"))


# ------------------------------------------------------------------- matching

NOW = "2026-01-01T12:00:00.000Z"


def _grant(**changes: Any) -> Grant:
    base = Grant(
        grant_id="grant-1",
        tool_kind="execute",
        subject="pytest",
        scope="project",
        scope_key="",
        created_at="2026-01-01T00:00:00.000Z",
        expires_at=None,
        uses_left=None,
        uses=0,
        request_id="req-1",
    )
    return replace(base, **changes)


@pytest.mark.parametrize(
    ("scope", "key", "hit"),
    [
        ("project", "", True),
        ("run", "r1", True),
        ("run", "r2", False),
        ("turn", "t1", True),
        ("turn", "t2", False),
        ("task", "TASK-1", True),
        ("task", "TASK-2", False),
        ("role", "QA", True),
        ("role", "DEV", False),
    ],
)
def test_a_grant_matches_only_in_its_scope(scope: str, key: str, hit: bool) -> None:
    grant = _grant(scope=scope, scope_key=key)
    subject = Subject("execute", argv=("pytest", "-q"))
    got = matches(grant, subject, now=NOW, run_id="r1", turn_id="t1", task="TASK-1", role="QA")
    assert got is hit


def test_expired_revoked_or_spent_grants_never_match() -> None:
    subject = Subject("execute", argv=("pytest",))
    ctx: dict[str, Any] = {"now": NOW, "run_id": "r", "turn_id": "t", "task": None, "role": None}
    assert matches(_grant(), subject, **ctx)
    assert not matches(_grant(expires_at=NOW), subject, **ctx)
    assert not matches(_grant(revoked_at=NOW), subject, **ctx)
    assert not matches(_grant(uses_left=0), subject, **ctx)
    assert not matches(_grant(tool_kind="edit"), subject, **ctx)
    assert not matches(_grant(subject="npm test"), Subject("execute", argv=("npm",)), **ctx)
    assert _grant(uses_left=0).state(NOW) == "spent"


def test_a_grant_needs_the_team_context_for_task_and_role_scopes() -> None:
    doc = permission(command="pytest -q")
    with pytest.raises(InvalidAnswer, match="outside a team task"):
        validate_answer(doc, PermissionAnswer(decision="allow", grant=GrantSpec(scope="task")))
    scoped = doc.model_copy(update={"context": GrantContext(task="TASK-1", role="QA")})
    answer = validate_answer(
        scoped, PermissionAnswer(decision="allow", grant=GrantSpec(scope="task"))
    )
    assert isinstance(answer, PermissionAnswer) and answer.grant is not None
    assert answer.grant.subject == "pytest" and answer.option_id == "allow-once"


def test_a_grant_goes_with_allow_only() -> None:
    with pytest.raises(ValueError, match="goes with allow"):
        PermissionAnswer(decision="deny", grant=GrantSpec(scope="run"))


# ------------------------------------------------------------ the ledger and the broker


class _Clock:
    def __init__(self) -> None:
        self.now = datetime(2026, 1, 1, 12, tzinfo=UTC)

    def __call__(self) -> datetime:
        return self.now


class _Emit:
    """The turn's events, collected (commits run their write through the store)."""

    def __init__(self, ledger: Ledger) -> None:
        self.ledger = ledger
        self.payloads: list[Any] = []

    async def __call__(self, payload: Any) -> None:
        self.payloads.append(payload)

    async def commit(self, payloads: Any, fn: Any) -> Any:
        result = await self.ledger.store.write(fn)
        self.payloads.extend(payloads)
        return result


def _ctx(workspace: Path, rpc: int, turn: str = "turn-1") -> RequestContext:
    return RequestContext(
        run_id=META["run_id"],
        connection_id=META["connection_id"],
        jsonrpc_id=rpc,
        session_id=META["session_id"],
        turn_id=turn,
        workspace=str(workspace),
    )


async def _ask(
    broker: RequestBroker, command: str, rpc: int, workspace: Path, turn: str = "turn-1"
) -> Any:
    emit = _Emit(broker.ledger)
    admission = await broker.admit(permission(command=command), _ctx(workspace, rpc, turn), emit)
    return admission, emit


async def test_an_answer_with_a_grant_answers_later_requests_and_counts_uses(
    ledger: Ledger, tmp_path: Path
) -> None:
    clock = _Clock()
    grants = GrantBook(ledger.store, clock=clock)
    broker = RequestBroker(ledger, Policy.preset("reads"), wait_timeout=60, grants=grants)
    first, _ = await _ask(broker, "pytest -x", 1, tmp_path)
    assert first.waits
    spec = GrantSpec(scope="run", uses=2, for_seconds=3600)
    await ledger.answer(
        first.record.request_id,
        PermissionAnswer(decision="allow", grant=spec),
        decided_by="human",
        rule="cli",
    )
    grant = await grants.of_request(first.record.request_id)
    assert grant is not None and (grant.subject, grant.uses_left) == ("pytest", 2)

    second, emit = await _ask(broker, "pytest -q tests", 2, tmp_path)
    assert not second.waits and second.record.state.value == "answered"
    assert second.record.rule == f"grant:{grant.grant_id}" and second.record.decided_by == "policy"
    assert second.record.answer == PermissionAnswer(decision="allow", option_id="allow-once")
    [answered] = [p for p in emit.payloads if p.TYPE == "request.answered"]
    assert answered.rule == f"grant:{grant.grant_id}"
    assert (await grants.get(grant.grant_id)).uses_left == 1

    compound, _ = await _ask(broker, "pytest; rm -rf /", 3, tmp_path)
    assert compound.waits, "a shell operator is never covered"
    other, _ = await _ask(broker, "npm test", 4, tmp_path)
    assert other.waits

    third, _ = await _ask(broker, "pytest", 5, tmp_path)
    assert third.record.rule == f"grant:{grant.grant_id}"
    spent = await grants.get(grant.grant_id)
    assert (spent.uses, spent.uses_left, spent.state(grants.now())) == (2, 0, "spent")
    fourth, _ = await _ask(broker, "pytest", 6, tmp_path)
    assert fourth.waits, "a spent grant answers nothing"


async def test_expired_and_revoked_grants_never_answer(ledger: Ledger, tmp_path: Path) -> None:
    clock = _Clock()
    grants = GrantBook(ledger.store, clock=clock)
    ledger_clocked = Ledger(ledger.store, clock=clock)
    broker = RequestBroker(ledger_clocked, Policy.preset("reads"), wait_timeout=60, grants=grants)
    first, _ = await _ask(broker, "make build", 1, tmp_path)
    await ledger_clocked.answer(
        first.record.request_id,
        PermissionAnswer(decision="allow", grant=GrantSpec(scope="project", for_seconds=60)),
        decided_by="human",
        rule="cli",
    )
    grant = await grants.of_request(first.record.request_id)
    assert grant is not None and grant.subject == "make build"
    assert (await _ask(broker, "make build", 2, tmp_path))[
        0
    ].record.rule == f"grant:{grant.grant_id}"
    clock.now += timedelta(seconds=61)
    assert (await _ask(broker, "make build", 3, tmp_path))[0].waits, "expired"

    second, _ = await _ask(broker, "make test", 4, tmp_path)
    await ledger_clocked.answer(
        second.record.request_id,
        PermissionAnswer(decision="allow", grant=GrantSpec(scope="turn")),
        decided_by="human",
        rule="cli",
    )
    made = await grants.of_request(second.record.request_id)
    assert made is not None
    assert not (await _ask(broker, "make test", 5, tmp_path))[0].waits
    assert (await _ask(broker, "make test", 6, tmp_path, turn="turn-2"))[0].waits, "other turn"
    revoked, changed = await grants.revoke(made.grant_id[:9])
    assert changed and revoked.revoked_at is not None
    assert not (await grants.revoke(made.grant_id))[1], "revoking twice changes nothing"
    assert (await _ask(broker, "make test", 7, tmp_path))[0].waits, "revoked"


async def test_a_grant_never_answers_outside_the_workspace(ledger: Ledger, tmp_path: Path) -> None:
    ws = tmp_path / "ws"
    (ws / "src").mkdir(parents=True)
    (ws / "link").symlink_to(tmp_path)
    broker = RequestBroker(ledger, Policy.preset("reads"), wait_timeout=60)
    emit = _Emit(ledger)
    doc = permission("edit", paths=("src/a.py",), command=None)
    first = await broker.admit(doc, _ctx(ws, 1), emit)
    await ledger.answer(
        first.record.request_id,
        PermissionAnswer(decision="allow", grant=GrantSpec(scope="project", subject="**")),
        decided_by="human",
        rule="cli",
    )
    inside = await broker.admit(
        permission("edit", paths=("src/b.py",), command=None), _ctx(ws, 2), emit
    )
    assert inside.record.rule and inside.record.rule.startswith("grant:")
    through_link = permission("edit", paths=("link/evil.py",), command=None)
    assert (await broker.admit(through_link, _ctx(ws, 3), emit)).waits
    outside = permission("edit", paths=("/etc/passwd",), command=None)
    assert (await broker.admit(outside, _ctx(ws, 4), emit)).waits


@pytest.mark.parametrize(
    ("title", "kind", "raw", "klass"),
    [
        ("ExitPlanMode", "switch_mode", {"plan": "# do it"}, "plan_exit"),
        ("Ready to code?", "switch_mode", {"plan": "# do it"}, "plan_exit"),
        ("Switch to code mode", "switch_mode", {}, "mode_change"),
        ("AskUserQuestion", "other", {"questions": [{"question": "?"}]}, "question"),
        ("Fill the form", "other", {"requestedSchema": {"type": "object"}}, "elicitation"),
    ],
)
async def test_no_grant_or_preset_answers_what_is_not_a_tool_call(
    ledger: Ledger, tmp_path: Path, title: str, kind: str, raw: Any, klass: str
) -> None:
    # A grant that would cover anything of its kind, and a preset that allows everything.
    doc = PermissionRequest.model_validate(
        {
            "tool_call": {"tool_call_id": "c1", "title": title, "kind": kind, "raw_input": raw},
            "options": [
                {"option_id": "default", "name": "Yes", "kind": "allow_once"},
                {"option_id": "plan", "name": "No, keep planning", "kind": "reject_once"},
            ],
        }
    )
    broker = RequestBroker(ledger, Policy.preset("all"), wait_timeout=60, family="claude")
    admission = await broker.admit(doc, _ctx(tmp_path, 1), _Emit(ledger))
    assert admission.waits and admission.decision.request_class == klass
    assert admission.decision.rule == f"preset-all:firewall:{klass}"
    headless = RequestBroker(ledger, Policy.preset("all"), wait_timeout=0, family="claude")
    denied = await headless.admit(doc, _ctx(tmp_path, 2), _Emit(ledger))
    assert denied.record.decided_by == "headless"
    assert denied.record.answer == PermissionAnswer(decision="deny", option_id="plan")


async def test_an_automatic_denial_with_no_reject_option_cancels(
    ledger: Ledger, tmp_path: Path
) -> None:
    doc = PermissionRequest.model_validate(
        {
            "tool_call": {"tool_call_id": "c1", "title": "rm", "kind": "execute"},
            "options": [{"option_id": "ok", "name": "Yes", "kind": "allow_once"}],
        }
    )
    broker = RequestBroker(ledger, Policy.preset("none"), wait_timeout=0)
    admission = await broker.admit(doc, _ctx(tmp_path, 1), _Emit(ledger))
    assert admission.record.state.value == "cancelled"
    assert "no reject_once or reject_always option" in (admission.record.reason or "")
    assert broker.reply(doc, admission.record).reply == {"outcome": {"outcome": "cancelled"}}


# ------------------------------------------------------------ deadline, notify, role scope


async def test_in_the_team_loop_a_deadline_is_a_recorded_refusal(
    ledger: Ledger, tmp_path: Path
) -> None:
    broker = RequestBroker(
        ledger, Policy.preset("reads"), wait_timeout=0.2, on_deadline="refuse", role="QA"
    )
    emit = _Emit(ledger)
    admission = await broker.admit(permission(command="pytest -q"), _ctx(tmp_path, 1), emit)
    assert admission.record.expires_at is not None, "surfaces show until when"
    resolution = await broker.settle(admission, emit)
    record = resolution.record
    assert record is not None and record.state.value == "answered"
    assert (record.decided_by, record.rule) == ("headless", "deadline")
    assert resolution.reply == {"outcome": {"outcome": "selected", "optionId": "reject-once"}}
    [why] = broker.refusals_of("turn-1")
    assert "no answer within 0.2s" in why and "pytest -q" in why
    assert broker.refusals_of("turn-1") == [], "told once"
    answered = [p for p in emit.payloads if p.TYPE == "request.answered"]
    assert answered and answered[-1].rule == "deadline"


async def test_under_baton_run_a_deadline_still_expires(ledger: Ledger, tmp_path: Path) -> None:
    broker = RequestBroker(ledger, Policy.preset("reads"), wait_timeout=0.2)
    emit = _Emit(ledger)
    admission = await broker.admit(permission(command="make"), _ctx(tmp_path, 1), emit)
    resolution = await broker.settle(admission, emit)
    assert resolution.record is not None and resolution.record.state.value == "expired"
    assert broker.refusals == []


async def test_a_role_grant_answers_that_role_only(ledger: Ledger, tmp_path: Path) -> None:
    qa = RequestBroker(ledger, Policy.preset("reads"), wait_timeout=60, role="QA")
    dev = RequestBroker(ledger, Policy.preset("reads"), wait_timeout=60, role="DEV")
    first = await qa.admit(permission(command="pytest -x"), _ctx(tmp_path, 1), _Emit(ledger))
    await ledger.answer(
        first.record.request_id,
        PermissionAnswer(decision="allow", grant=GrantSpec(scope="role")),
        decided_by="human",
        rule="web",
    )
    again = await qa.admit(permission(command="pytest"), _ctx(tmp_path, 2, "t9"), _Emit(ledger))
    assert again.record.rule and again.record.rule.startswith("grant:")
    other = await dev.admit(permission(command="pytest"), _ctx(tmp_path, 3), _Emit(ledger))
    assert other.waits


async def test_the_broker_notifies_an_escalation_once_and_never_an_automatic_answer(
    ledger: Ledger, tmp_path: Path
) -> None:
    import sys

    from baton.requests.notify import Notifier, NotifyConfig

    log = tmp_path / "n.txt"
    script = "import json,sys; open(sys.argv[1],'a').write(json.load(sys.stdin)['id']+'\\n')"
    notifier = Notifier(
        NotifyConfig(command=(sys.executable, "-c", script, str(log))), store=ledger.store
    )
    broker = RequestBroker(ledger, Policy.preset("reads"), wait_timeout=0.1, notifier=notifier)
    emit = _Emit(ledger)
    asked = await broker.admit(permission(command="make"), _ctx(tmp_path, 1), emit)
    await broker.settle(asked, emit)
    read = await broker.admit(permission("read", command=None), _ctx(tmp_path, 2), emit)
    await broker.settle(read, emit)
    notifier.request(asked.record)  # again: nothing
    await notifier.drain()
    second = Notifier(notifier.config, store=ledger.store)  # another process, same store
    second.request(asked.record)
    await second.drain()
    assert log.read_text().split() == [asked.record.request_id]
