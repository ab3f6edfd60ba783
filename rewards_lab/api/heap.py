"""The server's heap after start-up: frozen out of the cyclic garbage collector's full collections.

Under load, the objects of requests in flight (64 connections, each waiting for its group commit) survive the
young collections and are promoted to the oldest generation; every second or so that triggers a full
collection, which walks every object the process holds. Most of them are the ~150k objects of start-up (FastAPI,
pydantic's models, the operation registry, DuckDB's bindings), alive for the whole life of the process. Walking
them took 70-180 ms a collection, with every thread stopped: the whole of POST /v1/events' p99 above its p50
(reports/benchmarks.md, issue 27). `gc.freeze()` moves what start-up made into a permanent generation that the
collector never walks (its documented use: a long-lived server after start-up), and a full collection then
takes 1-2 ms. Cycles made later are collected as before.
"""

from __future__ import annotations

import gc


def settle_after_start_up() -> int:
    """Collect start-up's garbage, then freeze what survives; returns how many objects are now frozen."""
    gc.collect()
    gc.freeze()
    return gc.get_freeze_count()


def thaw() -> None:
    """Give frozen objects back to the collector (an app stopped inside a longer-lived process: the tests')."""
    gc.unfreeze()
