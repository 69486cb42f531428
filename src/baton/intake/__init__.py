"""Task files as untrusted input: what baton checks before ``fcop`` parses anything.

Any file under ``fcop/`` may have been written by a hostile or careless agent (an
alias bomb, 5,000-deep nesting, a gigabyte, half a file written in two chunks,
invalid UTF-8, escape sequences in a subject). One package, one concept per module:

* :mod:`~baton.intake.limits` — every number in one value object;
* :mod:`~baton.intake.yaml_guard` — the bounded YAML loader (depth,
  anchors, aliases, recursive aliases, expanded size), also installed into ``fcop``
  so Core's own in-process parses are bounded by the same rule;
* :mod:`~baton.intake.screen` — the guarded parse of one file's bytes
  (pure): size, UTF-8, complete front matter, YAML limits, display-safe routing fields;
* :mod:`~baton.intake.stability` — when a file is stable enough to read
  (pure): unchanged for a settle window, or proven complete by Core's create fact;
* :mod:`~baton.intake.worker` — the screen run in a subprocess with
  resource limits and a deadline, killed and replaced when it overruns;
* :mod:`~baton.intake.sweep` — screening every envelope Core would read
  (status, task new, the team loop's start) and quarantining what fails, with the reason;
* :mod:`~baton.intake.feed` — which screened files changed, from the kernel (inotify);
* :mod:`~baton.intake.quarantine` — a refused file moved out of ``fcop/`` with its reason;
* :mod:`~baton.intake.create_fact` — where Core keeps the fact that proves a create complete.

May import :mod:`baton.fcop_errors`, :mod:`baton.security` and the leaves (and the
``fcop`` library's pure encoding); never the port, which stands above it and screens
through it.
"""
