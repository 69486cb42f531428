"""Child process for the crash tests: one create, claim or submit, killed before its Nth mutation.

Usage: ``python lifecycle_crasher.py ROOT create OPERATION_ID N``,
``python lifecycle_crasher.py ROOT claim TASK_ID ACTOR N`` or
``python lifecycle_crasher.py ROOT submit TASK_ID ACTOR N``. Every mutating
file-system call the writer makes (``open`` with ``O_CREAT``, ``fsync``,
``link``, ``unlink``, ``replace``, ``rename``) is counted; before call ``N`` the
process dies with ``os._exit(86)`` (no cleanup, no flush: what a SIGKILL
leaves). With ``N`` past the last call the operation completes and the child
prints the number of calls it made, then exits 0.
"""

from __future__ import annotations

import os
import sys
import warnings
from pathlib import Path
from typing import Any

CRASHED = 86


def _arm(limit: int) -> list[int]:
    count = [0]

    def counted(name: str, real: Any, mutating: Any = None) -> Any:
        def call(*args: Any, **kwargs: Any) -> Any:
            if mutating is None or mutating(*args, **kwargs):
                count[0] += 1
                if count[0] >= limit:
                    os._exit(CRASHED)
            return real(*args, **kwargs)

        return call

    os.open = counted("open", os.open, lambda path, flags, *a, **k: bool(flags & os.O_CREAT))  # type: ignore[assignment]
    for name in ("fsync", "link", "unlink", "replace", "rename"):
        setattr(os, name, counted(name, getattr(os, name)))
    return count


def main(argv: list[str]) -> int:
    warnings.simplefilter("ignore", DeprecationWarning)
    from baton.fcop_port.lifecycle import Lifecycle

    root, what = Path(argv[1]), argv[2]
    lifecycle = Lifecycle(root)  # binding reads only
    count = _arm(int(argv[-1]))
    if what == "create":
        lifecycle.create(
            operation_id=argv[3], sender="ADMIN", recipient="DEV", subject="crash", body="b\n"
        )
    elif what == "submit":
        lifecycle.submit(argv[3], actor=argv[4])
    else:
        lifecycle.claim(argv[3], actor=argv[4])
    print(count[0])
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv))
