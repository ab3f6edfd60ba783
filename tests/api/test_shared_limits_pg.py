"""Two `rewards-lab serve` processes on one PostgreSQL database (two nodes behind a load balancer, each its own
port so that the test chooses which one answers; issue 32, increment 8): a tenant's limit of N a minute allows N
across both then 429 in the seed's envelope from either, concurrent identical keyed writes through both apply once,
and a key revoked through one is refused by the other at once (no principal cache on PostgreSQL)."""

from __future__ import annotations

import base64
import os
import secrets
import signal
import threading
import time
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import httpx
import psycopg
import pytest

from rewards_lab.api.rate_limits import WINDOW_S
from rewards_lab.store.secret_box import KEY_ENV
from tests.live_server import LiveServer, bootstrap, cli, free_port, spawn, wait_until_serving
from tests.pg_cluster import PG_SECRET_KEY, PgCluster

SMALL_LIMIT = 12
# Both servers poll-start from 127.0.0.1, and the address budget is shared by the two processes now: room for it.
SERVE_ARGS = ("--unauthenticated-limit-per-minute", "10000")


def _ok(response: httpx.Response, status: int) -> dict[str, Any]:
    body = response.json()
    assert response.status_code == status, body
    data: dict[str, Any] = body["data"]
    return data


@pytest.fixture(scope="module")
def two_nodes(
    pg_cluster: PgCluster, pg_template: str, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[tuple[LiveServer, LiveServer, dict[str, object]]]:
    """Servers A and B on one database cloned from the template; "Acme" (bootstrapped by A's start) and "Small"
    (a limit of SMALL_LIMIT a minute). Yields A, B (Acme's keys on B's address) and Small's bootstrap."""
    name = f"t_{secrets.token_hex(6)}"
    with psycopg.connect(pg_cluster.dsn(), autocommit=True) as admin:
        admin.execute(f'CREATE DATABASE "{name}" TEMPLATE "{pg_template}"')
    url = pg_cluster.dsn(name)
    saved = os.environ.get(KEY_ENV)
    os.environ[KEY_ENV] = base64.urlsafe_b64encode(PG_SECRET_KEY).decode("ascii")
    logs = tmp_path_factory.mktemp("two_nodes")
    servers: list[LiveServer] = []
    try:
        with ThreadPoolExecutor(max_workers=2) as pool:  # the two bootstraps at once: each a CLI start-up
            acme, small = pool.map(lambda extra: bootstrap(url, *extra), [("Acme",), ("Small", "--rate-limit", "12")])
        keys = acme["api_keys"]
        assert isinstance(keys, dict) and SMALL_LIMIT == 12
        for node in ("a", "b"):  # both started, then both waited for
            port = free_port()
            log = (logs / f"{node}.log").open("wb")
            process = spawn(cli("serve", "--db", url, "--port", str(port), *SERVE_ARGS), log)
            base_url = f"http://127.0.0.1:{port}/v1"
            servers.append(LiveServer(url, base_url, str(acme["organization_id"]), keys, process, log, acme))
        for server in servers:
            wait_until_serving(server.base_url, server.process, server.log)
        yield servers[0], servers[1], small
    finally:
        for server in servers:  # both signalled, then both waited for
            if server.process.poll() is None:
                server.process.send_signal(signal.SIGTERM)
        for server in servers:
            server.stop()
        if saved is None:
            os.environ.pop(KEY_ENV, None)
        else:
            os.environ[KEY_ENV] = saved
        with psycopg.connect(pg_cluster.dsn(), autocommit=True) as admin:
            admin.execute(f'DROP DATABASE "{name}" WITH (FORCE)')


def test_a_tenant_limit_allows_exactly_n_a_minute_across_both_processes(
    two_nodes: tuple[LiveServer, LiveServer, dict[str, object]],
) -> None:
    a, b, small = two_nodes
    keys = small["api_keys"]
    assert isinstance(keys, dict)
    headers = {
        "Authorization": f"Bearer {keys['sandbox']}",
        "X-Organization-ID": str(small["organization_id"]),
        "X-Environment": "sandbox",
    }
    if time.time() % WINDOW_S > WINDOW_S - 8:  # the burst must fit in one fixed window
        time.sleep(WINDOW_S - time.time() % WINDOW_S + 0.2)
    window = int(time.time() // WINDOW_S)
    with httpx.Client(headers=headers, timeout=10) as http:
        answers = [http.get(f"{(a, b)[i % 2].base_url}/customers") for i in range(SMALL_LIMIT)]
        refused = [http.get(f"{server.base_url}/customers") for server in (a, b, a)]
    assert int(time.time() // WINDOW_S) == window, "the minute turned during the burst"
    assert [r.status_code for r in answers] == [200] * SMALL_LIMIT
    assert [int(r.headers["RateLimit-Remaining"]) for r in answers] == list(range(SMALL_LIMIT - 1, -1, -1))
    for response in refused:
        body = response.json()
        assert response.status_code == 429, body
        assert set(body) == {"error", "meta"} and body["error"]["code"] == "rate_limit_exceeded"
        assert body["error"]["details"]["limit"] == SMALL_LIMIT
        assert response.headers["RateLimit-Limit"] == str(SMALL_LIMIT)
        assert response.headers["RateLimit-Remaining"] == "0"
        assert 1 <= int(response.headers["Retry-After"]) <= WINDOW_S
    with httpx.Client(headers=a.headers(), timeout=10) as http:  # another tenant is not held by it
        assert http.get(f"{b.base_url}/customers").status_code == 200


def test_concurrent_identical_keyed_writes_through_both_processes_apply_once(
    two_nodes: tuple[LiveServer, LiveServer, dict[str, object]],
) -> None:
    a, b, _ = two_nodes
    with httpx.Client(base_url=a.base_url, headers=a.headers(), timeout=10) as http:
        customer = _ok(http.post("/customers", json={"external_id": "twice"}), 201)
        wallet = _ok(http.post("/wallets", json={"customer_id": customer["id"], "type": "customer"}), 201)
        asset = _ok(http.post("/assets", json={"name": "Pts", "symbol": "PTS", "type": "points", "decimals": 0}), 201)
        _ok(http.post(f"/assets/{asset['id']}/activate"), 200)
    keys = [f"twice-{i}" for i in range(8)]
    issue = {"wallet_id": wallet["id"], "amount": "1", "reason": "once"}
    barrier = threading.Barrier(2)
    clients = [httpx.Client(base_url=server.base_url, headers=a.headers(), timeout=20) for server in (a, b)]

    def post(node: int, key: str) -> httpx.Response:
        barrier.wait(10)
        return clients[node].post(f"/assets/{asset['id']}/issue", json=issue, headers={"Idempotency-Key": key})

    try:
        with ThreadPoolExecutor(max_workers=2) as pool:
            pairs = [tuple(pool.map(post, (0, 1), (key, key))) for key in keys]
        for first, second in pairs:
            statuses = sorted((first.status_code, second.status_code))
            assert statuses in ([201, 201], [201, 409]), (first.text, second.text)
            if statuses == [201, 201]:
                assert first.json()["data"] == second.json()["data"]  # the replay of the one write
            else:
                refused = first if first.status_code == 409 else second
                assert refused.json()["error"]["code"] == "idempotency_request_in_progress"
        balances = _ok(clients[1].get(f"/wallets/{wallet['id']}/balances"), 200)["balances"]
        assert [b_["balance"] for b_ in balances] == [str(len(keys))]  # each key applied once
    finally:
        for client in clients:
            client.close()
    with psycopg.connect(str(a.db)) as conn:
        issued = conn.execute(
            "SELECT count(*) FROM transactions WHERE kind = 'issue' AND destination_account_id = %s", [wallet["id"]]
        ).fetchone()
    assert issued == (len(keys),)


def test_a_key_revoked_through_one_process_is_refused_by_the_other_at_once(
    two_nodes: tuple[LiveServer, LiveServer, dict[str, object]],
) -> None:
    a, b, _ = two_nodes
    with httpx.Client(headers=a.headers(), timeout=10) as http:
        created = _ok(
            http.post(
                f"{a.base_url}/developer/api-keys", json={"name": "short-lived", "permissions": ["customers.view"]}
            ),
            201,
        )
        headers = {**a.headers(), "Authorization": f"Bearer {created['secret']}"}
        for _ in range(3):  # B has read the key (and, with a principal cache, would remember it)
            assert http.get(f"{b.base_url}/customers", headers=headers).status_code == 200
        _ok(http.delete(f"{a.base_url}/developer/api-keys/{created['id']}"), 200)
        refused = http.get(f"{b.base_url}/customers", headers=headers)
    assert refused.status_code == 401, refused.text
    assert refused.json()["error"]["code"] == "api_key_revoked"


def test_the_logs_show_no_server_error(two_nodes: tuple[LiveServer, LiveServer, dict[str, object]]) -> None:
    for server in two_nodes[:2]:
        assert isinstance(server, LiveServer)
        server.log.flush()
        assert "Traceback" not in Path(server.log.name).read_text()
