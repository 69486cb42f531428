"""Ingest of a flooding agent: baton beside the ACP SDK, acpx and the bare-parse floor.

Every consumer reads the same agent (:mod:`benches.flood_agent`, ``message`` or
``mixed`` kind) in the same run, interleaved repeat by repeat:

* ``floor json`` (and ``floor orjson`` / ``floor msgspec`` when installed): read the
  agent's stdout and parse each line, nothing else: no client can be faster;
* ``acp sdk loop``: ``agent-client-protocol``'s ``ClientSideConnection`` validating
  every notification into its models, a handler that only counts;
* ``baton pipeline``: baton's session in-process (ordered dispatch, normalization,
  redaction, stamping, the durable SQLite log, flushed before the clock stops);
  ``baton pipeline, budget``: the same metered against limits on every dimension and
  scope (the budget check after each batch; issue 28: at most 2 % more), and
  ``baton pipeline, json frames`` (the frame decoder patched to ``json.loads`` alone,
  as before msgspec), the measured share of the parser;
* ``acpx --format json`` (acpx 0.19.1 from npm, when it can be installed),
  ``baton run --json`` and ``baton run`` (the live view, to a file): whole CLI
  processes, so their cost per update is the difference of a large and a small flood
  ((t(N) - t(N/10)) / (0.9 N)): process start, imports and handshake cancel out.

Figures are µs of wall time per update (lower is better), median of the repeats,
each as a ratio to the floor and to the SDK measured beside it, with the load.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator, Sequence
from functools import partial
from pathlib import Path
from typing import Any

from benches.common import median, print_table, rss_mib
from benches.flood_agent import KINDS

FLOOD = str(Path(__file__).with_name("flood_agent.py"))
ACPX_VERSION = "0.19.1"
ACPX_DIR = Path(__file__).resolve().parents[1] / ".cache" / "acpx"
BATON = Path(sys.executable).with_name("baton")
TARGETS = {
    ("mixed", "baton run --json"): ("floor json", 3.0),
    ("message", "baton run --json"): ("floor json", 2.0),
}
"""Issue 15: mixed durable --json ≤ 3× the floor (and ≤ 0.6× the SDK), message ≤ 2× the floor."""


def _agent(kind: str, count: int) -> list[str]:
    return [sys.executable, FLOOD, "--kind", kind, "--count", str(count)]


# --------------------------------------------------------------------- in-process


def _parser(name: str) -> Callable[[bytes], Any] | None:
    if name == "json":
        return json.loads
    try:
        if name == "orjson":
            import orjson  # type: ignore[import-not-found,unused-ignore]

            return orjson.loads  # type: ignore[no-any-return,unused-ignore]
        import msgspec  # type: ignore[import-not-found,unused-ignore]

        return msgspec.json.decode  # type: ignore[no-any-return,unused-ignore]
    except ImportError:
        return None


async def floor(kind: str, count: int, loads: Callable[[bytes], Any]) -> tuple[float, int]:
    """Read and parse every line (the prompt's clock: prompt sent → its answer)."""
    proc = await asyncio.create_subprocess_exec(
        *_agent(kind, count),
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
        message = {"jsonrpc": "2.0", "id": i, "method": method, "params": params}
        proc.stdin.write(json.dumps(message).encode() + b"\n")
    await proc.stdin.drain()
    start, seen, buffer, done = 0.0, 0, b"", False
    while not done:
        chunk = await proc.stdout.read(1 << 18)
        if not chunk:
            break
        buffer += chunk
        *lines, buffer = buffer.split(b"\n")
        for line in lines:
            if not line:
                continue
            message = loads(line)
            if "method" in message:
                seen += 1
            elif message.get("id") == 1:
                start = time.perf_counter()
                params = {
                    "sessionId": message["result"]["sessionId"],
                    "prompt": [{"type": "text", "text": "go"}],
                }
                prompt = {"jsonrpc": "2.0", "id": 2, "method": "session/prompt", "params": params}
                proc.stdin.write(json.dumps(prompt).encode() + b"\n")
            elif message.get("id") == 2:
                done = True
    elapsed = time.perf_counter() - start
    proc.stdin.close()
    await proc.wait()
    return elapsed, seen


async def acp_sdk_loop(kind: str, count: int) -> tuple[float, int]:
    import acp

    class Counter:
        seen = 0

        async def session_update(self, session_id: str, update: Any, **kwargs: Any) -> None:
            Counter.seen += 1

        async def request_permission(self, *args: Any, **kwargs: Any) -> Any:
            raise NotImplementedError

    client = Counter()
    async with acp.spawn_agent_process(client, *_agent(kind, count)) as (conn, _proc):  # type: ignore[arg-type]
        await conn.initialize(protocol_version=1)
        session = await conn.new_session(cwd="/", mcp_servers=[])
        start = time.perf_counter()
        await conn.prompt(session_id=session.session_id, prompt=[acp.text_block("go")])
        elapsed = time.perf_counter() - start
    return elapsed, Counter.seen


async def baton_pipeline(
    kind: str, count: int, *, budget: bool = False
) -> tuple[float, int, list[float]]:
    """``budget``: the session is metered against limits on every dimension (none ever
    reached), so each batch pays the budget check (issue 28: at most 2 % more)."""
    from baton.agent_profile import AgentProfile
    from baton.app import Baton

    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        samples: list[float] = []
        every = max(1, count // 20)
        profile = AgentProfile(
            name="flood", title="flood", command=tuple(_agent(kind, count)), family="generic"
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
                budget=_budget_plan() if budget else None,
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


def _budget_plan() -> Any:
    from baton.budgets.limits import BudgetConfig, Limits, parse_window
    from baton.runner.budget_plan import BudgetPlan

    never = Limits(tokens=10**12, cost_usd=1e9, turns=10**6, tool_calls=10**9, minutes=1e6)
    config = BudgetConfig(
        per_run=never, per_role=never, per_window=never, window=parse_window("5h")
    )
    return BudgetPlan(config=config)


@contextlib.contextmanager
def _json_frames() -> Iterator[None]:
    """baton's frame decoder with ``json.loads`` alone (what it was before msgspec)."""
    from baton.acp import framing

    if not hasattr(framing, "_fast_loads"):  # a checkout from before msgspec
        yield
        return
    original = framing._fast_loads
    framing._fast_loads = json.loads  # type: ignore[assignment]  # the same call, another parser
    try:
        yield
    finally:
        framing._fast_loads = original


# ------------------------------------------------------------------ CLI processes


def acpx_command() -> Path | None:
    """acpx from ``.cache/acpx`` (installed from npm once, pinned); None when npm cannot."""
    binary = ACPX_DIR / "node_modules" / ".bin" / "acpx"
    if binary.exists():
        return binary
    if shutil.which("npm") is None:
        return None
    try:
        subprocess.run(
            [
                *("npm", "install", "--prefix", str(ACPX_DIR), "--no-audit", "--no-fund"),
                *("--ignore-scripts", "--loglevel=error", f"acpx@{ACPX_VERSION}"),
            ],
            capture_output=True,
            timeout=180,
            check=True,
        )
    except (OSError, subprocess.SubprocessError):
        return None
    return binary if binary.exists() else None


class Project:
    """A throwaway baton project whose profiles are the flood agent at given sizes."""

    def __init__(self, tmp: Path, sizes: Sequence[int]) -> None:
        self.root = tmp / "repo"
        self.root.mkdir()
        home = tmp / "home"
        self.env = {
            "PATH": os.environ["PATH"],
            "HOME": str(home),
            "XDG_STATE_HOME": str(home / ".local" / "state"),
            "LANG": "C.UTF-8",
            "COLUMNS": "120",
        }
        if "PYTHONPATH" in os.environ:  # measuring another checkout's src (before/after)
            self.env["PYTHONPATH"] = os.environ["PYTHONPATH"]
        subprocess.run(["git", "init", "-q", str(self.root)], check=True, env=self.env)
        subprocess.run([str(BATON), "init"], cwd=self.root, env=self.env, check=True, **_quiet())
        with (self.root / "baton.toml").open("a") as toml:
            for kind in KINDS:
                for size in sizes:
                    command = json.dumps(_agent(kind, size))
                    toml.write(f"\n[profiles.flood-{kind}-{size}]\ncommand = {command}\n")

    def run(self, kind: str, count: int, *, json_out: bool) -> float:
        """One ``baton run`` to a file; its wall time in seconds."""
        args = [str(BATON), "run", "--agent", f"flood-{kind}-{count}"]
        if json_out:
            args.append("--json")
        with tempfile.TemporaryFile() as out:
            start = time.perf_counter()
            done = subprocess.run(
                [*args, "go"], cwd=self.root, env=self.env, stdout=out, stderr=subprocess.PIPE
            )
            elapsed = time.perf_counter() - start
        if done.returncode != 0:
            raise RuntimeError(f"baton run failed: {done.stderr.decode()[-500:]}")
        return elapsed


def _quiet() -> dict[str, Any]:
    return {"stdout": subprocess.DEVNULL, "stderr": subprocess.DEVNULL}


def acpx_run(acpx: Path, tmp: Path, kind: str, count: int) -> float:
    (tmp / "acpx-ws").mkdir(exist_ok=True)
    env = {"PATH": os.environ["PATH"], "HOME": str(tmp / "acpx-home")}
    agent = " ".join(_agent(kind, count))
    start = time.perf_counter()
    subprocess.run(
        [
            *(str(acpx), "--cwd", str(tmp / "acpx-ws"), "--format", "json", "--approve-all"),
            *("--agent", agent, "exec", "go"),
        ],
        env=env,
        check=True,
        timeout=600,
        **_quiet(),
    )
    return time.perf_counter() - start


# ------------------------------------------------------------------------- report


def _us(seconds: float, updates: int) -> float:
    return seconds / max(1, updates) * 1e6


def run(count: int, repeats: int) -> None:
    small = max(1, count // 10)
    load_start = os.getloadavg()[0]
    parsers = {f"floor {n}": p for n in ("json", "orjson", "msgspec") if (p := _parser(n))}
    acpx = acpx_command()
    results: dict[tuple[str, str], list[float]] = {}
    memory: list[float] = []
    tmp = Path(tempfile.mkdtemp(prefix="baton-bench-ingest-"))
    try:
        project = Project(tmp, (small, count))

        def cli(fn: Callable[[int], float]) -> float:
            return (fn(count) - fn(small)) / (count - small) * 1e6

        def add(kind: str, name: str, value: float) -> None:
            results.setdefault((kind, name), []).append(value)

        for repeat in range(repeats):
            for kind in KINDS:
                for name, loads in parsers.items():
                    add(kind, name, _us(*asyncio.run(floor(kind, count, loads))))
                add(kind, "acp sdk loop", _us(*asyncio.run(acp_sdk_loop(kind, count))))
                # Plain and metered back to back, in alternating order (the second of two
                # runs pays or gains from the first's heap): each repeat is one pair.
                pair: dict[bool, float] = {}
                for budget in (False, True) if repeat % 2 == 0 else (True, False):
                    elapsed, seen, samples = asyncio.run(baton_pipeline(kind, count, budget=budget))
                    pair[budget] = _us(elapsed, seen)
                    if not budget:
                        memory = samples
                add(kind, "baton pipeline", pair[False])
                add(kind, "baton pipeline, budget", pair[True])
                with _json_frames():
                    elapsed, seen, _ = asyncio.run(baton_pipeline(kind, count))
                add(kind, "baton pipeline, json frames", _us(elapsed, seen))
                if acpx is not None:
                    add(kind, "acpx --format json", cli(partial(acpx_run, acpx, tmp, kind)))
                add(kind, "baton run --json", cli(partial(project.run, kind, json_out=True)))
                live = partial(project.run, kind, json_out=False)
                add(kind, "baton run (live view)", cli(live))
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    load = f"{load_start:.1f}→{os.getloadavg()[0]:.1f}"
    rows = []
    for kind in KINDS:
        base_floor = median(results[(kind, "floor json")])
        base_sdk = median(results[(kind, "acp sdk loop")])
        acpx_values = results.get((kind, "acpx --format json"))
        base_acpx = median(acpx_values) if acpx_values else None
        for (k, name), values in results.items():
            if k != kind:
                continue
            med = median(values)
            target = TARGETS.get((kind, name))
            verdict = "–"
            if med <= 0:
                verdict = "noise (flood too small for the difference)"
            elif target is not None:
                ok = med <= target[1] * base_floor
                if kind == "mixed":
                    ok = ok and med <= 0.6 * base_sdk
                verdict = "MET" if ok else "NOT MET"
            if name == "baton pipeline, budget" and med > 0:
                plains = results[(kind, "baton pipeline")]
                ratio = median([b / p for b, p in zip(values, plains, strict=True) if p > 0])
                verdict = f"{ratio - 1:+.1%} vs no budget, median of paired runs " + (
                    "(MET)" if ratio <= 1.02 else "(NOT MET)"
                )
            if name == "baton run (live view)" and med > 0:
                json_med = median(results[(kind, "baton run --json")])
                verdict = f"{med / json_med:.2f}× --json " + (
                    "(MET)" if med <= 1.5 * json_med else "(NOT MET)"
                )
            rows.append(
                [
                    kind,
                    name,
                    f"{med:.2f}",
                    f"{min(values):.2f}–{max(values):.2f}",
                    f"{med / base_floor:.2f}",
                    f"{med / base_sdk:.2f}",
                    f"{med / base_acpx:.2f}" if base_acpx else "–",
                    verdict,
                ]
            )
    print_table(
        f"ingest: {count:,} updates per flood, µs/update, median of {repeats}; load {load}",
        ["kind", "consumer", "µs/update", "range", "× floor", "× sdk", "× acpx", "target"],
        rows,
    )
    if acpx is None:
        print("\nacpx: not installed (npm unreachable); its column is empty.")
    if memory:
        warm = memory[max(1, len(memory) // 10)]
        print(
            f"\nbaton pipeline RSS over its last flood: start {memory[0]:.1f} MiB, after 10% "
            f"{warm:.1f} MiB, peak {max(memory):.1f} MiB (growth after warm-up "
            f"{max(memory) - warm:+.1f} MiB)"
        )
    print(
        "\nCLI rows: (t(N) − t(N/10)) / 0.9 N, so process start, imports and the handshake "
        "cancel out; in-process rows: prompt sent → its answer (and, for baton, the durable "
        "flush). Targets (issue 15): mixed `baton run --json` ≤ 3× floor and ≤ 0.6× sdk, "
        "message ≤ 2× floor, live view ≤ 1.5× --json; (issue 28) the budget check ≤ 2 % of "
        "the pipeline."
    )
