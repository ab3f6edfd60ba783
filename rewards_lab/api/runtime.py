"""The interpreter's settings while the server serves: the start-up heap frozen out of the cyclic garbage
collector's full collections, and a shorter switch interval for the GIL.

Under load, the objects of requests in flight (64 connections, each waiting for its group commit) survive the
young collections and are promoted to the oldest generation; every second or so that triggers a full
collection, which walks every object the process holds. Most of them are the ~150k objects of start-up (FastAPI,
pydantic's models, the operation registry, DuckDB's bindings), alive for the whole life of the process. Walking
them took 70-180 ms a collection, with every thread stopped: most of POST /v1/events' p99 above its p50
(reports/benchmarks.md, issue 27). `gc.freeze()` moves what start-up made into a permanent generation that the
collector never walks (its documented use: a long-lived server after start-up), and a full collection then
takes 1-9 ms. Cycles made later are collected as before.

The event loop shares the GIL with the intake's writer, the event worker and the delivery worker. A thread that
wants the GIL waits for the holder's switch interval (5 ms by default) and, under load, for each thread in line
before it: a request's few steps on the event loop each paid that wait. At 1 ms the loop gets the GIL back
sooner; throughput is unchanged and the p99 fell by a fifth to a third in runs side by side.
"""

from __future__ import annotations

import gc
import sys

SWITCH_INTERVAL_S = 0.001


class ServingRuntime:
    """Apply the settings when serving starts (`start`), and restore what was there when it stops (`stop`): an app
    stopped inside a longer-lived process (the tests') gives its objects back to the collector."""

    def __init__(self) -> None:
        self._interval_before = sys.getswitchinterval()

    def start(self) -> int:
        """Collect start-up's garbage, then freeze what survives; returns how many objects are now frozen."""
        self._interval_before = sys.getswitchinterval()
        sys.setswitchinterval(SWITCH_INTERVAL_S)
        gc.collect()
        gc.freeze()
        return gc.get_freeze_count()

    def stop(self) -> None:
        gc.unfreeze()
        sys.setswitchinterval(self._interval_before)
