"""baton's security controls, one concept per module.

* :mod:`~baton.security.redact` — redaction of every event, log line and stored request.
* :mod:`~baton.security.display` — agent text never drives a terminal or a browser.
* :mod:`~baton.security.paths` — workspace containment, path display masking, id sanitizing.
* :mod:`~baton.security.loopback` — what counts as an address only this machine reaches.
* :mod:`~baton.security.launch_env` — the private launch environment (HOME/XDG, allowlisted
  env, explicitly bound credentials).
* :mod:`~baton.security.admission` — refusing ambient agent configuration in a workspace.
* :mod:`~baton.security.manifest`, :mod:`~baton.security.pinning` — pinned agent
  distributions (whole execution closure), verification and materialization.
* :mod:`~baton.security.distribution` — where a profile's pin lives and which installed
  tree it covers.

The modules are pure or do only local filesystem I/O; none emits events. Callers turn the
refusals (:class:`baton.errors.SecurityError`, verdicts, ``Redacted.fallback``) into
``security.*`` canonical events.
"""
