"""baton's ACP client adapter: framing, JSON-RPC, the agent process, the client side.

Layers, innermost first: :mod:`framing` (bytes → messages, sans-I/O),
:mod:`jsonrpc` (message classification and encoding, sans-I/O), :mod:`process`
(the agent process group, stderr ring), :mod:`connection` (the asyncio JSON-RPC
peer: ordered inbound dispatch, outbound requests with deadlines) and
:mod:`client` (typed ACP calls built on ``agent-client-protocol``'s models).
"""
