"""The dashboard's script and stylesheet, served from ``/assets/`` (no external assets).

They live beside this module (``static/dashboard.js``, ``static/dashboard.css``),
ship as package data, and are read once at import; nothing is built or fetched
at run time. They are served as files rather than inline so the
Content-Security-Policy can forbid inline script entirely (``script-src 'self'``).

The script never uses ``innerHTML``: every element it makes goes through its
``el()`` helper (text only via ``textContent``, after ``visible()``, the browser
twin of :func:`baton.security.display.neutralize_terminal`, and links only into
the dashboard). The one place it inserts markup is a request card fetched from
``/fragments/requests/{id}``: server-rendered and escaped by the same code as
the page itself, parsed with ``DOMParser`` (which runs no script) under the CSP.
"""

from __future__ import annotations

from importlib.resources import files
from typing import Final

__all__ = ["CSS_PATH", "DASHBOARD_CSS", "DASHBOARD_JS", "ICON_PATH", "ICON_SVG", "JS_PATH"]

JS_PATH: Final = "/assets/dashboard.js"
CSS_PATH: Final = "/assets/dashboard.css"
ICON_PATH: Final = "/assets/favicon.svg"

_STATIC = files("baton.web").joinpath("static")
DASHBOARD_JS: Final = _STATIC.joinpath("dashboard.js").read_text(encoding="utf-8")
DASHBOARD_CSS: Final = _STATIC.joinpath("dashboard.css").read_text(encoding="utf-8")
ICON_SVG: Final = _STATIC.joinpath("favicon.svg").read_text(encoding="utf-8")
"""Also served at ``/favicon.ico``, which browsers ask for on every page."""
