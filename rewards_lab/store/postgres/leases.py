"""Event partition leases on PostgreSQL (issue 32, plan section 5.1, way b; way a is `count == 1`).

The received events are split into `count` partitions by their resolved customer (`PgEventRepository.pending`).
A worker leases partitions with session advisory locks held by a connection of its own, and processes only their
events, in id order: a customer's events are in one partition and a partition in one worker at a time, so each
customer's events keep their order and none is taken twice. Between batches `claim` rebalances: every worker holds
a shared "present" lock, the number of holders is the number of alive workers, and a worker keeps at most
ceil(count / alive) partitions, giving back the others and taking free ones up to that share. A killed process's
session ends, and its locks with it: its partitions are free at the other workers' next claim.

The locks use the two-key form (`pg_try_advisory_lock(int4, int4)`), apart from the bigint keys of the migration
and background locks: (LEASE_CLASS, partition) for a lease, (PRESENT_CLASS, 0) for presence.
"""

from __future__ import annotations

import logging
import math
from collections.abc import Callable
from typing import Any

import psycopg

from rewards_lab.store.api import UnsupportedStore
from rewards_lab.store.interfaces import EventPartitions

log = logging.getLogger(__name__)
LEASE_CLASS = 0x7265_7764  # "rewd"
PRESENT_CLASS = 0x7265_7765
MAX_PARTITIONS = 1024

_ALIVE = (
    "SELECT count(*) FROM pg_locks WHERE locktype = 'advisory' AND granted AND objsubid = 2 AND classid = %s "
    "AND objid = 0 AND database = (SELECT oid FROM pg_database WHERE datname = current_database())"
)
# LIMIT stops the scan once enough locks are taken: the filter (and its lock) runs only on the rows pulled.
_TAKE = (
    "SELECT p FROM generate_series(0, %(count)s - 1) AS p WHERE p <> ALL(%(held)s::int[]) "
    "AND pg_try_advisory_lock(%(lease)s, p) LIMIT %(wanted)s"
)


def check_count(count: int) -> int:
    if not 1 <= count <= MAX_PARTITIONS:
        raise ValueError(f"event partitions: {count} is not between 1 and {MAX_PARTITIONS}")
    return count


class EventLeases:
    """`store.interfaces.PartitionLeases` on PostgreSQL; used by one worker thread."""

    def __init__(self, connect: Callable[[], psycopg.Connection[Any]], count: int) -> None:
        self.count = check_count(count)
        self._connect = connect
        self._conn: psycopg.Connection[Any] | None = None
        self._held: set[int] = set()

    def claim(self) -> EventPartitions:
        try:
            conn = self._conn if self._conn is not None and not self._conn.closed else self._open()
            row = conn.execute(_ALIVE, [PRESENT_CLASS]).fetchone()
            share = math.ceil(self.count / max(1, int(row[0]) if row else 1))
            if len(self._held) > share:
                for partition in sorted(self._held)[share:]:
                    conn.execute("SELECT pg_advisory_unlock(%s, %s)", [LEASE_CLASS, partition])
                    self._held.discard(partition)
            elif len(self._held) < share:
                wanted = share - len(self._held)
                params = {"count": self.count, "held": sorted(self._held), "lease": LEASE_CLASS, "wanted": wanted}
                self._held.update(int(taken) for (taken,) in conn.execute(_TAKE, params).fetchall())
        except (psycopg.Error, UnsupportedStore) as error:  # the database went away: hold nothing, reconnect later
            log.warning("event partition leases lost (%s); reconnecting at the next claim", str(error).strip()[:200])
            self.close()
        return EventPartitions(self.count, tuple(sorted(self._held)))

    def _open(self) -> psycopg.Connection[Any]:
        self._held.clear()  # a new session holds nothing
        conn = self._connect()
        conn.execute("SELECT pg_advisory_lock_shared(%s, 0)", [PRESENT_CLASS])
        self._conn = conn
        return conn

    def close(self) -> None:
        self._held.clear()
        conn, self._conn = self._conn, None
        if conn is not None:
            try:
                conn.close()  # every lock of the session goes with it
            except psycopg.Error:  # pragma: no cover - closing a broken connection
                pass
