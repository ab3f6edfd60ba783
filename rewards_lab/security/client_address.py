"""The client address that rate limits and the login guard count by.

An IPv6 host usually holds a whole /64 (privacy addresses change within it at will), so IPv6 clients are counted
per /64 network; IPv4 clients per address. Anything else (no peer, a Unix socket) is counted as given.
"""

from __future__ import annotations

import functools
import ipaddress

IPV6_PREFIX_BITS = 64
_CACHED_ADDRESSES = 4096  # parsing costs microseconds; POST /events asks once per request


@functools.lru_cache(maxsize=_CACHED_ADDRESSES)
def client_key(host: str) -> str:
    """`192.0.2.7` as is; `2001:db8::1` as `2001:db8::/64`; text that is no IP address as is."""
    try:
        address = ipaddress.ip_address(host)
    except ValueError:
        return host
    if isinstance(address, ipaddress.IPv6Address) and address.ipv4_mapped is None:
        return str(ipaddress.IPv6Network((address, IPV6_PREFIX_BITS), strict=False))
    if isinstance(address, ipaddress.IPv6Address) and address.ipv4_mapped is not None:
        return str(address.ipv4_mapped)
    return str(address)
