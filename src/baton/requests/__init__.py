"""Durable human requests: permissions, questions, plans, forms and reviews.

The documents themselves (what is asked, what comes back) are data in
:mod:`baton.request_model`; this package is their ledger and what reads it.

An agent's request for a human decision is persisted before any surface shows
it, validated twice, answered exactly once, delivered only after the reply was
written to the agent, and never silently decided for the human. Modules, one
concept each:

- :mod:`~baton.requests.validate`: answer validation against a document;
- :mod:`~baton.requests.states`: the lifecycle as a transition table;
- :mod:`~baton.requests.policy`: who decides (policy, headless fallback, human);
- :mod:`~baton.requests.ledger`: prepared changes committed through the store, and the
  cross-process waiter (the store's doorbell, :mod:`baton.store.wake`);
- :mod:`~baton.requests.records`: a ledger row as a typed record;
- :mod:`~baton.requests.replies`: validated answers back to native replies;
- :mod:`~baton.requests.payloads`: ``request.*`` event payloads from records;
- :mod:`~baton.requests.render`: terminal and JSON rendering;
- :mod:`~baton.requests.notify`: the escalation notification hook.

See ``docs/requests.md``.
"""
