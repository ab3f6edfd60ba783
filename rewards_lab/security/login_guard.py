"""Brute-force guard for POST /auth/login: exponential backoff, never a lockout.

Failed attempts are counted under three keys, each with a number of free failures and then a wait that doubles
with every further failure, up to a cap:

| key                          | free failures | wait after that          | cap    |
|------------------------------|---------------|--------------------------|--------|
| account from one address     | 5             | 1 s, 2 s, 4 s, ...       | 15 min |
| one address, all accounts    | 50            | 1 s, 2 s, 4 s, ...       | 15 min |
| account from all addresses   | 20            | 1 s, 2 s, 4 s, ...       | 60 s   |

While a key waits, every attempt under it is refused with `rate_limit_exceeded` (429, `details.retry_after_s`)
*before* the password is checked, so the refusal says nothing about the password, right or wrong. Once the wait
is over the next attempt is checked as usual: an owner can always log in again. Guessing from one address soon
waits 15 minutes per guess; guessing from many addresses slows every guess at the account to one a minute, which
delays the owner by at most that minute (the owner's own address has its own count).

An attempt counts as a failure from the moment it is admitted (so that concurrent attempts cannot all slip past
the check before the first failure is recorded) and is given back when it turns out not to be a guess: a right
password clears the account's counts (the address keeps its own, less this attempt). A failed attempt's wait runs
from its answer (`failed`).

Memory is bounded (`MAX_TRACKED` keys). A key with no failure for `FORGET_AFTER_S` is forgotten;
keys are kept in order of their last failure, so the forgettable ones are at the front. When the table is full, a
NEW key takes the slot of the oldest key still within its free failures (one that has never waited: evicting it
lifts no wait, and costs the attacker a flood of new keys for a few free guesses). A key that waits, or ever
waited, is never evicted: a flood of new keys never resets a backoff. Should every key be past its free failures
(hundreds of thousands of failed logins within the forget time), a new key is not tracked: its attempt is judged by
the keys that are, and counted nowhere. An untracked key is NEVER judged by a shared record: an owner from a new
address, or whose email has no failures, is never held by an attacker's failures elsewhere. The server process
owns its DuckDB file, so in-memory counts are the whole truth; a restart forgets them.

Several processes serving one PostgreSQL database share the counts (`SharedLoginGuard`): the same keys, free
failures, waits and caps, each key a row of `login_failures` (store/shared_state.py), read and written under a lock
per key that every process takes, so guessing through N processes gets no more free guesses than through one.
"""

from __future__ import annotations

import math
import threading
import time
from collections import OrderedDict
from collections.abc import Callable
from dataclasses import dataclass

from rewards_lab.contract.errors import ServiceError
from rewards_lab.security.client_address import client_key
from rewards_lab.store.shared_state import LoginRecords, SharedState

FIRST_DELAY_S = 1.0
FREE_FAILURES_PER_ACCOUNT_ADDRESS = 5
FREE_FAILURES_PER_ADDRESS = 50
FREE_FAILURES_PER_ACCOUNT = 20
MAX_DELAY_S = 15 * 60.0
MAX_ACCOUNT_DELAY_S = 60.0
FORGET_AFTER_S = 60 * 60.0  # longer than every cap: a key that waits is never forgotten
MAX_TRACKED = 100_000
FORGET_EVERY_S = 60.0  # how often a process deletes the shared records past FORGET_AFTER_S


@dataclass(frozen=True, slots=True)
class Backoff:
    free_failures: int
    max_delay_s: float

    def delay_s(self, failures: int) -> float:
        """The wait after `failures` failures: none while free, then 1 s doubling up to the cap."""
        if failures < self.free_failures:
            return 0.0
        exponent = min(failures - self.free_failures, 32)
        return min(self.max_delay_s, FIRST_DELAY_S * 2.0**exponent)


@dataclass(frozen=True, slots=True)
class _Record:
    failures: int
    last_failure_at: float


def _rules(
    per_account_address: Backoff | None, per_address: Backoff | None, per_account: Backoff | None
) -> dict[str, Backoff]:
    return {
        "pair": per_account_address or Backoff(FREE_FAILURES_PER_ACCOUNT_ADDRESS, MAX_DELAY_S),
        "address": per_address or Backoff(FREE_FAILURES_PER_ADDRESS, MAX_DELAY_S),
        "account": per_account or Backoff(FREE_FAILURES_PER_ACCOUNT, MAX_ACCOUNT_DELAY_S),
    }


def _keys(email: str, address: str) -> list[tuple[str, str]]:
    """The kinds and keys an attempt is counted under (`pair`, `address`, `account`, in that order)."""
    network = client_key(address)
    return [("pair", f"pair/{email}/{network}"), ("address", f"address/{network}"), ("account", f"account/{email}")]


def _refusal(wait_s: float) -> ServiceError:
    message = "too many failed logins; wait before trying again"
    return ServiceError("rate_limit_exceeded", message, retry_after_s=max(1, math.ceil(wait_s)))


class LoginGuard:
    def __init__(
        self,
        *,
        per_account_address: Backoff | None = None,
        per_address: Backoff | None = None,
        per_account: Backoff | None = None,
        forget_after_s: float = FORGET_AFTER_S,
        max_tracked: int = MAX_TRACKED,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self._rules = _rules(per_account_address, per_address, per_account)
        self._forget_after_s = forget_after_s
        self._max_tracked = max_tracked
        self._clock = clock
        self._records: OrderedDict[str, _Record] = OrderedDict()  # in order of last failure
        self._free: OrderedDict[str, None] = OrderedDict()  # the keys within their free failures (evictable)
        self._lock = threading.Lock()

    def _forget_old(self, now: float) -> None:
        while self._records:
            key, record = next(iter(self._records.items()))
            if now - record.last_failure_at < self._forget_after_s:
                break
            self._drop(key)

    def _put(self, key: str, record: _Record) -> None:
        """Set `key`'s record (last in the order of last failure) and whether a newcomer may evict it."""
        self._records.pop(key, None)
        self._records[key] = record
        self._free.pop(key, None)
        if record.failures < self._rules[key.split("/", 1)[0]].free_failures:
            self._free[key] = None

    def _drop(self, key: str) -> None:
        self._records.pop(key, None)
        self._free.pop(key, None)

    def _make_room(self) -> bool:
        """Room for one more key, evicting the oldest key within its free failures if the table is full."""
        if len(self._records) < self._max_tracked:
            return True
        if not self._free:
            return False
        evicted, _ = self._free.popitem(last=False)
        del self._records[evicted]
        return True

    def admit(self, email: str, address: str) -> None:
        """Refuse an attempt while any of its keys waits; otherwise count it as a failure until it is given back
        (`succeeded`, `not_a_guess`)."""
        now = self._clock()
        with self._lock:
            self._forget_old(now)
            keys = _keys(email, address)
            wait_s = 0.0
            for kind, key in keys:
                record = self._records.get(key)  # an untracked key has no failures: never a shared record
                if record is not None:
                    ready_at = record.last_failure_at + self._rules[kind].delay_s(record.failures)
                    wait_s = max(wait_s, ready_at - now)
            if wait_s > 0:
                raise _refusal(wait_s)
            for _, key in keys:
                record = self._records.get(key)
                if record is not None:
                    self._put(key, _Record(record.failures + 1, now))
                elif self._make_room():
                    self._put(key, _Record(1, now))

    def failed(self, email: str, address: str) -> None:
        """The attempt (counted at admission) failed: its wait runs from now, when the failure is answered, not
        from its admission (checking a password takes a while on a busy host)."""
        now = self._clock()
        with self._lock:
            for _, key in _keys(email, address):
                record = self._records.get(key)
                if record is not None:
                    self._put(key, _Record(record.failures, max(now, record.last_failure_at)))

    def _give_back(self, key: str) -> None:
        record = self._records.get(key)
        if record is None:
            return
        if record.failures <= 1:
            self._drop(key)
        else:  # keeps its place in the order of last failure; may become evictable again
            self._records[key] = _Record(record.failures - 1, record.last_failure_at)
            if record.failures - 1 < self._rules[key.split("/", 1)[0]].free_failures:
                self._free[key] = None

    def succeeded(self, email: str, address: str) -> None:
        """The right credentials: the account's counts are cleared; the address gives back this attempt."""
        with self._lock:
            pair, address_key, account = (key for _, key in _keys(email, address))
            self._drop(pair)
            self._drop(account)
            self._give_back(address_key)

    def not_a_guess(self, email: str, address: str) -> None:
        """The attempt was no guess (the right password, the second factor still to come): give it back."""
        with self._lock:
            for _, key in _keys(email, address):
                self._give_back(key)

    def tracked(self) -> int:
        with self._lock:
            return len(self._records)


class SharedLoginGuard:
    """`LoginGuard`'s rules over the records every process serving the database shares (`SharedState`): each
    operation reads and writes the attempt's three keys in one transaction holding their locks, so concurrent
    attempts in any processes cannot all slip past the check. Times are the processes' wall clock (a monotonic
    clock means nothing in another process). Not bounded by `MAX_TRACKED`: the records are rows on the database's
    disk, not this process's memory; a key with no failure for `forget_after_s` is deleted (at most once a minute
    per process, by the next admission)."""

    def __init__(
        self,
        shared: SharedState,
        *,
        per_account_address: Backoff | None = None,
        per_address: Backoff | None = None,
        per_account: Backoff | None = None,
        forget_after_s: float = FORGET_AFTER_S,
        clock: Callable[[], float] = time.time,
    ) -> None:
        self._shared = shared
        self._rules = _rules(per_account_address, per_address, per_account)
        self._forget_after_s = forget_after_s
        self._clock = clock
        self._forgotten_at = -math.inf

    def _forget_old(self, now: float) -> None:
        if now - self._forgotten_at >= FORGET_EVERY_S:
            self._forgotten_at = now
            self._shared.forget_login_failures_before(now - self._forget_after_s)

    def admit(self, email: str, address: str) -> None:
        """As `LoginGuard.admit`."""
        now = self._clock()
        self._forget_old(now)
        keys = _keys(email, address)
        with self._shared.login_records([key for _, key in keys]) as records:
            wait_s = 0.0
            for kind, key in keys:
                record = records.get(key)
                if record is not None:
                    wait_s = max(wait_s, record[1] + self._rules[kind].delay_s(record[0]) - now)
            if wait_s > 0:
                raise _refusal(wait_s)
            for _, key in keys:
                record = records.get(key)
                records.put(key, (record[0] if record else 0) + 1, now)

    def failed(self, email: str, address: str) -> None:
        """As `LoginGuard.failed`: the wait runs from now."""
        now = self._clock()
        keys = [key for _, key in _keys(email, address)]
        with self._shared.login_records(keys) as records:
            for key in keys:
                record = records.get(key)
                if record is not None:
                    records.put(key, record[0], max(now, record[1]))

    @staticmethod
    def _give_back(records: LoginRecords, key: str) -> None:
        record = records.get(key)
        if record is None:
            return
        if record[0] <= 1:
            records.drop(key)
        else:
            records.put(key, record[0] - 1, record[1])

    def succeeded(self, email: str, address: str) -> None:
        """As `LoginGuard.succeeded`."""
        pair, address_key, account = (key for _, key in _keys(email, address))
        with self._shared.login_records([pair, address_key, account]) as records:
            records.drop(pair)
            records.drop(account)
            self._give_back(records, address_key)

    def not_a_guess(self, email: str, address: str) -> None:
        """As `LoginGuard.not_a_guess`."""
        keys = [key for _, key in _keys(email, address)]
        with self._shared.login_records(keys) as records:
            for key in keys:
                self._give_back(records, key)


Guard = LoginGuard | SharedLoginGuard


def guard_for(shared: SharedState | None) -> Guard:
    """The service's guard: in this process's memory (one process serves the store), or shared through it."""
    return LoginGuard() if shared is None else SharedLoginGuard(shared)
