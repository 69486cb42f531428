"""The HTML shell every page shares, and the two escaping helpers everything uses.

Everything an agent can influence reaches a page only through :func:`text`
(an element or an attribute value) or :func:`block` (multi-line text for a
``<pre>``), which run :func:`~baton.security.display.escape_html`: HTML
metacharacters escaped (quotes too), terminal controls and bidi overrides made
visible, and, for blocks, lines that could pass for baton's own framing marked.
"""

from __future__ import annotations

from urllib.parse import quote

from baton.security.display import escape_html, safe_agent_text
from baton.web import assets

__all__ = ["NAV", "block", "href", "page", "shell", "text"]

NAV: tuple[tuple[str, str], ...] = (
    ("/", "Inbox"),
    ("/team", "Team"),
    ("/runs", "Runs"),
    ("/decisions", "Decisions"),
    ("/grants", "Grants"),
)


_CURRENT = ' aria-current="page"'


def text(value: object) -> str:
    """Agent or user text for an element or an attribute value."""
    return escape_html(str(value))


def block(value: str) -> str:
    """Multi-line agent text for a ``<pre>``: escaped, and forged framing marked."""
    return escape_html(safe_agent_text(value))


def href(prefix: str, ident: str) -> str:
    """``/runs/<id>`` with the id percent-encoded (and the result escaped)."""
    return text(prefix + quote(ident, safe=""))


def page(title: str, body: str, *, nav: bool = True, current: str = "") -> str:
    """The HTML shell: our stylesheet and script only (the CSP allows nothing else).

    The navigation carries the live pending count (filled by the script) and the
    sticky banner that says a new request is waiting, wherever the page is scrolled.
    """
    links = "".join(
        f'<a href="{path}"{_CURRENT if path == current else ""}>{label}'
        + ('<span id="pending-count" class="count" hidden></span>' if path == "/" else "")
        + "</a>"
        for path, label in NAV
    )
    top = (
        '<header class="top"><a class="brand" href="/">baton</a>'
        f'<nav aria-label="main">{links}</nav>'
        '<span id="live-state" class="live" role="status">…</span></header>'
        '<div id="banner" class="banner" role="alert" hidden>'
        '<a id="banner-link" href="/"></a>'
        '<button type="button" id="notify-toggle" class="small" hidden>'
        "Notify me</button></div>"
        if nav
        else ""
    )
    return (
        '<!doctype html>\n<html lang="en"><head><meta charset="utf-8">'
        '<meta name="viewport" content="width=device-width, initial-scale=1">'
        f"<title>{text(title)}</title>"
        f'<link rel="icon" href="{assets.ICON_PATH}" type="image/svg+xml">'
        f'<link rel="stylesheet" href="{assets.CSS_PATH}">'
        f'<script src="{assets.JS_PATH}" defer></script>'
        f'</head><body data-title="{text(title)}">{top}<main>{body}</main></body></html>'
    )


def shell() -> str:
    """The page a navigation without the session's proof half gets: no data at all.

    Its script fetches the same URL again with the proof (``X-Baton-Proof``, kept in
    this origin's ``localStorage`` at login) and shows what comes back, or goes to
    ``/login`` when there is no proof or the session is gone (:mod:`baton.web.auth`).
    """
    return page("baton", '<p class="empty" id="shell">loading…</p>', nav=False)
