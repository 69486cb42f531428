"""The built-in runbook agent: a deterministic ACP agent that needs no model.

It executes the explicit steps written in a prompt (see `runbook` for the format) and reports
every step as an ACP tool call. Run it with `python -m baton.agents.builtin`; it speaks ACP v1
over stdin/stdout and logs to stderr.
"""
