"""Entry point: ``python -m baton.agents.builtin`` serves ACP on stdin/stdout, logs on stderr."""

from baton.startup import importing

with importing():
    from .server import run

if __name__ == "__main__":
    run()
