"""What an agent asks a human, as data: request documents, answers, and their refusals.

Pure data with no I/O: the provider normalizers (:mod:`baton.providers`) build these
documents, the event seam (:mod:`baton.events.extension`) carries them, and the ledger
(:mod:`baton.requests`) validates, stores and answers them. They sit below all three so
that each can name them without importing the others.

- :mod:`~baton.request_model.documents`: one model per request and answer kind, and the
  limits they share;
- :mod:`~baton.request_model.errors`: the ledger's refusals (``RequestError`` subtree).
"""
