"""Loaded by a benchmarked server whose PYTHONPATH starts with this folder (benchmarks/events_http.py): records
every pause of the cyclic garbage collector (when, which generation, how long) into the JSON file named by
$REWARDS_LAB_BENCH_GC_OUT, so that the benchmark can tell how much of the tail latency the collector made.
Never part of a deployment."""

from __future__ import annotations

import gc
import json
import os
import time

_OUT = os.environ.get("REWARDS_LAB_BENCH_GC_OUT")
_pauses: list[tuple[float, int, float]] = []
_started: list[float] = [0.0]


def _write() -> None:
    if _OUT:
        with open(_OUT, "w", encoding="utf-8") as out:
            json.dump(_pauses, out)


def _on_collection(phase: str, info: dict[str, int]) -> None:
    if phase == "start":
        _started[0] = time.perf_counter()
        return
    _pauses.append((time.time(), info["generation"], (time.perf_counter() - _started[0]) * 1000))
    if info["generation"] == 2 or len(_pauses) % 100 == 0:
        _write()  # the server is stopped by a signal: what was written last is what the benchmark reads


if _OUT:
    gc.callbacks.append(_on_collection)
