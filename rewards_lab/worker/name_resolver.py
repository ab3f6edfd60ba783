"""Name resolution for the webhook sender that no one tenant can stall for the others.

`getaddrinfo` has no timeout of its own and cannot be interrupted once it runs, so it runs on this resolver's own
threads while the attempt waits at most its deadline. Three rules keep a slow name (or a tenant with many) from
holding everyone else's resolves:

- slots: a lookup holds a slot from the moment it starts until `getaddrinfo` really returns (not when the waiting
  attempt gives up), at most `per_owner` for one owner (the organization) and at most `threads` in all, with
  `per_owner < threads`. A lookup starts only when a slot is free, so the thread pool never queues: an attempt
  that cannot get a slot before its deadline gives up without leaving a lookup behind it;
- one lookup per name: attempts that need a name already being looked up wait for that lookup, and the last one
  to give up cancels it if it has not started;
- a short cache: a result (addresses, or "does not resolve") is kept for seconds, a bounded number of names, so
  repeated deliveries to a slow name do not each block. Every address the cache gives is still checked by the
  caller on every connection, and the connection goes to a checked address.
"""

from __future__ import annotations

import threading
import time
from collections import Counter, OrderedDict
from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor
from concurrent.futures import TimeoutError as FutureTimeout
from dataclasses import dataclass
from typing import Generic, TypeVar

T = TypeVar("T")

# Limits (docs/decisions.md, "Webhooks"; why these values: reports/decision-history.md, "Webhook DNS and date
# bounds, review fixes (issue 14)").
RESOLVER_MIN_THREADS = 4  # the pool is at least the delivery concurrency, and never smaller than this
RESOLVER_SLOTS_PER_OWNER = 2  # lookups in progress for one organization at once (always below the pool size)
CACHE_POSITIVE_S = 30.0  # how long a name's addresses are reused
CACHE_NEGATIVE_S = 5.0  # how long "this name does not resolve" is reused
CACHE_MAX_NAMES = 1024  # names kept; the least recently stored goes first


class ResolveTimeout(TimeoutError):
    """The name was not resolved (or no lookup slot came free) before the deadline."""


class NameNotResolved(OSError):
    """The name did not resolve (possibly a cached answer)."""


FAILURES: tuple[type[Exception], ...] = (OSError, UnicodeError, ValueError)  # what getaddrinfo and parsing raise


@dataclass
class _Lookup(Generic[T]):
    future: Future[T]
    owner: str
    waiters: int = 1


class Resolver(Generic[T]):
    """Resolve `(host, port)` with `lookup` under per-owner slots, one lookup per name, and a short cache."""

    def __init__(
        self,
        lookup: Callable[[str, int], T],
        *,
        threads: int = RESOLVER_MIN_THREADS,
        per_owner: int = RESOLVER_SLOTS_PER_OWNER,
        positive_s: float = CACHE_POSITIVE_S,
        negative_s: float = CACHE_NEGATIVE_S,
        max_names: int = CACHE_MAX_NAMES,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        threads = max(threads, RESOLVER_MIN_THREADS)
        if not 1 <= per_owner < threads:
            raise ValueError("per_owner must be at least 1 and below the number of threads")
        self._lookup = lookup
        self.threads = threads
        self.per_owner = per_owner
        self._positive_s = positive_s
        self._negative_s = negative_s
        self._max_names = max_names
        self._clock = clock
        self._pool = ThreadPoolExecutor(threads, thread_name_prefix="webhook-dns")
        self._changed = threading.Condition(threading.RLock())  # RLock: a cancel runs the done callback inline
        self._in_flight: dict[tuple[str, int], _Lookup[T]] = {}
        self._running: Counter[str] = Counter()  # owner -> lookups holding a slot
        self._cache: OrderedDict[tuple[str, int], tuple[float, T | None]] = OrderedDict()

    @property
    def running(self) -> int:
        """Lookups holding a slot (started and not yet returned)."""
        with self._changed:
            return sum(self._running.values())

    def resolve(self, host: str, port: int, *, owner: str, timeout_s: float | None) -> T:
        """The lookup's answer, from the cache, a lookup in progress, or a new one; `ResolveTimeout` when the
        deadline passes first, `NameNotResolved` (or the lookup's own error) when the name does not resolve."""
        deadline = None if timeout_s is None else time.monotonic() + timeout_s
        key = (host, port)
        with self._changed:
            while True:
                cached = self._cached(key)
                if cached is not None:
                    return cached
                pending = self._in_flight.get(key)
                if pending is not None:
                    pending.waiters += 1
                    break
                if self._running[owner] < self.per_owner and sum(self._running.values()) < self.threads:
                    pending = self._start(key, owner)
                    break
                left = None if deadline is None else deadline - time.monotonic()
                if left is not None and left <= 0:
                    raise ResolveTimeout("no lookup slot came free in time")
                self._changed.wait(left)
        left = None if deadline is None else max(0.0, deadline - time.monotonic())
        try:
            return pending.future.result(timeout=left)
        except FutureTimeout:
            self._give_up(key, pending)
            raise ResolveTimeout("name resolution did not finish in time") from None

    def _cached(self, key: tuple[str, int]) -> T | None:
        entry = self._cache.get(key)
        if entry is None:
            return None
        expires_at, answer = entry
        if self._clock() >= expires_at:
            del self._cache[key]
            return None
        if answer is None:
            raise NameNotResolved("the name did not resolve (cached)")
        return answer

    def _start(self, key: tuple[str, int], owner: str) -> _Lookup[T]:
        future = self._pool.submit(self._lookup, *key)  # before counting: a closed pool raises here
        self._running[owner] += 1
        pending = _Lookup(future, owner)
        self._in_flight[key] = pending
        future.add_done_callback(lambda done: self._finished(key, pending, done))
        return pending

    def _give_up(self, key: tuple[str, int], pending: _Lookup[T]) -> None:
        with self._changed:
            pending.waiters -= 1
            if pending.waiters == 0:
                pending.future.cancel()  # only a lookup that has not started; a running one keeps its slot

    def _finished(self, key: tuple[str, int], pending: _Lookup[T], done: Future[T]) -> None:
        with self._changed:
            self._running[pending.owner] -= 1
            if self._running[pending.owner] <= 0:
                del self._running[pending.owner]
            if self._in_flight.get(key) is pending:
                del self._in_flight[key]
            if not done.cancelled():
                error = done.exception()
                if error is None:
                    self._store(key, done.result(), self._positive_s)
                elif isinstance(error, FAILURES):
                    self._store(key, None, self._negative_s)
            self._changed.notify_all()

    def _store(self, key: tuple[str, int], answer: T | None, ttl_s: float) -> None:
        if ttl_s <= 0:
            return
        self._cache.pop(key, None)
        self._cache[key] = (self._clock() + ttl_s, answer)
        while len(self._cache) > self._max_names:
            self._cache.popitem(last=False)

    def close(self) -> None:
        """Stop the threads once their lookups return (a lookup in progress is not waited for)."""
        self._pool.shutdown(wait=False, cancel_futures=True)
