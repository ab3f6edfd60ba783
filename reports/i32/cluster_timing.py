"""How long the throwaway cluster (tests/pg_cluster.py) takes: start (initdb + pg_ctl start), a fresh database,
stop (pg_ctl stop + rm). Run: PYTHONPATH=. python reports/i32/cluster_timing.py [rounds]"""

from __future__ import annotations

import statistics
import sys
import time

import psycopg

from tests.pg_cluster import PgCluster


def main(rounds: int) -> None:
    starts, stops, creates, drops, connects = [], [], [], [], []
    for _ in range(rounds):
        t0 = time.perf_counter()
        cluster = PgCluster.start()
        starts.append(time.perf_counter() - t0)
        try:
            with psycopg.connect(cluster.dsn(), autocommit=True) as admin:
                for i in range(5):
                    t0 = time.perf_counter()
                    admin.execute(f"CREATE DATABASE t{i} TEMPLATE template0")
                    creates.append(time.perf_counter() - t0)
                    t0 = time.perf_counter()
                    psycopg.connect(cluster.dsn(f"t{i}")).close()
                    connects.append(time.perf_counter() - t0)
                    t0 = time.perf_counter()
                    admin.execute(f"DROP DATABASE t{i} WITH (FORCE)")
                    drops.append(time.perf_counter() - t0)
        finally:
            t0 = time.perf_counter()
            cluster.stop()
            stops.append(time.perf_counter() - t0)
    for name, values in [
        ("start", starts),
        ("stop", stops),
        ("create database", creates),
        ("connect (scram, TCP)", connects),
        ("drop database", drops),
    ]:
        print(
            f"{name:22s} median {statistics.median(values) * 1000:7.0f} ms  max {max(values) * 1000:7.0f} ms"
            f"  (n={len(values)})"
        )


if __name__ == "__main__":
    main(int(sys.argv[1]) if len(sys.argv) > 1 else 5)
