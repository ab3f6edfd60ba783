"""One circuit breaker per webhook endpoint, in the delivery worker's memory.

Closed: attempts go as usual. After `failures` consecutive failed attempts the circuit opens: the endpoint's
deliveries stay pending and unsent (they use up no retry and no sending slot). After `cool_down_s` it is
half-open: one attempt (a probe) goes; its success closes the circuit, its failure opens it for another cool-down.
State is lost on restart, which only means a broken endpoint gets `failures` more attempts first.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from dataclasses import dataclass


@dataclass
class _State:
    failures: int = 0
    opened_at: float | None = None
    probing: bool = False


class CircuitBreakers:
    def __init__(self, failures: int, cool_down_s: float, clock: Callable[[], float] = time.monotonic) -> None:
        if failures < 1 or cool_down_s < 0:
            raise ValueError("a circuit opens after at least one failure, and its cool-down is >= 0")
        self.failures = failures
        self.cool_down_s = cool_down_s
        self._clock = clock
        self._states: dict[str, _State] = {}
        self._lock = threading.Lock()

    def blocked(self) -> tuple[list[str], list[str]]:
        """(endpoints to skip now, endpoints that may send exactly one probe now)."""
        now = self._clock()
        skip: list[str] = []
        probe: list[str] = []
        with self._lock:
            for endpoint, state in self._states.items():
                if state.opened_at is None:
                    continue
                if state.probing or now - state.opened_at < self.cool_down_s:
                    skip.append(endpoint)
                else:
                    probe.append(endpoint)
        return skip, probe

    def started(self, endpoint: str) -> None:
        """An attempt to `endpoint` was sent; if its circuit is open (half-open), it is the one probe."""
        with self._lock:
            state = self._states.get(endpoint)
            if state is not None and state.opened_at is not None:
                state.probing = True

    def record(self, endpoint: str, succeeded: bool) -> None:
        with self._lock:
            if succeeded:
                self._states.pop(endpoint, None)
                return
            state = self._states.setdefault(endpoint, _State())
            state.failures += 1
            state.probing = False
            if state.opened_at is not None or state.failures >= self.failures:
                state.opened_at = self._clock()

    def is_open(self, endpoint: str) -> bool:
        with self._lock:
            state = self._states.get(endpoint)
            return state is not None and state.opened_at is not None
