"""Host rules both sides apply: which addresses are loopback."""

from __future__ import annotations

import ipaddress


def is_loopback(host: str) -> bool:
    """True for a loopback address ('[::1]' too) or 'localhost'; False for other names."""
    if host.lower() == "localhost":
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False
