"""The agent process: claim stdio, serve ACP until the client hangs up or a signal arrives.

At end of input, when the client stops reading our output, or on SIGTERM/SIGINT, every running
turn is cancelled (which kills its steps' process groups and answers its prompt ``cancelled``),
MCP servers are closed, and the process exits. ``BATON_BUILTIN_LOG_LEVEL`` (default WARNING)
sets how much goes to stderr.
"""

import asyncio
import logging
import os
import signal

from baton.acp.framing import LineDecoder

from .agent import BuiltinAgent
from .config import AgentConfig
from .connection import Connection
from .stdio import Input, claim_stdio, open_input, open_output

__all__ = ["MAX_LINE", "main", "run", "serve"]

log = logging.getLogger(__name__)

MAX_LINE = 32 * 1024 * 1024


async def serve(source: Input, connection: Connection, agent: BuiltinAgent) -> None:
    """Serve until end of input, a stop signal or the loss of the client, then wind down."""
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, stop.set)
    try:
        await _pump(source, connection, stop)
    finally:
        for sig in (signal.SIGTERM, signal.SIGINT):
            loop.remove_signal_handler(sig)
    log.info("shutting down")
    await agent.shutdown()


async def _pump(source: Input, connection: Connection, stop: asyncio.Event) -> None:
    """Feed input lines to the connection until there is no more or we must stop."""
    decoder = LineDecoder(MAX_LINE)
    stopping = [asyncio.ensure_future(stop.wait()), asyncio.ensure_future(connection.lost.wait())]
    try:
        while True:
            reading = asyncio.ensure_future(source.read())
            await asyncio.wait([reading, *stopping], return_when=asyncio.FIRST_COMPLETED)
            if not reading.done():
                reading.cancel()
                return
            chunk = reading.result()
            if not chunk:
                for leftover in decoder.close():
                    connection.receive(leftover)
                return
            for item in decoder.feed(chunk):
                connection.receive(item)
    finally:
        for task in stopping:
            task.cancel()


def run() -> None:
    """The process entry point: log to stderr, serve until the client is done."""
    level = logging.getLevelNamesMapping().get(
        os.environ.get("BATON_BUILTIN_LOG_LEVEL", "").upper()
    )
    logging.basicConfig(
        level=level or logging.WARNING,
        format="baton-builtin %(levelname)s %(name)s: %(message)s",
    )
    asyncio.run(main())


async def main() -> None:
    """Serve ACP on this process's stdin/stdout."""
    fd_in, fd_out = claim_stdio()
    config = AgentConfig.from_env(os.environ)
    source = await open_input(fd_in)
    sink = await open_output(fd_out)
    async with asyncio.TaskGroup() as tasks:
        connection = Connection(sink, tasks.create_task)
        agent = BuiltinAgent(connection, config)
        connection.route(*agent.routes())
        await serve(source, connection, agent)
