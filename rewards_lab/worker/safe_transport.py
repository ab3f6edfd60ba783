"""The webhook sender's connections: resolved, checked, pinned, and cut at one deadline per attempt.

`GuardedBackend` is an httpcore network backend. When httpcore opens a connection to `host:port`, it resolves
the host itself, refuses the whole name if ANY address is not allowed (`security/webhook_targets.py`), and
connects to a checked address: the socket goes to exactly the address that was checked (no second lookup a DNS
rebinding could answer differently), while httpcore still uses the URL's host for `Host` and for TLS (SNI and
certificate check). Redirects are never followed (httpcore has none) and no proxy from the environment is used.

The deadline is per attempt, not per phase: `attempt_deadline(seconds)` sets it for the calling thread, and
every resolve, connect, TLS handshake, write and read is given only the time left. A receiver that drips one
byte per second is cut when the deadline passes, whatever the per-read timeout.

Names are resolved by the backend's own `name_resolver.Resolver` (threads at least the delivery concurrency, a few
lookup slots per organization, one lookup per name, a short cache), so that one tenant's slow DNS cannot hold
the lookups of the others.
"""

from __future__ import annotations

import contextlib
import ipaddress
import select
import socket
import ssl
import time
from collections.abc import Iterable, Iterator
from contextvars import ContextVar
from typing import Any

import httpcore

from rewards_lab.security.webhook_targets import IPAddress, address_refusal
from rewards_lab.worker.name_resolver import FAILURES, RESOLVER_MIN_THREADS, Resolver, ResolveTimeout

_deadline: ContextVar[float | None] = ContextVar("webhook_attempt_deadline", default=None)
_owner: ContextVar[str] = ContextVar("webhook_attempt_owner", default="")


class BlockedAddress(httpcore.ConnectError):
    """The target resolves to an address the sender may not reach; no connection was attempted."""


class ResolutionFailed(httpcore.ConnectError):
    """The target's name did not resolve."""


class ConnectionRefused(httpcore.ConnectError):
    """Nothing listens at the target (httpcore's pool drops an exception's cause, so the class says it)."""


class TLSFailed(httpcore.ConnectError):
    """The TLS handshake or the certificate check failed."""


class DeadlineExceeded(httpcore.TimeoutException):
    """The attempt's total deadline passed."""


@contextlib.contextmanager
def attempt_deadline(seconds: float, *, owner: str = "") -> Iterator[None]:
    """Every network step the current thread takes inside this block ends by `seconds` from now; its name lookups
    count against `owner`'s resolver slots (the organization whose delivery this is)."""
    token = _deadline.set(time.monotonic() + seconds)
    owner_token = _owner.set(owner)
    try:
        yield
    finally:
        _owner.reset(owner_token)
        _deadline.reset(token)


def _time_left(timeout: float | None) -> float | None:
    deadline = _deadline.get()
    if deadline is None:
        return timeout
    left = deadline - time.monotonic()
    if left <= 0:
        raise DeadlineExceeded("the attempt's deadline passed")
    return left if timeout is None else min(timeout, left)


def resolve(host: str, port: int) -> list[tuple[int, IPAddress]]:
    """Every (family, address) the system resolver gives for `host` (literals of any notation included)."""
    infos = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM, proto=socket.IPPROTO_TCP)
    found: list[tuple[int, IPAddress]] = []
    for family, _, _, _, sockaddr in infos:
        address = ipaddress.ip_address(str(sockaddr[0]).split("%", 1)[0])
        if (family, address) not in found:
            found.append((family, address))
    return found


def open_socket(family: int, address: IPAddress, port: int, timeout: float | None) -> socket.socket:
    """A TCP connection to exactly this address (the one that was checked)."""
    sock = socket.socket(family, socket.SOCK_STREAM)
    try:
        sock.settimeout(timeout)
        sock.connect((str(address), port))
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    except BaseException:
        sock.close()
        raise
    return sock


class _SocketStream(httpcore.NetworkStream):
    """A blocking socket (plain or TLS) as an httpcore stream, with httpcore's exceptions."""

    def __init__(self, sock: socket.socket) -> None:
        self._sock = sock

    def read(self, max_bytes: int, timeout: float | None = None) -> bytes:
        try:
            self._sock.settimeout(timeout)
            return self._sock.recv(max_bytes)
        except TimeoutError:
            raise httpcore.ReadTimeout("the read timed out") from None
        except OSError as error:
            raise httpcore.ReadError("the read failed") from error

    def write(self, buffer: bytes, timeout: float | None = None) -> None:
        try:
            self._sock.settimeout(timeout)  # since Python 3.5 a bound on the whole sendall
            self._sock.sendall(buffer)
        except TimeoutError:
            raise httpcore.WriteTimeout("the write timed out") from None
        except OSError as error:
            raise httpcore.WriteError("the write failed") from error

    def close(self) -> None:
        self._sock.close()

    def start_tls(
        self, ssl_context: ssl.SSLContext, server_hostname: str | None = None, timeout: float | None = None
    ) -> httpcore.NetworkStream:
        try:
            self._sock.settimeout(timeout)
            return _SocketStream(ssl_context.wrap_socket(self._sock, server_hostname=server_hostname))
        except TimeoutError:
            self._sock.close()
            raise httpcore.ConnectTimeout("the TLS handshake timed out") from None
        except OSError as error:  # ssl.SSLError included
            self._sock.close()
            if isinstance(error, ssl.SSLError):
                raise TLSFailed("the TLS handshake failed") from error
            raise httpcore.ConnectError("the connection broke during the TLS handshake") from error

    def get_extra_info(self, info: str) -> Any:
        if info == "ssl_object" and isinstance(self._sock, ssl.SSLSocket):
            return self._sock._sslobj  # type: ignore[attr-defined]  # what httpcore reads the ALPN protocol from
        if info == "client_addr":
            return self._sock.getsockname()
        if info == "server_addr":
            return self._sock.getpeername()
        if info == "socket":
            return self._sock
        if info == "is_readable":
            return _is_readable(self._sock)
        return None


def _is_readable(sock: socket.socket) -> bool:
    """A pooled connection the peer closed (or sent unexpected bytes on) is readable while idle: do not reuse it."""
    if sock.fileno() < 0:
        return True
    poller = select.poll()
    poller.register(sock, select.POLLIN)
    return bool(poller.poll(0))


class _DeadlineStream(httpcore.NetworkStream):
    """A stream whose every step gets only the time left before the attempt's deadline."""

    def __init__(self, inner: httpcore.NetworkStream) -> None:
        self._inner = inner

    def read(self, max_bytes: int, timeout: float | None = None) -> bytes:
        return self._inner.read(max_bytes, _time_left(timeout))

    def write(self, buffer: bytes, timeout: float | None = None) -> None:
        self._inner.write(buffer, _time_left(timeout))

    def close(self) -> None:
        self._inner.close()

    def start_tls(
        self, ssl_context: ssl.SSLContext, server_hostname: str | None = None, timeout: float | None = None
    ) -> httpcore.NetworkStream:
        return _DeadlineStream(self._inner.start_tls(ssl_context, server_hostname, _time_left(timeout)))

    def get_extra_info(self, info: str) -> Any:
        return self._inner.get_extra_info(info)


class GuardedBackend(httpcore.NetworkBackend):
    """Resolve, refuse non-public addresses (unless `allow_private`), connect to the checked address."""

    def __init__(self, *, allow_private: bool, resolver_threads: int = RESOLVER_MIN_THREADS) -> None:
        self.allow_private = allow_private
        self._plain = httpcore.SyncBackend()
        # `resolve` looked up when called, so that tests can answer names without DNS
        self.resolver: Resolver[list[tuple[int, IPAddress]]] = Resolver(
            lambda host, port: resolve(host, port), threads=resolver_threads
        )

    def _addresses(self, host: str, port: int, timeout: float | None) -> list[tuple[int, IPAddress]]:
        try:
            addresses = self.resolver.resolve(host, port, owner=_owner.get(), timeout_s=_time_left(timeout))
        except ResolveTimeout:
            raise DeadlineExceeded("name resolution did not finish in time") from None
        except FAILURES:
            raise ResolutionFailed("the name did not resolve") from None
        if not addresses:
            raise ResolutionFailed("the name did not resolve")
        if any(address_refusal(address, allow_private=self.allow_private) for _, address in addresses):
            raise BlockedAddress("the target resolves to an address that is not publicly routable")
        return addresses

    def connect_tcp(
        self,
        host: str,
        port: int,
        timeout: float | None = None,
        local_address: str | None = None,
        socket_options: Iterable[Any] | None = None,
    ) -> httpcore.NetworkStream:
        last_error: OSError | None = None
        for family, address in self._addresses(host, port, timeout):
            try:
                sock = open_socket(family, address, port, _time_left(timeout))
            except TimeoutError:
                raise httpcore.ConnectTimeout("the connection timed out") from None
            except OSError as error:
                last_error = error
                continue
            return _DeadlineStream(_SocketStream(sock))
        if isinstance(last_error, ConnectionRefusedError):
            raise ConnectionRefused("the connection was refused")
        raise httpcore.ConnectError("the connection failed")

    def connect_unix_socket(
        self, path: str, timeout: float | None = None, socket_options: Iterable[Any] | None = None
    ) -> httpcore.NetworkStream:
        raise BlockedAddress("unix sockets are never a webhook target")

    def sleep(self, seconds: float) -> None:
        self._plain.sleep(seconds)
