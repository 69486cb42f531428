"""A new driver re-attaches to a slot's role actor by the name the store gives it.

``python reattach.py ADDRESS DSN SLOT`` prints the actor's ``info()`` as one JSON line
(or ``{"attached": false}``). It knows nothing but the Ray address and the store:
the actor's name comes from the slot's stored epoch.
"""

from __future__ import annotations

import asyncio
import json
import sys

from baton.cluster.driver import ClusterDriver
from baton.events.sequencer import Sequencer
from baton.runner.emitter import EventEmitter
from baton.store.pg import PgStore


async def main(address: str, dsn: str, slot: str) -> None:
    store = PgStore.open(dsn)
    try:
        # Reading placements needs no run of its own: nothing here writes.
        emitter = EventEmitter(Sequencer("reattach"), store)
        driver = ClusterDriver.connect(address, store, emitter)
        holder = await driver.attach(slot)
        out = {"attached": False} if holder is None else {"attached": True, **holder.info}
        print(json.dumps(out), flush=True)
    finally:
        await store.aclose()
        import ray

        ray.shutdown()


if __name__ == "__main__":
    asyncio.run(main(*sys.argv[1:4]))
