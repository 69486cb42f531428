"""Entry point: ``python -m baton.agents.builtin`` serves ACP on stdin/stdout, logs on stderr."""

if __name__ == "__main__":
    from baton.import_gc import importing, own_process

    own_process()
    with importing():
        from .server import run
    run()
