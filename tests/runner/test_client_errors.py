"""Every client method baton serves, answered with ACP's code for the case.

An in-memory agent (:mod:`tests.support.client_probe`) calls ``fs/*``, ``terminal/*``,
``session/request_permission``, ``elicitation/create`` and methods nobody serves with good and
bad params, through baton's real runner; each answer must carry the code of the schema's error
table (:data:`~tests.support.client_probe.CASES`), start with ACP's standard message for it, and
only security refusals may make ``security.*`` events. The same table runs against the pinned
official schema in ``tests/integration/test_acp_schema.py``.
"""

from __future__ import annotations

import errno
from pathlib import Path

import pytest

from baton.runner import client_fs
from baton.runner.client_methods import SERVED_METHODS
from baton.testing import in_memory
from tests.support.client_probe import CASES, CODES, Case, ProbeAgent, prepare_workspace, s
from tests.support.harness import Harness


async def _probe(harness: Harness, case: Case) -> tuple[ProbeAgent, dict[str, object]]:
    prepare_workspace(harness.workspace)
    agent = ProbeAgent(case.steps)
    session = await harness.open(["probe-agent"], transport=in_memory(agent), preset="all")
    await session.prompt("probe", timeout=60)
    assert len(agent.answers) == len(case.steps)
    return agent, agent.answers[-1]


@pytest.mark.parametrize("name", list(CASES))
async def test_each_answer_carries_acps_code_for_the_case(harness: Harness, name: str) -> None:
    case = CASES[name]
    agent, answer = await _probe(harness, case)
    for earlier in agent.answers[:-1]:
        assert "result" in earlier, earlier
    if case.code is None:
        assert "result" in answer, answer
    else:
        error = answer.get("error")
        assert isinstance(error, dict), answer
        assert error["code"] == case.code, f"{name}: {error}"
        assert str(error["message"]).startswith(CODES[case.code] + ": "), error
    security = [e.type for e in harness.events if e.type.startswith("security.")]
    assert security.count("security.path_refused") == int(case.refusal), security
    if case.refusal:
        assert "refused" in str(answer["error"]["message"])  # type: ignore[index]
    # Besides refusals, only the audit speaks: of a mutation that ran with no permission.
    audits = [t for t in security if t != "security.path_refused"]
    assert set(audits) <= {"security.unapproved_mutation"}, security
    if case.code is not None and len(case.steps) == 1:
        assert not audits, f"{name} is no security matter: {security}"


def test_every_method_baton_serves_has_cases() -> None:
    methods = {step[0] for case in CASES.values() for step in case.steps}
    assert methods >= SERVED_METHODS, SERVED_METHODS - methods
    answered = {case.code for case in CASES.values()}
    # Internal error needs a failing filesystem: test_the_filesystem_failing_...
    assert answered | {-32603} == {None, *CODES}, "every code of the table is exercised"


async def test_a_missing_file_read_is_no_event_at_all(harness: Harness) -> None:
    _, answer = await _probe(harness, CASES["read missing file"])
    assert answer["error"] == {  # type: ignore[comparison-overlap]
        "code": -32002,
        "message": "Resource not found: new.txt does not exist in the workspace",
    }
    assert not harness.of("security.path_refused")
    assert not [n for n in harness.of("provider.notice") if n.method == "fs/read_text_file"]


async def test_the_filesystem_failing_is_an_internal_error(
    harness: Harness, monkeypatch: pytest.MonkeyPatch
) -> None:
    def full(*_args: object, **_kwargs: object) -> None:
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(client_fs, "atomic_write", full)
    case = Case((("fs/write_text_file", s(path="new.txt", content="x")),), -32603)
    _, answer = await _probe(harness, case)
    assert answer["error"] == {  # type: ignore[comparison-overlap]
        "code": -32603,
        "message": "Internal error: fs/write_text_file failed: No space left on device",
    }
    assert not harness.of("file.written")


async def test_reads_and_writes_that_succeed_answer_the_schemas_shapes(harness: Harness) -> None:
    case = Case(
        (
            ("fs/read_text_file", s(path="present.txt", line=2, limit=1)),
            ("fs/write_text_file", s(path="out/new.txt", content="x\n")),
        ),
        None,
    )
    agent, written = await _probe(harness, case)
    assert agent.answers[0]["result"] == {"content": "two\n"}
    assert written["result"] == {}
    assert (harness.workspace / "out" / "new.txt").read_text() == "x\n"
    assert [e.path for e in harness.of("file.written")] == ["out/new.txt"]


async def test_an_agent_that_needs_empty_content_for_a_missing_file_gets_it_once_noted(
    harness: Harness, tmp_path: Path
) -> None:
    prepare_workspace(harness.workspace)
    steps = (("fs/read_text_file", s(path="new.txt")),) * 2 + (
        ("fs/read_text_file", s(path="/etc/passwd")),
    )
    agent = ProbeAgent(steps)
    session = await harness.open(
        ["probe-agent"],
        transport=in_memory(agent),
        preset="all",
        missing_file_reads="empty",
    )
    await session.prompt("probe", timeout=60)
    first, second, outside = agent.answers
    assert first["result"] == second["result"] == {"content": ""}
    assert outside["error"]["code"] == -32602, "a refusal stays a refusal"
    [note] = [n for n in harness.of("provider.notice") if n.category == "compatibility"]
    assert note.severity == "info" and "new.txt" in note.summary
    assert len(harness.of("security.path_refused")) == 1
