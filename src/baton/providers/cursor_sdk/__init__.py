"""Cursor through its official SDK (``cursor-sdk`` 1.1.0): tables, mapping, extension.

The ``cursor-sdk`` transport (:mod:`baton.cursor_sdk`) drives a long-lived Cursor SDK
agent per session through the real ``cursor-sdk`` client and its bundled bridge, and
presents it to the runner as an ACP agent. The pure parts live here:

- :mod:`.tables`: the SDK's tool names and their ACP kinds, the transport's modes
  (``ask``: read-only built-ins plus baton's asked custom tools; ``agent``: Cursor's
  default toolset, which approves itself), baton's custom tools;
- :mod:`.translate`: one run-stream envelope → ACP ``session/update`` payloads;
- :mod:`.extension`: :class:`CursorSdkExtension`, the transport's vendor updates →
  canonical payloads;
- :mod:`.declarations`: the capability-matrix rows no native event can show.

Nothing is imported here: the catalog reads :mod:`.tables` at start-up, and loading the
extension (pydantic) there would cost every command its start.
"""
