"""Test support shared by baton's test suites.

* :mod:`tests.support.rawclient`: a raw JSON-RPC/ACP client over a subprocess's stdio.
* :mod:`tests.support.llm_stub`: a scripted OpenAI-compatible chat-completions server.
* :mod:`tests.support.opencode`: finding and launching the real OpenCode agent offline.

The fault-injection fake agent lives in the package (:mod:`baton.testing.fake_agent`) so that
baton's own demos and benchmarks can use it too.
"""
