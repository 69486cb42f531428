"""The web surface: a JSON API, resumable SSE of run events, and a small dashboard.

Built by :func:`baton.web.app.create_app` over a store and a request ledger;
served by ``baton serve`` (:mod:`baton.cli.web_cmd`). See ``docs/web.md``.

- :mod:`~baton.web.app`: the app factory and the one error-to-status mapping;
- :mod:`~baton.web.api`: ``/api`` routes (runs, events, stream, requests, answers);
- :mod:`~baton.web.answers`: web answers, validated here and again by the ledger;
- :mod:`~baton.web.sse`: the resumable event stream (replay, live, lag, other writers);
- :mod:`~baton.web.auth`: token, cookie and loopback rules, security headers;
- :mod:`~baton.web.dashboard`: server-rendered, escaped HTML;
- :mod:`~baton.web.assets`: the dashboard's script and stylesheet.
"""

from baton.web.app import create_app

__all__ = ["create_app"]
