"""Rate limits per plan, counted per (organization, environment) in fixed one-minute windows.

The server process owns its DuckDB file, so one in-memory counter per window is the whole truth. Requests that
never authenticate are counted per client address at the Public plan's limit, which also slows key guessing.
"""

from __future__ import annotations

import threading
import time
from dataclasses import dataclass

WINDOW_S = 60
PUBLIC_LIMIT_PER_MINUTE = 100
MAX_BUCKETS = 100_000


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


class RateLimiter:
    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._window = -1
        self._counts: dict[str, int] = {}

    def charge(self, bucket: str, limit: int) -> RateState:
        """Count one request against `bucket`; `exceeded` once more than `limit` arrive in this window."""
        now = time.time()
        window = int(now // WINDOW_S)
        with self._lock:
            if window != self._window or len(self._counts) > MAX_BUCKETS:
                self._window, self._counts = window, {}
            count = self._counts.get(bucket, 0) + 1
            self._counts[bucket] = count
        reset_s = max(1, int((window + 1) * WINDOW_S - now + 0.999))
        return RateState(limit, max(0, limit - count), reset_s, count > limit)
