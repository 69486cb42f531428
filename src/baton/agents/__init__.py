"""baton's own ACP agents, each run as a separate process and spoken to over plain ACP.

The runner never special-cases them: they are launched, driven and observed exactly like any
external agent, which keeps them honest stand-ins for real harnesses in tests and demos.
"""
