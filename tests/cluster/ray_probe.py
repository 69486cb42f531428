"""Ray facts the cluster design rests on, measured with our own actors (run on a tier host).

``python ray_probe.py ADDRESS place NAME HOST`` starts a detached named actor
pinned to ``HOST`` by its custom resource; the actor starts a child process
(standing in for an agent) and answers its pid. ``... watch NAME`` blocks on a
call into the actor and prints, as JSON, the monotonic time at which Ray
reported it dead (CLOCK_MONOTONIC is one clock for every namespace of the
machine, so the tier subtracts its own kill time). ``... ping NAME`` answers the
actor's pid and its agent's pid (re-attachment by name from a new driver).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time

import ray


@ray.remote(max_restarts=0, max_concurrency=4)
class Probe:
    def __init__(self) -> None:
        self.agent = subprocess.Popen(["sleep", "100000"])

    def pids(self) -> dict[str, int | str]:
        return {
            "actor": os.getpid(),
            "agent": self.agent.pid,
            "agent_alive": self.agent.poll() is None,
            "node": ray.get_runtime_context().get_node_id(),
        }

    def block(self) -> None:
        time.sleep(10_000)


def watch(name: str) -> None:
    """Block on a call into the actor; report when the call failed and when the GCS
    declared the actor's node dead (polled at 100 ms: a measurement, not a mechanism)."""
    actor = ray.get_actor(name)
    node = ray.get(actor.pids.remote(), timeout=60)["node"]
    ref = actor.block.remote()
    print(json.dumps({"watching": time.monotonic()}), flush=True)
    result: dict[str, object] = {}
    while "node_dead_at" not in result or "call_failed_at" not in result:
        ready, _ = ray.wait([ref], timeout=0.1)
        if ready and "call_failed_at" not in result:
            try:
                ray.get(ref)
            except Exception as exc:
                result["call_failed_at"] = time.monotonic()
                result["error"] = type(exc).__name__
        alive = {n["NodeID"]: n["Alive"] for n in ray.nodes()}
        if "node_dead_at" not in result and not alive.get(node, False):
            result["node_dead_at"] = time.monotonic()
        failed_at = result.get("call_failed_at")
        if isinstance(failed_at, float) and time.monotonic() - failed_at > 120:
            break  # the call failed but the node never died: report what was seen
    print(json.dumps(result), flush=True)


def main(address: str, verb: str, name: str, *rest: str) -> None:
    ray.init(address=address, namespace="baton-cluster", logging_level="ERROR", log_to_driver=False)
    if verb == "place":
        host = rest[0]
        actor = Probe.options(  # type: ignore[attr-defined]
            name=name,
            lifetime="detached",
            resources={f"baton-host-{host}": 0.01},
            num_cpus=0,
        ).remote()
        print(json.dumps(ray.get(actor.pids.remote(), timeout=120)))
    elif verb == "ping":
        actor = ray.get_actor(name)
        print(json.dumps(ray.get(actor.pids.remote(), timeout=float(rest[0]) if rest else 60)))
    elif verb == "watch":
        watch(name)
    elif verb == "kill":
        ray.kill(ray.get_actor(name))
        print(json.dumps({"killed": name}))
    ray.shutdown()


if __name__ == "__main__":
    main(*sys.argv[1:])
