"""``python -m baton``: the same as the ``baton`` command."""

from baton.cli.app import main

main()
