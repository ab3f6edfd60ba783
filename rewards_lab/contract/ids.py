"""Ids prefixed by kind and sortable by creation time: 48-bit milliseconds then 80 bits, as 32 hex digits.

Ids made within one process are strictly increasing even inside one millisecond, so sorting by id is sorting by
creation; that is what cursor pagination relies on.
"""

from __future__ import annotations

import os
import threading
import time
from collections.abc import Sequence

import numpy as np

_HEX_VALUES = np.full(256, -1, dtype=np.int64)
_HEX_VALUES[np.frombuffer(b"0123456789abcdef", dtype=np.uint8)] = np.arange(16)
_HEX_VALUES[np.frombuffer(b"ABCDEF", dtype=np.uint8)] = np.arange(10, 16)
_NIBBLE_SHIFTS = np.arange(44, -1, -4, dtype=np.int64)  # 12 hex digits, most significant first

PREFIXES: dict[str, str] = {
    "organization": "org",
    "customer": "cus",
    "wallet": "wal",
    "asset": "ast",
    "account": "acc",
    "programme": "prg",
    "programme_version": "prv",
    "rule": "rul",
    "event": "evt",
    "execution": "rex",
    "transaction": "txn",
    "lot": "lot",
    "webhook": "whk",
    "delivery": "dlv",
    "outbox": "obx",
    "api_key": "key",
    "user": "usr",
    "session": "ses",
    "log_entry": "log",
    "auth_audit": "aud",
    "request": "req",
    "conversation": "cnv",
    "message": "msg",
    "tier_change": "tch",
}

_RANDOM_BITS = 80
_RANDOM_STARTS = 256  # random starts read from the OS at once


class _MonotonicUlid:
    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._last_ms = 0
        self._last_random = 0
        self._starts: list[int] = []

    def _random_start(self) -> int:
        """A fresh random start with headroom (78 bits). os.urandom is read for 256 starts at a time: each read
        is a system call that releases the GIL, and a busy server's event loop then waits to get it back."""
        if not self._starts:
            data = os.urandom(10 * _RANDOM_STARTS)
            self._starts = [int.from_bytes(data[i : i + 10], "big") >> 2 for i in range(0, len(data), 10)]
        return self._starts.pop()

    def next_values(self, count: int) -> range:
        """`count` consecutive 128-bit values, all greater than any value returned before."""
        with self._lock:
            now_ms = time.time_ns() // 1_000_000
            if now_ms > self._last_ms:
                # A fresh random start with headroom, so that increments inside one millisecond never overflow.
                self._last_ms = now_ms
                self._last_random = self._random_start()
            elif self._last_random + count >= 1 << _RANDOM_BITS:  # pragma: no cover - 2**78 ids in one ms
                self._last_ms += 1
                self._last_random = 0
            first = (self._last_ms << _RANDOM_BITS) | (self._last_random + 1)
            self._last_random += count
            return range(first, first + count)


_GENERATOR = _MonotonicUlid()
os.register_at_fork(after_in_child=_GENERATOR._starts.clear)  # a forked child never reuses its parent's starts


def _encode(value: int) -> str:
    return value.to_bytes(16, "big").hex()


def new_id(kind: str) -> str:
    """A fresh id such as `cus_0192f0c5e3a8...` for the resource kind (a key of PREFIXES)."""
    return f"{PREFIXES[kind]}_{_encode(_GENERATOR.next_values(1)[0])}"


def new_ids(kind: str, count: int) -> list[str]:
    """`count` fresh ids in increasing order (the batch path's form of `new_id`)."""
    prefix = PREFIXES[kind]
    return [f"{prefix}_{_encode(value)}" for value in _GENERATOR.next_values(count)]


def time_ms_column(resource_ids: Sequence[str]) -> np.ndarray:
    """`time_ms_of` for many ids of one kind at once (int64): the batch path's `id_time_ms` column.

    Raises ValueError for an id that is not one of ours (the store needs the millisecond of every id it holds).
    """
    try:
        raw = np.array(resource_ids, dtype="S")
    except UnicodeEncodeError:
        raw = np.array([], dtype="S1")
    if raw.dtype.itemsize == 36 and len(raw):  # three-letter prefix, "_", 32 hex digits: all of them
        digits = _HEX_VALUES[raw.view(np.uint8).reshape(len(raw), 36)[:, 4:16]]
        if digits.min() >= 0 and (raw.view(np.uint8).reshape(len(raw), 36)[:, 3] == ord("_")).all():
            column: np.ndarray = (digits << _NIBBLE_SHIFTS).sum(axis=1)
            return column
    found = [time_ms_of(resource_id) for resource_id in resource_ids]
    if None in found:
        raise ValueError("not an id of this service")
    return np.array(found, dtype=np.int64)


def time_ms_of(resource_id: str) -> int | None:
    """The creation millisecond in an id's first 48 bits, or None when `resource_id` is not one of our ids."""
    _, _, body = resource_id.partition("_")
    if len(body) != 32:
        return None
    try:
        return int(body[:12], 16)
    except ValueError:
        return None
