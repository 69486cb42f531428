"""Execute and edit steps: the update sequence, failures, permissions, file writes."""

from pathlib import Path

from tests.agents.builtin_client import AgentError, AgentProcess, Message, StartAgent, choose

TWO_STEPS = """Two steps.

```sh
echo one
```

```bash
echo two >&2
```
"""


def step_shape(kind: str) -> list[str]:
    return [
        f"tool_call:{kind}:pending",
        "request:session/request_permission",
        "tool_call_update:in_progress",
        "tool_call_update:completed",
    ]


async def test_two_shell_steps_follow_the_documented_update_sequence(
    agent: AgentProcess, workdir: Path
) -> None:
    session_id = await agent.new_session(workdir)
    turn = await agent.prompt(session_id, TWO_STEPS)

    assert turn.shape() == [
        "plan:pending,pending",
        "plan:in_progress,pending",
        *step_shape("execute"),
        "plan:completed,pending",
        "plan:completed,in_progress",
        *step_shape("execute"),
        "plan:completed,completed",
        "agent_message_chunk",
        "response:end_turn",
    ]
    plan = turn.updates[0]
    assert plan["entries"] == [
        {"content": "sh: echo one", "priority": "medium", "status": "pending"},
        {"content": "bash: echo two >&2", "priority": "medium", "status": "pending"},
    ]
    first, second = turn.tool_updates("tool_call")
    assert first["toolCallId"].startswith("step-1-") and second["toolCallId"].startswith("step-2-")
    assert first["title"] == "sh: echo one"
    assert first["rawInput"] == {"command": "echo one\n"}

    permission = turn.requests[0]["params"]
    assert permission["sessionId"] == session_id
    assert permission["toolCall"] == {
        "toolCallId": first["toolCallId"],
        "title": "sh: echo one",
        "kind": "execute",
        "rawInput": {"command": "echo one\n"},
    }
    assert [o["kind"] for o in permission["options"]] == [
        "allow_once",
        "allow_always",
        "reject_once",
    ]

    finals = turn.finals()
    assert [f["content"] for f in finals] == [
        [{"type": "content", "content": {"type": "text", "text": "one\n"}}],
        [{"type": "content", "content": {"type": "text", "text": "two\n"}}],
    ]
    raw = finals[0]["rawOutput"]
    assert raw["exitCode"] == 0 and raw["outputBytes"] == 4 and isinstance(raw["durationMs"], int)
    assert "signal" not in raw
    for update in turn.tool_updates():
        if update.get("status") is None:
            text = update["content"][0]["content"]["text"]
            final = next(f for f in finals if f["toolCallId"] == update["toolCallId"])
            assert final["content"][0]["content"]["text"].startswith(text)

    assert turn.summary() == "2 of 2 steps succeeded."
    assert turn.tool_updates("agent_message_chunk")[0]["messageId"] == "msg-1-1"


async def test_a_failing_step_is_reported_and_stops_the_runbook(
    agent: AgentProcess, workdir: Path
) -> None:
    session_id = await agent.new_session(workdir)
    prompt = "```sh\ntrue\n```\n```sh\necho broken; exit 3\n```\n```sh\ntouch never\n```\n"
    turn = await agent.prompt(session_id, prompt)

    assert turn.stop_reason == "end_turn"
    failed = turn.finals()[-1]
    assert failed["status"] == "failed"
    assert failed["rawOutput"]["exitCode"] == 3
    assert len(turn.tool_updates("tool_call")) == 2
    assert turn.updates[-2]["entries"][2]["status"] == "pending"
    assert turn.summary() == (
        "1 of 3 steps succeeded; step 2 (sh: echo broken; exit 3) failed with exit code 3; step 3 was not run."
    )
    assert not (workdir / "never").exists()


async def test_continue_on_error_runs_the_remaining_steps(
    agent: AgentProcess, workdir: Path
) -> None:
    session_id = await agent.new_session(workdir)
    prompt = "continue-on-error: true\n```sh\nexit 1\n```\n```sh\ntouch ran\n```\n"
    turn = await agent.prompt(session_id, prompt)
    assert turn.summary() == "1 of 2 steps succeeded; step 1 (sh: exit 1) failed with exit code 1."
    assert (workdir / "ran").exists()


async def test_a_rejected_permission_fails_the_step_and_ends_the_turn(
    agent: AgentProcess, workdir: Path
) -> None:
    session_id = await agent.new_session(workdir)
    prompt = "continue-on-error: true\n```sh\ntouch denied\n```\n```sh\ntouch later\n```\n"
    turn = await agent.prompt(session_id, prompt, answer=choose("reject-once"))

    assert turn.shape() == [
        "plan:pending,pending",
        "plan:in_progress,pending",
        "tool_call:execute:pending",
        "request:session/request_permission",
        "tool_call_update:failed",
        "plan:completed,pending",
        "agent_message_chunk",
        "response:end_turn",
    ]
    assert (
        turn.summary()
        == "0 of 2 steps succeeded; step 1 (sh: touch denied) failed: permission denied; step 2 was not run."
    )
    assert not (workdir / "denied").exists() and not (workdir / "later").exists()


async def test_allow_always_is_remembered_for_the_session(
    agent: AgentProcess, workdir: Path
) -> None:
    session_id = await agent.new_session(workdir)
    first = await agent.prompt(
        session_id, "```sh\ntrue\n```\n```sh\ntrue\n```\n", answer=choose("allow-always")
    )
    assert len(first.requests) == 1
    second = await agent.prompt(
        session_id, "```sh\ntrue\n```\n```file a.txt\nA\n```\n", answer=choose("allow-always")
    )
    assert [r["params"]["toolCall"]["kind"] for r in second.requests] == ["edit"]


async def test_a_step_past_its_timeout_is_killed(start_agent: StartAgent, workdir: Path) -> None:
    agent = await start_agent(BATON_BUILTIN_STEP_TIMEOUT="0.3")
    await agent.initialize()
    session_id = await agent.new_session(workdir)
    turn = await agent.prompt(session_id, "```sh\nsleep 30\n```\n")
    final = turn.finals()[0]
    assert final["status"] == "failed"
    assert final["rawOutput"]["timedOut"] is True
    assert final["rawOutput"]["signal"] == "SIGTERM"
    assert (
        turn.summary()
        == "0 of 1 step succeeded; step 1 (sh: sleep 30) failed: timed out after 0.3 s."
    )


async def test_large_output_is_capped_to_its_tail(agent: AgentProcess, workdir: Path) -> None:
    session_id = await agent.new_session(workdir)
    turn = await agent.prompt(session_id, "```sh\nyes x | head -c 300000; echo END\n```\n")
    final = turn.finals()[0]
    text = final["content"][0]["content"]["text"]
    assert final["rawOutput"]["outputBytes"] == 300004
    assert text.startswith("[output truncated: showing the last 262144 of 300004 bytes]\n")
    assert text.endswith("x\nx\nEND\n")


async def test_file_step_writes_directly_when_the_client_has_no_fs(
    agent: AgentProcess, workdir: Path
) -> None:
    session_id = await agent.new_session(workdir)
    (workdir / "old.txt").write_text("before\n")
    turn = await agent.prompt(
        session_id, "```file sub/new.txt\nhello\n```\n```file old.txt\nafter\n```\n"
    )

    assert turn.summary() == "2 of 2 steps succeeded."
    assert (workdir / "sub" / "new.txt").read_text() == "hello\n"
    assert (workdir / "old.txt").read_text() == "after\n"
    new_call = turn.tool_updates("tool_call")[0]
    target = str(workdir / "sub" / "new.txt")
    assert new_call["kind"] == "edit"
    assert new_call["rawInput"] == {"path": target, "content": "hello\n"}
    assert new_call["locations"] == [{"path": target}]
    diffs = [r["params"]["toolCall"]["content"] for r in turn.requests]
    assert diffs == [
        [{"type": "diff", "path": target, "oldText": None, "newText": "hello\n"}],
        [
            {
                "type": "diff",
                "path": str(workdir / "old.txt"),
                "oldText": "before\n",
                "newText": "after\n",
            }
        ],
    ]
    assert turn.finals()[0]["rawOutput"]["via"] == "direct"


async def test_file_step_writes_through_the_client_when_advertised(
    start_agent: StartAgent, workdir: Path
) -> None:
    agent = await start_agent()
    await agent.initialize(write_files=True)
    session_id = await agent.new_session(workdir)
    writes: list[Message] = []

    def answer(message: Message) -> object:
        if message["method"] == "fs/write_text_file":
            writes.append(message["params"])
            return None
        return choose("allow-once")(message)

    turn = await agent.prompt(session_id, "```file notes/todo.md\n- item\n```\n", answer=answer)
    assert turn.summary() == "1 of 1 step succeeded."
    assert writes == [
        {"sessionId": session_id, "path": str(workdir / "notes" / "todo.md"), "content": "- item\n"}
    ]
    assert not (workdir / "notes").exists()
    assert turn.finals()[0]["rawOutput"]["via"] == "client"


async def test_a_client_write_error_fails_the_step(start_agent: StartAgent, workdir: Path) -> None:
    agent = await start_agent()
    await agent.initialize(write_files=True)
    session_id = await agent.new_session(workdir)

    def answer(message: Message) -> object:
        if message["method"] == "fs/write_text_file":
            raise AgentError({"code": -32000, "message": "read-only workspace"})
        return choose("allow-once")(message)

    turn = await agent.prompt(session_id, "```file a.txt\nx\n```\n", answer=answer)
    assert turn.finals()[0]["status"] == "failed"
    assert "read-only workspace" in turn.summary()


async def test_file_steps_outside_the_session_directory_are_refused(
    agent: AgentProcess, workdir: Path
) -> None:
    session_id = await agent.new_session(workdir)
    (workdir / "link").symlink_to(workdir.parent)
    prompt = "continue-on-error: true\n```file ../escape.txt\nx\n```\n```file /tmp/abs.txt\nx\n```\n```file link/out.txt\nx\n```\n"
    turn = await agent.prompt(session_id, prompt)

    assert turn.requests == []
    assert [f["status"] for f in turn.finals()] == ["failed", "failed", "failed"]
    summary = turn.summary()
    assert summary.startswith(
        "0 of 3 steps succeeded; step 1 (file: ../escape.txt) failed: refused: "
    )
    assert "is absolute" in summary
    assert (
        not (workdir.parent / "escape.txt").exists() and not (workdir.parent / "out.txt").exists()
    )
