"""Where a step may send a request (http, webhook, notification, request, metrics, email): one pure decision over
the address a name resolved to, made for every address the name has and again for every redirect; the caller
then connects to the address that was checked (netcalls.py), so a name cannot resolve elsewhere in between.

Always refused, whatever the flags say: link-local addresses (169.254.0.0/16, fe80::/10: cloud metadata lives
there), the other cloud metadata addresses and names, unspecified, multicast and broadcast addresses (0.0.0.0
reaches the local host), this pod's own addresses and the controller's own listening ports. Refused by flag, as
KubeVela's workflow does: loopback (on by default) and private ranges (off by default: in-cluster services live
there). An allow-list entry (an address or network, optionally with a port) lifts only the flags' refusals.
IPv4 addresses written inside IPv6 ones (::ffff:a.b.c.d, NAT64, 6to4, Teredo) are judged as the IPv4 address."""

from __future__ import annotations

import ipaddress
from dataclasses import dataclass, field
from typing import Union

Address = Union[ipaddress.IPv4Address, ipaddress.IPv6Address]
Network = Union[ipaddress.IPv4Network, ipaddress.IPv6Network]

# cloud metadata endpoints outside link-local (Alibaba Cloud, AWS over IPv6) and their well-known names
METADATA_ADDRESSES = frozenset(ipaddress.ip_address(a) for a in ("100.100.100.200", "fd00:ec2::254"))
METADATA_HOSTS = frozenset(("metadata.google.internal", "metadata.goog", "metadata", "instance-data",
                            "instance-data.ec2.internal", "metadata.azure.com", "metadata.tencentyun.com"))
_LINK_LOCAL = (ipaddress.ip_network("169.254.0.0/16"), ipaddress.ip_network("fe80::/10"))
_NAT64 = ipaddress.ip_network("64:ff9b::/96")
_V4_COMPATIBLE = ipaddress.ip_network("::/96")
# what Python's is_private counts beside the private ranges proper, judged by the other rules instead
_NOT_PRIVATE_HERE = (ipaddress.ip_network("127.0.0.0/8"), ipaddress.ip_network("::1/128"))


class Refused(Exception):
    """The destination is not allowed; the message says what was refused and why."""


@dataclass(frozen=True)
class Allowed:
    network: Network
    port: int | None = None

    def covers(self, address: Address, port: int) -> bool:
        return address in self.network and (self.port is None or self.port == port)


def parse_allowed(text: str) -> Allowed:
    """`127.0.0.1`, `10.0.0.0/8`, `127.0.0.1:8080`, `[::1]:8080` or `[fd00::/8]`; ValueError says what is wrong."""
    item = text.strip()
    port: int | None = None
    if item.startswith("["):
        close = item.find("]")
        if close < 0:
            raise ValueError(f"{text!r}: no closing bracket")
        rest = item[close + 1:]
        item = item[1:close]
        if rest:
            if not rest.startswith(":"):
                raise ValueError(f"{text!r}: expected :PORT after the bracket")
            port = _port(rest[1:], text)
    elif item.count(":") == 1:
        item, port_text = item.split(":")
        port = _port(port_text, text)
    try:
        return Allowed(ipaddress.ip_network(item, strict=False), port)
    except ValueError:
        raise ValueError(f"{text!r}: not an IP address or network (with an optional :PORT)") from None


def _port(text: str, whole: str) -> int:
    if not text.isdigit() or not 0 < int(text) < 65536:
        raise ValueError(f"{whole!r}: the port must be 1-65535")
    return int(text)


def embedded_ipv4(address: Address) -> ipaddress.IPv4Address | None:
    """The IPv4 address an IPv6 address carries (mapped, NAT64, 6to4, Teredo, the deprecated compatible form)."""
    if address.version != 6:
        return None
    if address.ipv4_mapped is not None:
        return address.ipv4_mapped
    if address.sixtofour is not None:
        return address.sixtofour
    if address.teredo is not None:
        return address.teredo[1]
    if address in _NAT64 or (address in _V4_COMPATIBLE and int(address) > 1):
        return ipaddress.IPv4Address(int(address) & 0xFFFFFFFF)
    return None


@dataclass(frozen=True)
class EgressPolicy:
    block_loopback: bool = True
    block_private: bool = False
    allow: tuple[Allowed, ...] = ()
    own_ports: frozenset[int] = frozenset()  # where this controller listens (metrics, health, webhooks)
    own_addresses: frozenset[Address] = field(default_factory=frozenset)  # this pod's addresses

    def check_host(self, host: str) -> None:
        """A name refused before it is resolved (cloud metadata services' names)."""
        name = host.strip("[]").rstrip(".").lower()
        if name in METADATA_HOSTS:
            raise Refused(f"{host} is a cloud metadata service: refused")

    def check(self, address: Address, port: int, host: str = "") -> None:
        """Refused when `address:port` may not be contacted; `host` is the name it came from, for the message."""
        what = f"{host} ({address})" if host and host.strip("[]") != str(address) else str(address)
        reason = self.refusal(address, port)
        if reason is None:
            inner = embedded_ipv4(address)
            if inner is not None:
                reason = self.refusal(inner, port)
                if reason is not None:
                    reason = f"{reason} (IPv4 {inner} inside)"
        if reason is not None:
            raise Refused(f"{what} port {port}: {reason}: refused")

    def refusal(self, address: Address, port: int) -> str | None:
        if any(address in net for net in _LINK_LOCAL):
            return "a link-local address (where cloud metadata lives)"
        if address in METADATA_ADDRESSES:
            return "a cloud metadata address"
        if address.is_unspecified or address.is_multicast or address == ipaddress.IPv4Address("255.255.255.255"):
            return "not a unicast address"
        if address in self.own_addresses:
            return "an address of the controller's own pod"
        if port in self.own_ports and (address.is_loopback or address in self.own_addresses):
            return "a port the controller itself listens on"
        if any(a.covers(address, port) for a in self.allow):
            return None
        if address.is_loopback and self.block_loopback:
            return "a loopback address (--workflow-http-block-loopback)"
        if self.block_private and _private(address):
            return "a private address (--workflow-http-block-private)"
        return None


def _private(address: Address) -> bool:
    return (address.is_private or address.is_reserved) and not any(address in n for n in _NOT_PRIVATE_HERE)
