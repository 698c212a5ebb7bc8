"""The addresses a server listening on HOST can be reached at, as a person types them: a
wildcard (`0.0.0.0`, `::`) is no address to browse to, so it stands for each address of
this host's interfaces (of its family; `::` also takes IPv4 on Linux's dual stack),
link-local ones left out, the loopback ones last, or the host's name when none is found."""

from __future__ import annotations

import ipaddress
import socket

import psutil


def reachable_hosts(host: str) -> list[str]:
    """The hosts to put in a URL for a server listening on `host`, IPv6 in brackets."""
    try:
        listening = ipaddress.ip_address(host)
    except ValueError:
        return [_bracketed(host)]
    if not listening.is_unspecified:
        return [_bracketed(host)]
    found: list[ipaddress.IPv4Address | ipaddress.IPv6Address] = []
    for addresses in psutil.net_if_addrs().values():
        for address in addresses:
            if address.family not in (socket.AF_INET, socket.AF_INET6):
                continue
            try:
                ip = ipaddress.ip_address(address.address.split("%", 1)[0])
            except ValueError:
                continue
            if ip.is_link_local or (listening.version == 4 and ip.version == 6):
                continue
            if ip not in found:
                found.append(ip)
    # Off this host first: that is what the wildcard was asked for.
    found.sort(key=lambda ip: (ip.is_loopback, ip.version))
    return [_bracketed(str(ip)) for ip in found] or [socket.gethostname()]


def _bracketed(host: str) -> str:
    return f"[{host}]" if ":" in host else host
