"""Event → page latency of the dashboard while an agent floods, with 1 and 20 open pages.

The app runs in-process under uvicorn on a pre-bound socket, beside the writer
(as ``baton up --serve`` does), over a real store. Headless Debian chromium
(Playwright) opens N run pages, each in its own browser context (the real run view, rendering every event); in
each page a second ``EventSource`` on the same stream stamps every event's
arrival with ``Date.now()``. The writer appends transcript and tool events at a
fixed rate and records the wall-clock time each one was committed (``flush``
returned). Latency = arrival in the page − commit. The 1-page run is the
baseline of the same run: the table shows p50/p99 and their ratio to it.
"""

from __future__ import annotations

import asyncio
import socket
import statistics
import tempfile
import time
from pathlib import Path
from typing import Any

from benches.common import cpu_note, print_table
from tests.support.chromium import CHROMIUM, CHROMIUM_ARGS

RECORDER = """
(runId) => new Promise((resolve) => {
  window.__arrivals = {};
  const source = new EventSource("/api/runs/" + encodeURIComponent(runId) + "/stream");
  source.onmessage = (m) => { window.__arrivals[m.lastEventId] = Date.now(); };
  source.onopen = () => resolve(true);
})
"""


def _percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


async def _measure(pages: int, events: int, rate: float, *, view: bool = True) -> list[float]:
    import uvicorn
    from playwright.async_api import async_playwright

    from baton.app import Baton
    from baton.events.model import CanonicalEvent, ToolExecutionCompleted, TranscriptAssistant
    from baton.store.records import RunRecord
    from baton.web.app import create_app

    with tempfile.TemporaryDirectory() as tmp:
        async with Baton.open(state_dir=Path(tmp)) as baton:
            store, ledger = baton.store, baton.ledger
            run_id = "bench-run"
            store.create_run(
                RunRecord(
                    run_id=run_id,
                    kind="run",
                    agent="bench",
                    cwd=tmp,
                    status="running",
                    created_at="2026-01-01T00:00:00.000Z",
                )
            )
            app = create_app(store, ledger, token=None, poll_interval=1.0)
            sock = socket.socket()
            sock.bind(("127.0.0.1", 0))
            sock.listen(256)
            port = sock.getsockname()[1]
            server = uvicorn.Server(uvicorn.Config(app, log_level="warning", lifespan="off"))
            serving = asyncio.create_task(server.serve(sockets=[sock]))
            committed: dict[int, float] = {}
            try:
                async with async_playwright() as p:
                    browser = await p.chromium.launch(
                        executable_path=CHROMIUM, headless=True, args=CHROMIUM_ARGS
                    )
                    # One context per page: a browser allows six HTTP/1.1 connections per
                    # host and profile, and each page holds three streams.
                    contexts = [await browser.new_context() for _ in range(pages)]
                    opened = []
                    for context in contexts:
                        page = await context.new_page()
                        # The run view (it renders every event), or a page with no stream of
                        # its own (what the server and the SSE path alone cost).
                        path = f"/runs/{run_id}" if view else "/login"
                        await page.goto(f"http://127.0.0.1:{port}{path}")
                        await page.evaluate(RECORDER, run_id)
                        opened.append(page)
                    interval = 1.0 / rate
                    start = time.perf_counter()
                    for seq in range(1, events + 1):
                        if seq % 4 == 0:
                            payload: Any = ToolExecutionCompleted(
                                tool_call_id=f"call-{seq}",
                                title=f"step {seq}",
                                kind="execute",
                                status="completed",
                                duration_ms=3,
                            )
                        else:
                            payload = TranscriptAssistant(
                                message_id=f"m{seq // 50}", text=f"token {seq} " * 8
                            )
                        store.append(
                            CanonicalEvent(
                                type=payload.TYPE,
                                seq=seq,
                                run_id=run_id,
                                session_id="s",
                                turn_id="t",
                                ts="2026-01-01T00:00:00.000Z",
                                payload=payload,
                            )
                        )
                        await store.flush()
                        committed[seq] = time.time() * 1000
                        delay = start + seq * interval - time.perf_counter()
                        if delay > 0:
                            await asyncio.sleep(delay)
                    latencies: list[float] = []
                    for page in opened:
                        # Polled from here: wait_for_function evaluates a string in the page,
                        # which the dashboard's CSP (no 'unsafe-eval') refuses.
                        deadline = time.monotonic() + 120
                        while True:
                            arrivals = await page.evaluate("window.__arrivals")
                            if len(arrivals) >= events or time.monotonic() > deadline:
                                break
                            await asyncio.sleep(0.05)
                        latencies += [arrivals[str(s)] - committed[s] for s in committed]
                    for context in contexts:
                        await context.close()
                    await browser.close()
            finally:
                server.should_exit = True
                await asyncio.wait_for(serving, 30)
                await app.state.baton_close()
                sock.close()
    return latencies


def run(events: int = 1000, rate: float = 500.0) -> None:
    rows = []
    base: tuple[float, float] | None = None
    for pages, view in ((1, True), (20, True), (20, False)):
        lat = asyncio.run(_measure(pages, events, rate, view=view))
        p50, p99 = statistics.median(lat), _percentile(lat, 0.99)
        base = base or (p50, p99)
        rows.append(
            [
                str(pages),
                "run view" if view else "stream only",
                str(len(lat)),
                f"{p50:.1f}",
                f"{p99:.1f}",
                f"{max(lat):.1f}",
                f"{p50 / max(base[0], 0.1):.2f}x",
                f"{p99 / max(base[1], 0.1):.2f}x",
            ]
        )
    print_table(
        f"event → page latency, agent flooding {rate:g} events/s ({events} events; {cpu_note()})",
        [
            "pages",
            "page",
            "samples",
            "p50 ms",
            "p99 ms",
            "max ms",
            "p50 vs 1 page",
            "p99 vs 1 page",
        ],
        rows,
    )


if __name__ == "__main__":
    run()
