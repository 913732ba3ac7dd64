"""Where a webhook may POST: public addresses only, unless the operator allow-lists more.

A URL's host is resolved once, every address it resolves to is checked, and the connection
goes to a checked address (the Host header and TLS server name stay the URL's host), so a
name that answers a public address at creation and 127.0.0.1 at delivery (DNS rebinding)
reaches nothing internal. Every textual form of an address (`127.1`, `2130706433`,
`0x7f000001`, `0177.0.0.1`, `[::ffff:127.0.0.1]`) resolves to the address it names
before the check, so none of them slips past it.
"""

from __future__ import annotations

import ipaddress
import socket
from collections.abc import Iterable
from dataclasses import dataclass

IPAddress = ipaddress.IPv4Address | ipaddress.IPv6Address
IPNetwork = ipaddress.IPv4Network | ipaddress.IPv6Network

#: IPv6 prefixes that carry an IPv4 address in their low 32 bits (NAT64, well-known and local)
_NAT64 = (ipaddress.ip_network("64:ff9b::/96"), ipaddress.ip_network("64:ff9b:1::/48"))


class DestinationRefused(ValueError):
    """A webhook URL whose host is not one the deployment lets webhooks reach."""


def _embedded(address: IPAddress) -> list[IPAddress]:
    """The address and every IPv4 address it carries (IPv4-mapped, 6to4, Teredo, NAT64)."""
    found: list[IPAddress] = [address]
    if isinstance(address, ipaddress.IPv6Address):
        if address.ipv4_mapped is not None:
            found.append(address.ipv4_mapped)
        if address.sixtofour is not None:
            found.append(address.sixtofour)
        if address.teredo is not None:
            found.extend(address.teredo)
        if any(address in net for net in _NAT64):
            found.append(ipaddress.IPv4Address(int(address) & 0xFFFFFFFF))
    return found


def is_public(address: IPAddress) -> bool:
    """Whether an address is globally routable unicast: not loopback, link-local (cloud
    metadata), private, shared, multicast, unspecified or reserved, nor carrying one."""
    return all(
        a.is_global and not (a.is_multicast or a.is_reserved or a.is_unspecified)
        for a in _embedded(address)
    )


@dataclass(frozen=True)
class AllowList:
    """TRAINBOARD_WEBHOOK_ALLOWED_HOSTS, parsed: host names, IPs/CIDRs, and `*`.

    Empty (or `*` among the entries): any public address. A listed host name or network
    is reachable whatever its addresses are (loopback and private ones included): that is
    how an operator opens an internal receiver. Without `*`, only listed names and
    networks are reachable at all.
    """

    names: frozenset[str]
    networks: tuple[IPNetwork, ...]
    any_public: bool

    @classmethod
    def parse(cls, setting: str) -> AllowList:
        items = [i.strip().lower() for i in setting.split(",") if i.strip()]
        names: set[str] = set()
        networks: list[IPNetwork] = []
        for item in items:
            try:
                networks.append(ipaddress.ip_network(item.strip("[]"), strict=False))
            except ValueError:
                names.add(item.rstrip("."))
        any_public = not items or "*" in names
        return cls(frozenset(names - {"*"}), tuple(networks), any_public)

    def check(self, host: str, addresses: Iterable[IPAddress]) -> list[IPAddress]:
        """The addresses a delivery to host may connect to; DestinationRefused if none."""
        host = host.lower().rstrip(".").strip("[]")
        found = list(dict.fromkeys(addresses))
        if not found:
            raise DestinationRefused(f"host {host!r} does not resolve")
        if host in self.names:
            return found
        for address in found:
            listed = any(address in network for network in self.networks)
            if listed:
                continue
            if not self.any_public:
                raise DestinationRefused(
                    f"host {host!r} is not in TRAINBOARD_WEBHOOK_ALLOWED_HOSTS"
                )
            if not is_public(address):
                raise DestinationRefused(
                    f"host {host!r} is an internal address (loopback, private, link-local, "
                    "multicast or reserved); an operator may allow it in "
                    "TRAINBOARD_WEBHOOK_ALLOWED_HOSTS"
                )
        return found


def resolve(host: str, port: int) -> list[IPAddress]:
    """Every address host resolves to (an IP literal in any form: itself), in order."""
    try:
        infos = socket.getaddrinfo(host.strip("[]"), port, type=socket.SOCK_STREAM)
    except (OSError, UnicodeError):
        return []
    return [ipaddress.ip_address(str(info[4][0]).split("%", 1)[0]) for info in infos]


def checked_addresses(allow: AllowList, host: str, port: int) -> list[IPAddress]:
    """Resolve host once and check every address; the ones a connection may use."""
    return allow.check(host, resolve(host, port))
