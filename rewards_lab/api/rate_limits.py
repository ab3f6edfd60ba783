"""Rate limits in fixed one-minute windows: per plan for each (organization, environment), and per client address
for requests that never authenticate (no key, a wrong key, a failed login, an unknown path).

The server process owns its DuckDB file, so one in-memory counter per bucket is the whole truth. Buckets come in
families, each in a table of its own so that one family's flood never crowds out another's counters: `address/...`
(unauthenticated and failed-authentication requests, `UNAUTHENTICATED_LIMIT_PER_MINUTE` per address),
`health/...` (the health probes, `HEALTH_LIMIT_PER_MINUTE` per address) and tenants (every other bucket).

Memory is bounded: a table holds at most `MAX_BUCKETS` counters. A counter of a past window is dropped when room
is needed (the table is kept in order of last use, so those are at its front); when every counter belongs to the
current window, a NEW bucket is counted in its family's shared overflow counter instead of being given one. A
flood of new keys (many addresses) therefore never resets an existing counter; it only shares one budget among
the newcomers until the window ends. Addresses are counted as `client_address.client_key` gives them (IPv6 per
/64).
"""

from __future__ import annotations

import threading
import time
from collections import OrderedDict
from collections.abc import Callable
from dataclasses import dataclass

from rewards_lab.service.client_address import client_key

WINDOW_S = 60
PUBLIC_LIMIT_PER_MINUTE = 100
# Requests per minute one client address may make without authenticating successfully (missing or wrong
# credentials, failed logins, unknown paths, the OpenAPI document); `serve --unauthenticated-limit-per-minute`
# changes it (e.g. many clients behind one NAT address, or a fuzzing test). Past it, EVERY request from the address is
# refused before authentication until the window ends: guessing keys or passwords costs a window per budget.
UNAUTHENTICATED_LIMIT_PER_MINUTE = PUBLIC_LIMIT_PER_MINUTE
HEALTH_LIMIT_PER_MINUTE = 600  # per address, for the health probes of load balancers (10 a second)
MAX_BUCKETS = 100_000  # counters per family (~250 bytes each, measured): about 25 MB per family at most
ADDRESS_PREFIX = "address/"
HEALTH_PREFIX = "health/"
OVERFLOW = "overflow"


@dataclass(frozen=True, slots=True)
class RateState:
    limit: int
    remaining: int
    reset_s: int  # seconds until the window ends
    exceeded: bool

    def headers(self) -> dict[str, str]:
        return {
            "RateLimit-Limit": str(self.limit),
            "RateLimit-Remaining": str(self.remaining),
            "RateLimit-Reset": str(self.reset_s),
        }

    def raw_headers(self) -> list[tuple[bytes, bytes]]:
        """`headers()` as ASGI header pairs (lower-case names)."""
        return [
            (b"ratelimit-limit", b"%d" % self.limit),
            (b"ratelimit-remaining", b"%d" % self.remaining),
            (b"ratelimit-reset", b"%d" % self.reset_s),
        ]


def address_bucket(host: str) -> str:
    """The bucket of a client address's unauthenticated requests."""
    return ADDRESS_PREFIX + client_key(host)


def _family(bucket: str) -> str:
    for prefix in (ADDRESS_PREFIX, HEALTH_PREFIX):
        if bucket.startswith(prefix):
            return prefix
    return "tenant/"


def _normalised(bucket: str, family: str) -> str:
    if family == "tenant/":
        return bucket
    return family + client_key(bucket[len(family) :])


class RateLimiter:
    def __init__(
        self,
        max_buckets: int = MAX_BUCKETS,
        clock: Callable[[], float] = time.time,
        *,
        unauthenticated_limit_per_minute: int = UNAUTHENTICATED_LIMIT_PER_MINUTE,
    ) -> None:
        """`unauthenticated_limit_per_minute` is the operator's budget per address (`rewards-lab serve
        --unauthenticated-limit-per-minute`): it replaces the limit callers pass for `address/` buckets."""
        self.unauthenticated_limit_per_minute = unauthenticated_limit_per_minute
        self._lock = threading.Lock()
        self._max_buckets = max_buckets
        self._clock = clock
        self._tables: dict[str, OrderedDict[str, tuple[int, int]]] = {}  # family -> bucket -> (window, count)

    def _slot(self, bucket: str, window: int) -> tuple[OrderedDict[str, tuple[int, int]], str]:
        """The table and the key that count `bucket` in `window` (its own, or its family's overflow)."""
        family = _family(bucket)
        key = _normalised(bucket, family)
        table = self._tables.setdefault(family, OrderedDict())
        if key in table:
            return table, key
        while table and next(iter(table.values()))[0] < window:  # front: least recently used, oldest windows
            table.popitem(last=False)
        overflow = family + OVERFLOW
        if len(table) - (overflow in table) >= self._max_buckets:
            return table, overflow  # full of live counters: never evict one, share the overflow counter
        return table, key

    def _count(self, table: OrderedDict[str, tuple[int, int]], key: str, window: int) -> int:
        entry = table.get(key)
        return entry[1] if entry is not None and entry[0] == window else 0

    def _limit(self, bucket: str, limit: int) -> int:
        return self.unauthenticated_limit_per_minute if bucket.startswith(ADDRESS_PREFIX) else limit

    def charge(self, bucket: str, limit: int) -> RateState:
        """Count one request against `bucket`; `exceeded` once more than `limit` arrive in this window."""
        limit = self._limit(bucket, limit)
        now = self._clock()
        window = int(now // WINDOW_S)
        with self._lock:
            table, key = self._slot(bucket, window)
            count = self._count(table, key, window) + 1
            table[key] = (window, count)
            table.move_to_end(key)
        return self._state(limit, count, now, window, count > limit)

    def peek(self, bucket: str, limit: int) -> RateState:
        """The state of `bucket` without counting; `exceeded` when its budget is spent (the next is over)."""
        limit = self._limit(bucket, limit)
        now = self._clock()
        window = int(now // WINDOW_S)
        with self._lock:
            table, key = self._slot(bucket, window)
            count = self._count(table, key, window)
        return self._state(limit, count, now, window, count >= limit)

    @staticmethod
    def _state(limit: int, count: int, now: float, window: int, exceeded: bool) -> RateState:
        reset_s = max(1, int((window + 1) * WINDOW_S - now + 0.999))
        return RateState(limit, max(0, limit - count), reset_s, exceeded)

    def tracked(self) -> int:
        """How many counters are held (all families)."""
        with self._lock:
            return sum(len(table) for table in self._tables.values())
