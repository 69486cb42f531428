"""The core as the surfaces (CLI, web) reach it: one module per area, names re-exported.

The CLI and the web import the core only from ``baton.app`` (this package and the
composition root), never from the core's modules, so what they depend on is listed in
one place and the core can move behind it (tests/test_architecture.py holds the rule).
"""
