"""``python -m baton``: the same as the ``baton`` command."""

from baton.cli.entry import main

main()
