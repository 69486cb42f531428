"""The ``cursor-sdk`` transport: Cursor agents through Cursor's official SDK.

CodeFlow (the seed's second document) drives Cursor through its Agent SDK:
``Agent.create()`` once per role, ``Agent.resume(agentId)`` when a task arrives, and
``agent.send(text, {mcpServers})`` with the FCoP tools injected on every send. This
package does the same with the real ``cursor-sdk`` Python client (an optional extra,
``pip install 'baton[cursor]'``) and the bridge it talks to, and presents the result to
the runner as an ACP agent, so approvals, durable requests, timeouts, cancellation,
the process group and the canonical event stream are the ones every agent gets:

- :mod:`.transport`: the bridge process and the face behind one ``AgentTransport``;
- :mod:`.face`: ACP requests → SDK calls (create/resume/send/cancel);
- :mod:`.tools`: baton's custom tools, every mutation asked through the runner;
- :mod:`.discovery`: the bridge's ready line, checked;
- :mod:`.options`: ACP session parameters → SDK options (pure);
- :mod:`.client`: the SDK, loaded on demand, with a raw tap on run streams.

The mapping of what the SDK streams lives with the provider
(:mod:`baton.providers.cursor_sdk`): the transport carries, the provider interprets.
"""

from __future__ import annotations

from baton.cursor_sdk.transport import CursorSdkLauncher, CursorSdkTransport

__all__ = ["CursorSdkLauncher", "CursorSdkTransport"]
