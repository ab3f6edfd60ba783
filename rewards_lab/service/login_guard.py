"""Brute-force guard for POST /auth/login: failed attempts counted per email and per client address.

After `per_email` failures for one email within the window, or `per_address` failures from one address, every
further attempt is refused with `rate_limit_exceeded` (429, `details.retry_after_s`) *before* the password is
checked, so that guessing cannot continue and the refusal says nothing about the password. A successful login
clears the email's count. The server process owns its DuckDB file, so in-memory counters are the whole truth; a
restart forgets them, which costs a guesser a restart per window at best.
"""

from __future__ import annotations

import threading
import time
from dataclasses import dataclass, field

from rewards_lab.contract.errors import ServiceError

WINDOW_S = 15 * 60
FAILURES_PER_EMAIL = 5
FAILURES_PER_ADDRESS = 50
MAX_TRACKED = 100_000


@dataclass
class LoginGuard:
    per_email: int = FAILURES_PER_EMAIL
    per_address: int = FAILURES_PER_ADDRESS
    window_s: float = WINDOW_S
    _failures: dict[str, tuple[int, float]] = field(default_factory=dict)  # key -> (count, window start)
    _lock: threading.Lock = field(default_factory=threading.Lock)

    def _count(self, key: str, now: float) -> tuple[int, float]:
        count, start = self._failures.get(key, (0, now))
        if now - start >= self.window_s:
            return 0, now
        return count, start

    def check(self, email: str, address: str) -> None:
        now = time.monotonic()
        with self._lock:
            for key, limit in ((f"email/{email}", self.per_email), (f"address/{address}", self.per_address)):
                count, start = self._count(key, now)
                if count >= limit:
                    retry_after = max(1, int(start + self.window_s - now + 0.999))
                    raise ServiceError(
                        "rate_limit_exceeded",
                        "too many failed logins; wait before trying again",
                        retry_after_s=retry_after,
                    )

    def failed(self, email: str, address: str) -> None:
        now = time.monotonic()
        with self._lock:
            if len(self._failures) > MAX_TRACKED:
                self._failures.clear()
            for key in (f"email/{email}", f"address/{address}"):
                count, start = self._count(key, now)
                self._failures[key] = (count + 1, start)

    def succeeded(self, email: str) -> None:
        with self._lock:
            self._failures.pop(f"email/{email}", None)
