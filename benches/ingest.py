"""Canonical-event ingest throughput for a flooding agent.

Three consumers read the same flood (the fault agent's ``flood`` scenario:
alternating ``agent_message_chunk`` / ``tool_call_update`` notifications):

* ``ndjson floor`` — read the agent's stdout and ``json.loads`` each line: nothing
  can be faster than this;
* ``acp sdk raw`` — ``agent-client-protocol`` alone (its ``ClientSideConnection``
  validating every notification), a handler that only counts, no storage;
* ``baton`` — the whole pipeline: ordered dispatch, normalization, redaction,
  stamping, and the durable SQLite log (flushed before the clock stops).

Memory: baton's RSS is sampled during the run; "flat" means the growth after the
first 10% of updates stays small compared to the data volume.
"""

from __future__ import annotations

import asyncio
import json
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from benches.common import median, print_table, rss_mib

AGENT = [sys.executable, "-m", "baton.testing.fake_agent", "--scenario", "flood"]


def _agent(count: int) -> list[str]:
    return [*AGENT, "--count", str(count)]


async def ndjson_floor(count: int) -> tuple[float, int]:
    proc = await asyncio.create_subprocess_exec(
        *_agent(count),
        stdin=asyncio.subprocess.PIPE,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.DEVNULL,
    )
    assert proc.stdin and proc.stdout
    for i, (method, params) in enumerate(
        [
            ("initialize", {"protocolVersion": 1, "clientCapabilities": {}}),
            ("session/new", {"cwd": "/", "mcpServers": []}),
        ]
    ):
        proc.stdin.write(
            json.dumps({"jsonrpc": "2.0", "id": i, "method": method, "params": params}).encode()
            + b"\n"
        )
    await proc.stdin.drain()
    start = 0.0
    seen = 0
    buffer = b""
    prompt_sent = False
    while True:
        chunk = await proc.stdout.read(1 << 18)
        if not chunk:
            break
        buffer += chunk
        *lines, buffer = buffer.split(b"\n")
        done = False
        for line in lines:
            if not line:
                continue
            message = json.loads(line)
            if "method" in message:
                seen += 1
            elif message.get("id") == 1 and not prompt_sent:
                prompt_sent = True
                start = time.perf_counter()
                proc.stdin.write(
                    json.dumps(
                        {
                            "jsonrpc": "2.0",
                            "id": 2,
                            "method": "session/prompt",
                            "params": {
                                "sessionId": message["result"]["sessionId"],
                                "prompt": [{"type": "text", "text": "go"}],
                            },
                        }
                    ).encode()
                    + b"\n"
                )
            elif message.get("id") == 2:
                done = True
        if done:
            break
    elapsed = time.perf_counter() - start
    proc.stdin.close()
    await proc.wait()
    return elapsed, seen


async def acp_sdk_raw(count: int) -> tuple[float, int]:
    import acp

    class Counter:
        seen = 0

        async def session_update(self, session_id: str, update: Any, **kwargs: Any) -> None:
            Counter.seen += 1

        async def request_permission(self, *args: Any, **kwargs: Any) -> Any:
            raise NotImplementedError

    client = Counter()
    async with acp.spawn_agent_process(client, *_agent(count)) as (conn, _proc):  # type: ignore[arg-type]
        await conn.initialize(protocol_version=1)
        session = await conn.new_session(cwd="/", mcp_servers=[])
        start = time.perf_counter()
        await conn.prompt(session_id=session.session_id, prompt=[acp.text_block("go")])
        elapsed = time.perf_counter() - start
    return elapsed, Counter.seen


async def baton_pipeline(count: int) -> tuple[float, int, list[float]]:
    from baton.app import Baton
    from baton.providers.profile import AgentProfile

    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        samples: list[float] = []
        every = max(1, count // 20)
        profile = AgentProfile(
            name="flood", title="flood", command=tuple(_agent(count)), family="generic"
        )
        (root / "ws").mkdir()
        async with (
            Baton.open(state_dir=root / "state") as baton,
            baton.run(kind="bench", agent="flood", cwd=root, run_id="bench") as run,
        ):
            emitter = run.emitter

            def sample(_event: Any) -> None:
                if emitter.count % every == 0:
                    samples.append(rss_mib())

            run.listen(sample)
            session = await baton.open_session(
                profile,
                run=run,
                requests=baton.broker("none", wait_timeout=0, notify=False),
                workspace=root / "ws",
            )
            before = session.conn.frames_in if session.conn else 0
            start = time.perf_counter()
            await session.prompt("go")
            await emitter.flush()
            elapsed = time.perf_counter() - start
            seen = (session.conn.frames_in if session.conn else 0) - before - 1
            await session.close()
            run.status = "completed"
        return elapsed, seen, samples


def run(count: int, repeats: int) -> None:
    results: dict[str, list[float]] = {"ndjson floor": [], "acp sdk raw": [], "baton": []}
    memory: list[list[float]] = []
    for _ in range(repeats):
        elapsed, seen = asyncio.run(ndjson_floor(count))
        assert seen >= count, seen
        results["ndjson floor"].append(seen / elapsed)
        elapsed, seen = asyncio.run(acp_sdk_raw(count))
        assert seen >= count, seen
        results["acp sdk raw"].append(seen / elapsed)
        elapsed, seen, samples = asyncio.run(baton_pipeline(count))
        assert seen >= count, seen
        results["baton"].append(seen / elapsed)
        memory.append(samples)
    sdk = median(results["acp sdk raw"])
    floor = median(results["ndjson floor"])
    rows = []
    for name, rates in results.items():
        med = median(rates)
        rows.append(
            [
                name,
                f"{med:,.0f}",
                f"{min(rates):,.0f}–{max(rates):,.0f}",
                f"{med / sdk:.2f}",
                f"{med / floor:.2f}",
            ]
        )
    print_table(
        f"ingest: {count:,} updates, median of {repeats} (updates/s)",
        ["consumer", "median", "range", "vs acp sdk", "vs ndjson floor"],
        rows,
    )
    last = memory[-1]
    if last:
        warm = last[max(1, len(last) // 10)]
        print(
            f"\nbaton RSS over the last run: start {last[0]:.1f} MiB, after 10% {warm:.1f} MiB, "
            f"peak {max(last):.1f} MiB, end {last[-1]:.1f} MiB "
            f"(growth after warm-up {max(last) - warm:+.1f} MiB)"
        )
    target = median(results["baton"]) / sdk
    print(
        f"target baton ≥ 0.50 × acp sdk raw: {'MET' if target >= 0.5 else 'NOT MET'} ({target:.2f})"
    )
