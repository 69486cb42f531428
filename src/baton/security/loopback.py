"""Loopback addresses: the one rule for "only this machine can reach it".

A model endpoint a profile may name, the Cursor SDK bridge's listening address and the
dashboard's bind all must stay on this machine; they ask this module, so the rule
(``localhost``, ``127.0.0.0/8``, ``::1``) is written once.
"""

from __future__ import annotations

import ipaddress

__all__ = ["is_loopback_name"]


def is_loopback_name(host: str) -> bool:
    """Whether ``host`` (a name or an IP, IPv6 with or without brackets) is loopback."""
    name = host.lower().strip("[]")
    if name == "localhost":
        return True
    try:
        return ipaddress.ip_address(name).is_loopback
    except ValueError:
        return False
