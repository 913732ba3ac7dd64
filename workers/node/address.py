"""Which address a node advertises to its peers, and on which interface.

Without settings a worker takes the address its own connection to the API leaves from
(as Ray's workers do toward their head): that interface reaches the control plane's
network, so it is the one peers on that network can reach. The hostname is no guide:
it resolves to a loopback address on stock Debian/Ubuntu and in most containers.
"""

from __future__ import annotations

import ipaddress
import socket
from dataclasses import dataclass
from urllib.parse import urlsplit

import psutil

#: the setting's value that asks for the derived address
DERIVED = "derived"


@dataclass(frozen=True)
class Advertised:
    address: str
    interface: str | None
    how: str  # "derived from the route to <api host>" or "set by TRAINBOARD_ADDRESS"


def api_host(api_url: str) -> str:
    """The host part of the API URL ('127.0.0.1' when the URL names none)."""
    return urlsplit(api_url).hostname or "127.0.0.1"


def route_source(host: str, port: int = 9) -> str:
    """The local address the kernel picks to reach `host` (a UDP connect sends nothing)."""
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    info = socket.getaddrinfo(host, port, family, socket.SOCK_DGRAM)
    with socket.socket(family, socket.SOCK_DGRAM) as probe:
        probe.connect(info[0][4])
        return str(probe.getsockname()[0])


def _resolved(host: str) -> str:
    """An IP address as is; a name as it resolves here (itself if it does not)."""
    try:
        return str(ipaddress.ip_address(host))
    except ValueError:
        pass
    try:
        return socket.gethostbyname(host)
    except OSError:
        return host


def interface_of(address: str) -> str | None:
    """The name of the interface holding `address`, if one does."""
    for name, addresses in psutil.net_if_addrs().items():
        if any(a.address.split("%")[0] == address for a in addresses):
            return name
    return None


def addresses_of(interface: str) -> list[str]:
    """The IPv4 addresses of an interface (IPv6 after them)."""
    found = psutil.net_if_addrs().get(interface, [])
    v4 = [a.address for a in found if a.family == socket.AF_INET]
    v6 = [a.address.split("%")[0] for a in found if a.family == socket.AF_INET6]
    return v4 + v6


def advertised(*, api_url: str, address: str, interface: str) -> Advertised:
    """The address and interface this node advertises (settings first, else derived)."""
    if address and address != DERIVED:
        held = interface or interface_of(_resolved(address))
        return Advertised(address, held, "set by TRAINBOARD_ADDRESS")
    if interface:
        found = addresses_of(interface)
        if not found:
            raise ValueError(f"TRAINBOARD_INTERFACE={interface!r}: no interface with an address")
        return Advertised(found[0], interface, "the address of TRAINBOARD_INTERFACE")
    host = api_host(api_url)
    source = route_source(host)
    return Advertised(source, interface_of(source), f"derived from the route to {host}")
