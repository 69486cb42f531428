"""Task files as untrusted input: what baton checks before ``fcop`` parses anything.

Any file under ``fcop/`` may have been written by a hostile or careless agent (an
alias bomb, 5,000-deep nesting, a gigabyte, half a file written in two chunks,
invalid UTF-8, escape sequences in a subject). One package, one concept per module:

* :mod:`~baton.coordination.intake.limits` — every number in one value object;
* :mod:`~baton.coordination.intake.yaml_guard` — the bounded YAML loader (depth,
  anchors, aliases, recursive aliases, expanded size), also installed into ``fcop``
  so Core's own in-process parses are bounded by the same rule;
* :mod:`~baton.coordination.intake.screen` — the guarded parse of one file's bytes
  (pure): size, UTF-8, complete front matter, YAML limits, display-safe routing fields;
* :mod:`~baton.coordination.intake.stability` — when a file is stable enough to read
  (pure): unchanged for a settle window, or proven complete by Core's create fact;
* :mod:`~baton.coordination.intake.worker` — the screen run in a subprocess with
  resource limits and a deadline, killed and replaced when it overruns;
* :mod:`~baton.coordination.intake.sweep` — screening every envelope Core would read
  (status, task new, the daemon's start) and quarantining what fails, with the reason.
"""
