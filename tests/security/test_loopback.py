"""The one loopback rule (model endpoints, the Cursor SDK bridge's address)."""

from __future__ import annotations

import pytest

from baton.security.launch_env import is_loopback_url
from baton.security.loopback import is_loopback_name


@pytest.mark.parametrize(
    "host", ["localhost", "LocalHost", "127.0.0.1", "127.8.9.10", "::1", "[::1]"]
)
def test_loopback_names(host: str) -> None:
    assert is_loopback_name(host)


@pytest.mark.parametrize(
    "host", ["", "example.com", "10.0.0.1", "0.0.0.0", "::", "[::ffff:10.0.0.1]", "localhost.evil"]
)
def test_other_names_are_not_loopback(host: str) -> None:
    assert not is_loopback_name(host)


@pytest.mark.parametrize(
    ("url", "loopback"),
    [
        ("http://127.0.0.1:8080/v1", True),
        ("https://[::1]/", True),
        ("http://localhost", True),
        ("ftp://127.0.0.1/", False),
        ("http://10.0.0.1/", False),
        ("http:///path", False),
        (None, False),
    ],
)
def test_a_loopback_url_is_http_on_a_loopback_name(url: str | None, loopback: bool) -> None:
    assert is_loopback_url(url) is loopback
