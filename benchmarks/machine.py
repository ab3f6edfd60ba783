"""What the machine gave a benchmark: a fixed-work speed probe and the CPU's use while a load ran.

This VM's speed moves by up to 40 % within an hour with nothing else running (reports/benchmarks.md), and its
steal time does not show it, so every benchmark prints `speed_probe()` beside its figures: the same pure-Python
work each time, in milliseconds (lower is quicker). Two runs are comparable only when their probes are close.
`CpuShare` reads /proc/stat around a load: a server that leaves the machine's cores idle while it is saturated is
bound by something other than CPU (in this project, the GIL).
"""

from __future__ import annotations

import statistics
import time
from dataclasses import dataclass
from pathlib import Path

_PROBE_ROUNDS = 5


def _fixed_work() -> int:
    """About 50 ms of interpreter work on this machine: integer arithmetic, a dict and a list."""
    table: dict[int, int] = {}
    total = 0
    for number in range(300_000):
        table[number & 1023] = number
        total += (number * 7) % 13
    return total + len(table)


def speed_probe() -> float:
    """The median wall-clock milliseconds of the fixed work over five rounds."""
    timings = []
    for _ in range(_PROBE_ROUNDS):
        started = time.perf_counter()
        _fixed_work()
        timings.append((time.perf_counter() - started) * 1000)
    return round(statistics.median(timings), 1)


def _cpu_counters() -> list[int]:
    fields = Path("/proc/stat").read_text().splitlines()[0].split()
    return [int(value) for value in fields[1:9]]  # user nice system idle iowait irq softirq steal


@dataclass
class CpuShare:
    """Shares of all cores' time between `start()` and `stop()`, in percent (Linux /proc/stat)."""

    user: float = 0.0
    system: float = 0.0
    idle: float = 0.0
    steal: float = 0.0
    _before: list[int] | None = None

    def start(self) -> CpuShare:
        self._before = _cpu_counters()
        return self

    def stop(self) -> dict[str, float]:
        assert self._before is not None, "start() first"
        delta = [after - before for before, after in zip(self._before, _cpu_counters(), strict=True)]
        total = max(1, sum(delta))
        self.user = 100 * (delta[0] + delta[1]) / total
        self.system = 100 * (delta[2] + delta[5] + delta[6]) / total
        self.idle = 100 * (delta[3] + delta[4]) / total
        self.steal = 100 * delta[7] / total
        return {name: round(getattr(self, name), 1) for name in ("user", "system", "idle", "steal")}
