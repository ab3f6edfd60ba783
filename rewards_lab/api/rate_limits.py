"""Rate limits in fixed one-minute windows: per plan for each (organization, environment), and per client address
for requests that never authenticate (no key, a wrong key, a failed login, an unknown path).

The server process owns its DuckDB file, so one in-memory counter per bucket is the whole truth. Buckets come in
families, each in a table of its own so that one family's flood never crowds out another's counters: `address/...`
(unauthenticated and failed-authentication requests, `UNAUTHENTICATED_LIMIT_PER_MINUTE` per address),
`health/...` (the health probes, `HEALTH_LIMIT_PER_MINUTE` per address) and tenants (every other bucket).

Memory is bounded: a table holds at most `MAX_BUCKETS` counters, all of the current window (a new window empties
the tables: fixed windows, so no older counter means anything). When a table is full, a NEW bucket takes the slot
of the oldest counter that has counted ONE request (a flood of new keys churns among its own one-request counters);
a counter that has counted more is never evicted, so a flood of new keys resets no counter that matters and a
spent address stays refused. Only when every counter has counted more than one request is a new bucket left
without a counter: its request is tallied in its family's `overflowed` count and answered as a fresh counter's
first request. Nothing is ever refused by a shared counter: an address is refused before authentication only by
ITS OWN spent counter (`peek`), so a client with a valid key from an address the table does not hold always
reaches authentication. Addresses are counted as `client_address.client_key` gives them (IPv6 per /64).

Several processes serving one PostgreSQL database share their counters: `SharedRateLimiter` keeps the same buckets,
families, limits, windows and headers, with each counter a row of `rate_counters` (store/shared_state.py), so a
limit of N a minute allows N across every process, not N per process. See its docstring for what differs.
"""

from __future__ import annotations

import logging
import threading
import time
from collections import OrderedDict
from collections.abc import Callable
from dataclasses import dataclass

from rewards_lab.security.client_address import client_key
from rewards_lab.store.shared_state import SharedState, SharedStateUnavailable

log = logging.getLogger(__name__)

WINDOW_S = 60
PUBLIC_LIMIT_PER_MINUTE = 100
# Requests per minute one client address may make without authenticating successfully (missing or wrong
# credentials, failed logins, unknown paths, the OpenAPI document); `serve --unauthenticated-limit-per-minute`
# changes it (e.g. many clients behind one NAT address, or a fuzzing test). Past it, EVERY request from the address is
# refused before authentication until the window ends: guessing keys or passwords costs a window per budget.
UNAUTHENTICATED_LIMIT_PER_MINUTE = PUBLIC_LIMIT_PER_MINUTE
HEALTH_LIMIT_PER_MINUTE = 600  # per address, for the health probes of load balancers (10 a second)
MAX_BUCKETS = 100_000  # counters per family: memory per family stays bounded whatever the traffic
ADDRESS_PREFIX = "address/"
HEALTH_PREFIX = "health/"


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


class _Table:
    """The counters of one family in the current window, and the keys a newcomer may evict."""

    __slots__ = ("counts", "overflowed", "singles")

    def __init__(self) -> None:
        self.counts: dict[str, int] = {}
        self.singles: OrderedDict[str, None] = OrderedDict()  # keys counted once, oldest first
        self.overflowed = 0  # requests of this window that found no counter (every counter counted more than one)

    def make_room(self, max_buckets: int) -> bool:
        """Room for one more counter, evicting the oldest one-request counter if the table is full."""
        if len(self.counts) < max_buckets:
            return True
        if not self.singles:
            return False
        evicted, _ = self.singles.popitem(last=False)
        del self.counts[evicted]
        return True


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
        self._window = -1
        self._tables: dict[str, _Table] = {}  # family -> its counters in `_window`

    def _table(self, bucket: str, window: int) -> tuple[_Table, str]:
        """The table of `bucket`'s family in `window` (emptied when a new window starts) and its key."""
        if window > self._window:
            self._window = window
            self._tables = {}
        family = _family(bucket)
        table = self._tables.get(family)
        if table is None:
            table = self._tables[family] = _Table()
        return table, _normalised(bucket, family)

    def _limit(self, bucket: str, limit: int) -> int:
        return self.unauthenticated_limit_per_minute if bucket.startswith(ADDRESS_PREFIX) else limit

    def charge(self, bucket: str, limit: int) -> RateState:
        """Count one request against `bucket`; `exceeded` once more than `limit` arrive in this window."""
        limit = self._limit(bucket, limit)
        now = self._clock()
        window = int(now // WINDOW_S)
        with self._lock:
            table, key = self._table(bucket, window)
            count = table.counts.get(key, 0) + 1
            if count == 1:
                if table.make_room(self._max_buckets):
                    table.counts[key] = 1
                    table.singles[key] = None
                else:
                    table.overflowed += 1  # no counter: judged as a fresh counter, never by a shared one
            else:
                table.counts[key] = count
                if count == 2:
                    del table.singles[key]
        return self._state(limit, count, now, window, count > limit)

    def peek(self, bucket: str, limit: int) -> RateState:
        """The state of `bucket` without counting; `exceeded` when ITS OWN budget is spent (the next is over).
        A bucket without a counter has spent nothing."""
        limit = self._limit(bucket, limit)
        now = self._clock()
        window = int(now // WINDOW_S)
        with self._lock:
            table, key = self._table(bucket, window)
            count = table.counts.get(key, 0)
        return self._state(limit, count, now, window, count >= limit)

    @staticmethod
    def _state(limit: int, count: int, now: float, window: int, exceeded: bool) -> RateState:
        reset_s = max(1, int((window + 1) * WINDOW_S - now + 0.999))
        return RateState(limit, max(0, limit - count), reset_s, exceeded)

    def tracked(self) -> int:
        """How many counters are held (all families)."""
        with self._lock:
            return sum(len(table.counts) for table in self._tables.values())

    def overflowed(self) -> int:
        """How many requests of this window found no counter (all families): a sign of a flood of new keys."""
        with self._lock:
            return sum(table.overflowed for table in self._tables.values())


class SharedRateLimiter(RateLimiter):
    """`RateLimiter`'s counters in the database every serving process shares: one upsert `RETURNING count` per
    charge (the bucket's row of the current window), one read per peek. Exact across processes.

    What differs from the in-memory table: a bucket this process has seen spent in the current window is answered
    from memory without a round trip (a counter only grows within its window, so it stays spent); the first charge
    a process makes in a new window deletes the rows of older windows (fixed windows: nothing older means anything),
    so the table holds about one window's buckets; no per-family eviction (the rows are on the database's disk,
    not in this process, and a flood of new buckets is one row per request, deleted within a minute). The health
    probes' budget (`health/...`) stays in each process's memory: liveness must not wait on the database, and a load
    balancer probes each node on its own anyway. Should the database not answer, the process counts on its own (the
    in-memory table) and logs it: the limits then hold per process until it answers again, rather than every request
    failing for want of a counter."""

    def __init__(
        self,
        shared: SharedState,
        max_buckets: int = MAX_BUCKETS,
        clock: Callable[[], float] = time.time,
        *,
        unauthenticated_limit_per_minute: int = UNAUTHENTICATED_LIMIT_PER_MINUTE,
    ) -> None:
        super().__init__(max_buckets, clock, unauthenticated_limit_per_minute=unauthenticated_limit_per_minute)
        self._shared = shared
        self._spent_lock = threading.Lock()
        self._spent_window = -1
        self._spent: dict[str, int] = {}  # bucket -> the limit it was spent at, in `_spent_window`

    def _spent_at(self, key: str, limit: int, window: int) -> bool:
        """Whether `key` is known spent at `limit` in `window`; the first call of a new window forgets the old
        windows, here and in the database."""
        with self._spent_lock:
            new_window = window > self._spent_window
            if new_window:
                self._spent_window = window
                self._spent = {}
            spent = self._spent.get(key) == limit
        if new_window:
            try:
                self._shared.forget_windows_before(window * WINDOW_S)
            except SharedStateUnavailable as error:
                log.warning("rate counters: old windows not deleted: %s", error)
            return False
        return spent

    def _remember_spent(self, key: str, limit: int, window: int) -> None:
        with self._spent_lock:
            if window == self._spent_window and len(self._spent) < self._max_buckets:
                self._spent[key] = limit

    def charge(self, bucket: str, limit: int) -> RateState:
        if bucket.startswith(HEALTH_PREFIX):
            return super().charge(bucket, limit)
        limit = self._limit(bucket, limit)
        now = self._clock()
        window = int(now // WINDOW_S)
        key = _normalised(bucket, _family(bucket))
        if self._spent_at(key, limit, window):
            return self._state(limit, limit + 1, now, window, True)
        try:
            count = self._shared.count_request(key, window * WINDOW_S)
        except SharedStateUnavailable as error:
            log.warning("rate counters unavailable, counting in this process: %s", error)
            return super().charge(bucket, limit)
        if count >= limit:
            self._remember_spent(key, limit, window)
        return self._state(limit, count, now, window, count > limit)

    def peek(self, bucket: str, limit: int) -> RateState:
        if bucket.startswith(HEALTH_PREFIX):
            return super().peek(bucket, limit)
        limit = self._limit(bucket, limit)
        now = self._clock()
        window = int(now // WINDOW_S)
        key = _normalised(bucket, _family(bucket))
        if self._spent_at(key, limit, window):
            return self._state(limit, limit, now, window, True)
        try:
            count = self._shared.request_count(key, window * WINDOW_S)
        except SharedStateUnavailable as error:
            log.warning("rate counters unavailable, counting in this process: %s", error)
            return super().peek(bucket, limit)
        if count >= limit:
            self._remember_spent(key, limit, window)
        return self._state(limit, count, now, window, count >= limit)


def limiter_for(shared: SharedState | None, *, unauthenticated_limit_per_minute: int) -> RateLimiter:
    """The service's limiter: in this process's memory (one process serves the store), or shared through it."""
    if shared is None:
        return RateLimiter(unauthenticated_limit_per_minute=unauthenticated_limit_per_minute)
    return SharedRateLimiter(shared, unauthenticated_limit_per_minute=unauthenticated_limit_per_minute)
