"""Benchmark (issue 27): a tenant at every limit beside a normal tenant, on one `rewards-lab serve` on 127.0.0.1.

Two organizations on one server. The normal tenant runs a closed loop on a few connections: POST /events (its
programme issues a reward per event), GET /wallets/{id}/balances, and POST /customers (a write through the one
write lock). It runs alone first, then beside the heavy tenant, for the same time each. The heavy tenant holds
programmes at the limits: one with the most rules a version may hold (200, together just under the size limit),
one with the largest rules (two of about 420 kB), and in its loop it publishes them again and again (each
publish followed by an event, so the worker compiles the new version), simulates them with a long event (the
largest explanations, refused when over the bound), and tries a rule over each limit (refused). Prints the
normal tenant's p50/p99 per operation alone and beside the heavy one, and their ratio (goal: under 2x), the
server's resident memory before and after the heavy phase, what the heavy tenant got done, and a speed probe of
the machine before and after (benchmarks/machine.py). Asserts only correctness: the limits refused with their
code, every normal event processed, the ledger verified afterwards. Not a test: `make bench-tenants` runs it.
"""

from __future__ import annotations

import argparse
import json
import platform
import statistics
import sys
import tempfile
import threading
import time
from collections import defaultdict
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import httpx

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from machine import speed_probe  # noqa: E402  (benchmarks/machine.py, beside this script)

from tests.live_server import (  # noqa: E402
    LiveServer,
    bootstrap,
    cli,
    free_port,
    spawn,
    stop_and_verify,
    wait_until_serving,  # noqa: E402
)

RULES_AT_THE_LIMIT = 200  # contract.programme_limits.MAX_RULES_PER_VERSION (not imported: --unchecked runs old code)
MANY_VALUES = [f"{index:02d}" + "m" * 43 for index in range(100)]  # one `in` list of about 4.9 kB
WIDE_VALUES = [f"{index:03d}" + "w" * 197 for index in range(100)]  # 100 strings of 200 characters


def _ok(response: httpx.Response, status: int = 200) -> Any:
    body = response.json()
    assert response.status_code == status, str(body)[:300]
    return body["data"]


def _client(live: LiveServer, organization_id: str, key: str) -> httpx.Client:
    headers = {"Authorization": f"Bearer {key}", "X-Organization-ID": organization_id, "X-Environment": "sandbox"}
    return httpx.Client(base_url=live.base_url, headers=headers, timeout=120)


def _programme(http: httpx.Client, symbol: str) -> str:
    asset = _ok(http.post("/assets", json={"name": symbol, "symbol": symbol, "type": "points", "decimals": 2}), 201)
    _ok(http.post(f"/assets/{asset['id']}/activate"))
    return str(_ok(http.post("/reward-programs", json={"name": symbol, "asset_id": asset["id"]}), 201)["id"])


def _rule(program_id: str, event_type: str, conditions: list[dict[str, Any]]) -> dict[str, Any]:
    actions = [{"type": "issue", "amount": {"fixed": "1"}}]
    return {"program_id": program_id, "event_type": event_type, "conditions": conditions, "actions": actions}


def _customer(http: httpx.Client, external_id: str) -> str:
    customer = _ok(http.post("/customers", json={"external_id": external_id}), 201)
    return str(_ok(http.post("/wallets", json={"customer_id": customer["id"], "type": "customer"}), 201)["id"])


def _rss_mb(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return round(int(line.split()[1]) / 1024, 1)
    return 0.0


class HeavyTenant:
    """A tenant at every limit, and its loop of publishes, simulations and refused rules."""

    def __init__(self, http: httpx.Client, *, checked: bool = True) -> None:
        """`checked`: assert that the limits refuse (False only to measure code from before they existed)."""
        self.http = http
        _customer(http, "heavy-1")
        self.many = _programme(http, "MANY")
        condition = [{"field": "sku", "operator": "in", "value": MANY_VALUES}]
        for _ in range(RULES_AT_THE_LIMIT):  # 200 rules of about 5 kB: just under 1 MiB together
            _ok(http.post("/reward-rules", json=_rule(self.many, "order.completed", condition)), 201)
        over_count = http.post("/reward-rules", json=_rule(self.many, "order.completed", condition))
        self.wide = _programme(http, "WIDE")
        wide = [{"field": f"sku{n}", "operator": "in", "value": WIDE_VALUES} for n in range(20)]
        for _ in range(2):  # two rules of about 420 kB
            _ok(http.post("/reward-rules", json=_rule(self.wide, "review.posted", wide)), 201)
        over_size = http.post("/reward-rules", json=_rule(self.wide, "review.posted", wide))
        if checked:
            assert over_count.json()["error"]["details"]["limit"] == "rules_per_version", over_count.text[:300]
            assert over_size.json()["error"]["details"]["limit"] == "version_rules_bytes", over_size.text[:300]
        self.many_rules = len(_ok(http.get(f"/reward-programs/{self.many}/versions"))[-1]["rules"])
        for program_id in (self.many, self.wide):  # live from the start: the simulations read the live version
            _ok(http.post(f"/reward-programs/{program_id}/publish"), 201)
        self.done: dict[str, list[float]] = defaultdict(list)
        self.statuses: dict[str, dict[int, int]] = defaultdict(lambda: defaultdict(int))
        self.events = 0

    def _timed(self, name: str, call: Any) -> httpx.Response:
        started = time.perf_counter()
        response: httpx.Response = call()
        self.done[name].append((time.perf_counter() - started) * 1000)
        self.statuses[name][response.status_code] += 1
        return response

    def publish_loop(self, stop: threading.Event, events: bool = True) -> None:
        """Publish both programmes again and again; each new version is compiled by the worker for an event (an
        event of MANY issues 200 rewards). `events=False`: publishing alone."""
        while not stop.is_set():
            for program_id, event_type in ((self.many, "order.completed"), (self.wide, "review.posted")):
                self._timed("publish", lambda p=program_id: self.http.post(f"/reward-programs/{p}/publish"))
                if not events:
                    continue
                self.events += 1
                body = {"type": event_type, "external_event_id": f"heavy-{self.events}", "customer_id": "heavy-1"}
                body["data"] = {"sku": MANY_VALUES[0]}
                self._timed("event", lambda b=body: self.http.post("/events", json=b))

    def simulate_loop(self, stop: threading.Event) -> None:
        """The largest explanations: every rule reads the event's long value (refused over the bound)."""
        long_event = {"type": "order.completed", "sku": "s" * 16_000, **{f"sku{n}": "s" * 700 for n in range(20)}}
        while not stop.is_set():
            for program_id in (self.many, self.wide):
                path = f"/reward-programs/{program_id}/simulate?version=live"
                self._timed("simulate", lambda p=path: self.http.post(p, json={"event": long_event}))
            over = _rule(self.many, "order.completed", [])
            self._timed("rule over the limit", lambda body=over: self.http.post("/reward-rules", json=body))


class NormalTenant:
    def __init__(self, http: httpx.Client, connections: int) -> None:
        self.http = http
        self.program_id = _programme(http, "NORM")
        _ok(http.post("/reward-rules", json=_rule(self.program_id, "order.completed", [])), 201)
        _ok(http.post(f"/reward-programs/{self.program_id}/publish"), 201)
        self.wallets = [_customer(http, f"c{index}") for index in range(connections)]
        self.sequence = 0
        self.lock = threading.Lock()
        self.event_ids: list[str] = []

    def _next(self) -> int:
        with self.lock:
            self.sequence += 1
            return self.sequence

    def run(self, seconds: float, connections: int, clients: list[httpx.Client]) -> dict[str, list[float]]:
        latencies: dict[str, list[float]] = defaultdict(list)
        deadline = time.monotonic() + seconds

        def connection(index: int) -> None:
            http, wallet = clients[index], self.wallets[index]
            while time.monotonic() < deadline:
                number = self._next()
                operations = (
                    ("POST /events", "/events", self._event(number, index), 202),
                    ("GET balances", f"/wallets/{wallet}/balances", None, 200),
                    ("POST /customers", "/customers", {"external_id": f"n{number}"}, 201),
                )
                for name, path, body, status in operations:
                    started = time.perf_counter()
                    response = http.get(path) if body is None else http.post(path, json=body)
                    latencies[name].append((time.perf_counter() - started) * 1000)
                    assert response.status_code == status, response.text[:300]
                    if name == "POST /events":
                        with self.lock:
                            self.event_ids.append(response.json()["data"]["id"])

        threads = [threading.Thread(target=connection, args=(index,)) for index in range(connections)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
        return latencies

    @staticmethod
    def _event(number: int, index: int) -> dict[str, Any]:
        return {"type": "order.completed", "external_event_id": f"n-{number}", "customer_id": f"c{index}"}


def _percentiles(latencies: dict[str, list[float]]) -> dict[str, dict[str, float]]:
    figures = {}
    every = [value for values in latencies.values() for value in values]
    for name, values in sorted({**latencies, "all": every}.items()):
        ordered = sorted(values)
        figures[name] = {
            "requests": len(ordered),
            "p50_ms": round(statistics.median(ordered), 1),
            "p99_ms": round(ordered[min(len(ordered) - 1, int(len(ordered) * 0.99))], 1),
            "max_ms": round(ordered[-1], 1),
        }
    return figures


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seconds", type=float, default=30.0, help="length of each phase (alone, beside)")
    parser.add_argument("--connections", type=int, default=4, help="the normal tenant's connections")
    parser.add_argument(
        "--no-heavy-events", action="store_true", help="the heavy tenant publishes and simulates but sends no events"
    )
    parser.add_argument(
        "--unchecked", action="store_true", help="do not assert the limits (to measure a server from before them)"
    )
    args = parser.parse_args()
    print(f"machine: {platform.node()} {platform.machine()} python {platform.python_version()}")
    print(f"date: {datetime.now(UTC).isoformat(timespec='seconds')}")
    probe_before = speed_probe()
    with tempfile.TemporaryDirectory() as directory:
        db = Path(directory) / "service.duckdb"
        boots = [bootstrap(db, name, "--plan", "enterprise") for name in ("Heavy", "Normal")]
        port = free_port()
        log = (Path(directory) / "server.log").open("wb")
        process = spawn(cli("serve", "--db", str(db), "--port", str(port)), log)
        base_url = f"http://127.0.0.1:{port}/v1"
        wait_until_serving(base_url, process, log)
        keys: list[Any] = [boot["api_keys"] for boot in boots]
        organizations = [str(boot["organization_id"]) for boot in boots]
        live = LiveServer(db, base_url, organizations[1], keys[1], process, log, boots[1])
        heavy_http = _client(live, organizations[0], keys[0]["sandbox"])
        normal_clients = [_client(live, organizations[1], keys[1]["sandbox"]) for _ in range(args.connections)]
        started = time.perf_counter()
        heavy = HeavyTenant(heavy_http, checked=not args.unchecked)
        normal = NormalTenant(normal_clients[0], args.connections)
        print(f"set-up: {time.perf_counter() - started:.1f} s; the heavy tenant holds {heavy.many_rules} rules")

        rss_before = _rss_mb(process.pid)
        alone = normal.run(args.seconds, args.connections, normal_clients)
        stop = threading.Event()
        loops = [
            threading.Thread(target=heavy.publish_loop, args=(stop, not args.no_heavy_events)),
            threading.Thread(target=heavy.simulate_loop, args=(stop,)),
        ]
        for loop in loops:
            loop.start()
        beside = normal.run(args.seconds, args.connections, normal_clients)
        stop.set()
        for loop in loops:
            loop.join()
        rss_after = _rss_mb(process.pid)

        deadline = time.monotonic() + 120
        for event_id in normal.event_ids[-20:]:
            while _ok(normal_clients[0].get(f"/events/{event_id}"))["status"] == "received":
                assert time.monotonic() < deadline, "the normal tenant's events were not processed"
                time.sleep(0.1)
        for client in [heavy_http, *normal_clients]:
            client.close()
        stop_and_verify(live)

    report = {
        "alone": _percentiles(alone),
        "beside_heavy": _percentiles(beside),
        "heavy": {
            name: {"requests": len(values), "p50_ms": round(statistics.median(values), 1), "statuses": dict(status)}
            for (name, values), status in ((item, heavy.statuses[item[0]]) for item in sorted(heavy.done.items()))
        },
        "server_rss_mb": {"before_heavy": rss_before, "after_heavy": rss_after},
        "speed_probe_ms": {"before": probe_before, "after": speed_probe()},
    }
    ratios = {
        name: round(report["beside_heavy"][name]["p99_ms"] / report["alone"][name]["p99_ms"], 2)
        for name in report["alone"]
    }
    report["p99_ratio_beside_over_alone"] = ratios
    print(json.dumps(report, indent=1))
    print(f"normal tenant p99 beside the heavy one / alone: {ratios} (goal: under 2x)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
