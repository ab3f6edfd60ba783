"""Which webhook targets a tenant may reach: the URL rule at registration, the address rule at connect time.

A tenant names the URL; the service's host opens the connection. So the rule is about addresses, not spellings:
`https://2130706433/`, `0x7f000001`, `127.1`, `017700000001`, `0`, `[::1]` and `[::ffff:127.0.0.1]` all mean
loopback. Registration parses every IPv4 notation the resolver accepts (the WHATWG URL rule: a host whose last
label is a number is an IPv4 address) and refuses non-public literals; the sender (`worker/safe_transport.py`)
resolves every name when it connects and refuses any non-public address, so names that resolve to private
addresses (`localhost`, `/etc/hosts`, a DNS record) are caught there.

Loopback, RFC 1918, shared (100.64.0.0/10) and unique-local IPv6 targets are allowed only when the operator turns
on `REWARDS_LAB_WEBHOOK_ALLOW_PRIVATE=1` (or `rewards-lab serve --allow-private-webhook-targets`), for local
development and the lab's local service. Link-local (cloud metadata at 169.254.169.254), unspecified, multicast,
broadcast and reserved addresses are refused even then.
"""

from __future__ import annotations

import ipaddress
import os
import re
from collections.abc import Mapping
from urllib.parse import urlsplit

from rewards_lab.contract.errors import ServiceError

IPAddress = ipaddress.IPv4Address | ipaddress.IPv6Address

ALLOW_PRIVATE_ENV = "REWARDS_LAB_WEBHOOK_ALLOW_PRIVATE"
_TRUE = frozenset({"1", "true", "yes", "on"})
MAX_HOST_LENGTH = 253
_LABEL = re.compile(r"^[a-z0-9_](?:[a-z0-9_-]{0,61}[a-z0-9_])?$")

# Reachable only with the operator's setting on.
PRIVATE_NETWORKS = tuple(
    ipaddress.ip_network(net)
    for net in ("127.0.0.0/8", "10.0.0.0/8", "172.16.0.0/12", "192.168.0.0/16", "100.64.0.0/10", "::1/128", "fc00::/7")
)
# Never reachable, whatever `is_global` says in this Python version (it calls multicast and 6to4/NAT64 global).
ALWAYS_REFUSED_NETWORKS = tuple(
    ipaddress.ip_network(net)
    for net in (
        "0.0.0.0/8",  # "this network": 0.0.0.0 reaches the host itself on Linux
        "169.254.0.0/16",  # link-local: cloud metadata services
        "224.0.0.0/4",  # multicast
        "240.0.0.0/4",  # reserved, and 255.255.255.255
        "::/128",
        "::/96",  # IPv4-compatible (deprecated)
        "64:ff9b:1::/48",  # local-use NAT64
        "fe80::/10",  # link-local
        "fec0::/10",  # site-local (deprecated)
        "ff00::/8",  # multicast
    )
)


def private_targets_allowed(environ: Mapping[str, str] | None = None) -> bool:
    """The operator's setting: `REWARDS_LAB_WEBHOOK_ALLOW_PRIVATE` is 1/true/yes/on. Off by default."""
    env = os.environ if environ is None else environ
    return env.get(ALLOW_PRIVATE_ENV, "").strip().lower() in _TRUE


def _embedded_ipv4(address: IPAddress) -> list[ipaddress.IPv4Address]:
    """IPv4 addresses an IPv6 address carries (mapped, 6to4, Teredo, NAT64 well-known prefix)."""
    if not isinstance(address, ipaddress.IPv6Address):
        return []
    found: list[ipaddress.IPv4Address] = []
    if address.ipv4_mapped is not None:
        found.append(address.ipv4_mapped)
    if address.sixtofour is not None:
        found.append(address.sixtofour)
    if address.teredo is not None:
        found.extend(address.teredo)
    if address in ipaddress.ip_network("64:ff9b::/96"):
        found.append(ipaddress.IPv4Address(int(address) & 0xFFFFFFFF))
    return found


def _refusal_of_one(address: IPAddress, allow_private: bool) -> str | None:
    if any(address in net for net in PRIVATE_NETWORKS if net.version == address.version):  # first: ::1 is in ::/96
        return None if allow_private else "a loopback or private address"
    if any(address in net for net in ALWAYS_REFUSED_NETWORKS if net.version == address.version):
        return "a reserved, link-local, multicast or unspecified address"
    if not address.is_global or address.is_multicast or address.is_reserved:
        return "an address that is not publicly routable"
    return None


def address_refusal(address: IPAddress, *, allow_private: bool) -> str | None:
    """None when the sender may connect to `address`; otherwise why not (for logs, never shown to a tenant)."""
    for candidate in (address, *_embedded_ipv4(address)):
        reason = _refusal_of_one(candidate, allow_private)
        if reason is not None:
            return reason
    return None


def _ipv4_part(text: str) -> int | None:
    """One part of an IPv4 literal as inet_aton reads it: decimal, 0x hex, or 0-prefixed octal."""
    if re.fullmatch(r"0[xX][0-9a-fA-F]*", text):
        return int(text[2:] or "0", 16)
    if re.fullmatch(r"0[0-7]+", text):
        return int(text, 8)
    if re.fullmatch(r"[0-9]+", text):
        return int(text, 10)
    return None


def parse_ipv4_literal(host: str) -> ipaddress.IPv4Address | None:
    """The IPv4 address a host string means in any notation (`127.1`, `0x7f000001`, `2130706433`, `017700000001`),
    None when the host is a name. A host whose last label is numeric but is no valid address is refused (a URL
    parser would refuse it; a resolver might read it differently)."""
    labels = host.split(".")
    if labels and labels[-1] == "" and len(labels) > 1:
        labels = labels[:-1]  # one trailing dot
    if not labels or _ipv4_part(labels[-1]) is None:
        return None
    parts = [_ipv4_part(label) for label in labels]
    if len(parts) > 4 or any(part is None for part in parts):
        raise ServiceError("webhook_url_invalid", "the host is not a valid IPv4 address", field="url")
    numbers = [int(part) for part in parts if part is not None]
    *leading, last = numbers
    if any(n > 255 for n in leading) or last >= 256 ** (5 - len(numbers)):
        raise ServiceError("webhook_url_invalid", "the host is not a valid IPv4 address", field="url")
    value = last
    for index, number in enumerate(leading):
        value += number << (8 * (3 - index))
    return ipaddress.IPv4Address(value)


def _refuse(message: str) -> ServiceError:
    return ServiceError("webhook_url_invalid", message, field="url")


def _host(raw_host: str, bracketed: bool) -> tuple[str, IPAddress | None]:
    """The host in canonical form (IDNA, lower case, dotted-quad IPv4, compressed IPv6) and its address if literal."""
    if bracketed:
        if "%" in raw_host:
            raise _refuse("the host may not carry an IPv6 zone")
        try:
            address6 = ipaddress.IPv6Address(raw_host)
        except ValueError:
            raise _refuse("the host is not a valid IPv6 address") from None
        return f"[{address6.compressed}]", address6
    try:
        ascii_host = raw_host.encode("idna").decode("ascii").lower()
    except UnicodeError:
        raise _refuse("the host is not a valid name") from None
    address4 = parse_ipv4_literal(ascii_host)
    if address4 is not None:
        return str(address4), address4
    name = ascii_host.removesuffix(".")
    if not name or len(name) > MAX_HOST_LENGTH or not all(_LABEL.match(label) for label in name.split(".")):
        raise _refuse("the host is not a valid name")
    return name, None


def normalise_url(url: str, environment: str, *, allow_private: bool) -> str:
    """The URL as stored: http(s) only (production: https), no credentials, canonical host and port, no fragment.
    Hosts that are non-public address literals in any notation, and `localhost` names, are refused unless the
    operator allows private targets. Names are resolved only when sending."""
    text = url.strip()
    if any(ord(ch) < 0x21 or ord(ch) == 0x7F for ch in text):
        raise _refuse("the URL may not contain spaces or control characters")
    try:
        parts = urlsplit(text)
        port = parts.port
    except ValueError:
        raise _refuse("the URL is not valid") from None
    scheme = parts.scheme.lower()
    if scheme not in ("http", "https") or not parts.hostname:
        raise _refuse("the URL must be http(s)://host/...")
    if environment == "production" and scheme != "https":
        raise _refuse("production endpoints must use https")
    if "@" in parts.netloc:
        raise _refuse("the URL may not contain credentials")
    bracketed = parts.netloc.startswith("[")
    host, address = _host(parts.hostname, bracketed)
    if address is not None:
        if address_refusal(address, allow_private=allow_private) is not None:
            raise _refuse("the URL names an address that is not publicly routable")
    elif (host == "localhost" or host.endswith(".localhost")) and not allow_private:
        raise _refuse("the URL names a loopback host")
    netloc = host if port is None or port == (443 if scheme == "https" else 80) else f"{host}:{port}"
    path = parts.path or "/"
    return f"{scheme}://{netloc}{path}" + (f"?{parts.query}" if parts.query else "")
