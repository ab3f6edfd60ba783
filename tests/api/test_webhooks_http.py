"""Signed webhooks end to end: a real server process, a real receiver on 127.0.0.1, retries, replay, test
deliveries, secrets shown once, tenancy. The retry schedule is shortened through the environment of `serve`."""

from __future__ import annotations

import json
import re
import threading
import time
from collections.abc import Iterator
from contextlib import ExitStack
from http.server import ThreadingHTTPServer
from pathlib import Path
from typing import Any

import httpx
import pytest

from rewards_lab.contract.webhook_signatures import (
    SIGNATURE_HEADER,
    TIMESTAMPED_SIGNATURE_HEADER,
    sign,
    sign_timestamped,
    verify,
)
from tests.live_server import LiveServer, bootstrap, free_port, postgres_server, start_server
from tests.webhook_receiver import Receiver, ok, rewarding_world, wait_until

RETRY_DELAYS = "0.2,0.2,0.2"  # four attempts in all
TIMEOUT_S = "1"


@pytest.fixture(scope="module", params=["duckdb", "postgres"])
def server(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[tuple[LiveServer, dict[str, Any]]]:
    """Acme's server and a second organization on the same database: a DuckDB file, then (issue 32's HTTP
    contract smoke) a PostgreSQL database served by two processes, whose delivery workers both claim deliveries."""
    folder = tmp_path_factory.mktemp("webhooks")
    with ExitStack() as stack:
        with pytest.MonkeyPatch.context() as env:
            env.setenv("REWARDS_LAB_WEBHOOK_RETRY_DELAYS", RETRY_DELAYS)
            env.setenv("REWARDS_LAB_WEBHOOK_TIMEOUT_S", TIMEOUT_S)
            env.setenv("REWARDS_LAB_WEBHOOK_ALLOW_PRIVATE", "1")  # the receivers listen on 127.0.0.1
            if request.param == "duckdb":
                db = folder / "service.duckdb"
                other = bootstrap(db, "Other Org")  # a second organization on the same file, bootstrapped first
                live = start_server(db, "Acme", "--plan", "enterprise")
            else:
                request.getfixturevalue("pg_template")  # the databases' template, made once per session
                cluster = request.getfixturevalue("pg_cluster")
                live = stack.enter_context(postgres_server(cluster, folder, "--plan", "enterprise"))
                other = bootstrap(live.db, "Other Org")
        yield live, other
        live.stop()


@pytest.fixture(scope="module")
def world(server: tuple[LiveServer, dict[str, Any]]) -> dict[str, str]:
    live, _ = server
    with httpx.Client(base_url=live.base_url, headers=live.headers(), timeout=10) as http:
        return rewarding_world(http)


def _client(live: LiveServer, environment: str = "sandbox") -> httpx.Client:
    return httpx.Client(base_url=live.base_url, headers=live.headers(environment), timeout=10)


def _register(http: httpx.Client, url: str, events: list[str]) -> dict[str, Any]:
    created: dict[str, Any] = ok(http.post("/webhooks", json={"url": url, "events": events}), 201)
    assert created["signing_secret"].startswith("whsec_") and created["status"] == "enabled"
    return created


def _deliveries(http: httpx.Client, webhook_id: str) -> list[dict[str, Any]]:
    listed: list[dict[str, Any]] = ok(http.get(f"/webhooks/{webhook_id}/deliveries", params={"limit": 100}))
    return listed


def _settled(http: httpx.Client, webhook_id: str, count: int) -> list[dict[str, Any]]:
    """Wait until the endpoint has `count` deliveries and none is pending."""

    def check() -> list[dict[str, Any]] | None:
        listed = _deliveries(http, webhook_id)
        return listed if len(listed) == count and all(d["status"] != "pending" for d in listed) else None

    settled: list[dict[str, Any]] = wait_until(check)
    return settled


def test_reward_issued_is_delivered_signed_and_verifiable(
    server: tuple[LiveServer, dict[str, Any]], world: dict[str, str]
) -> None:
    live, _ = server
    receiver = Receiver()
    try:
        with _client(live) as http:
            endpoint = _register(http, receiver.url, ["reward.issued", "wallet.frozen"])
            secret = endpoint["signing_secret"]
            for number, amount in enumerate((42.5, 10, 7.25)):
                event = {
                    "type": "order.completed",
                    "external_event_id": f"signed-{number}",
                    "customer_id": "user-42",
                    "data": {"amount": amount},
                }
                ok(http.post("/events", json=event), 202)
            got = receiver.wait_for(lambda seen: len(seen) >= 3)
            for delivery in got:
                signature = delivery.headers[SIGNATURE_HEADER]
                assert signature.startswith("sha256=") and verify(delivery.raw, signature, secret)
                assert not verify(delivery.raw + b" ", signature, secret)  # tampered body
                tampered = delivery.raw.replace(b'"amount":"', b'"amount":"9')
                assert tampered != delivery.raw and not verify(tampered, signature, secret)
                assert not verify(delivery.raw, signature, secret + "x")  # wrong secret
                assert not verify(delivery.raw, signature.replace("sha256=", "sha1="), secret)
                assert delivery.headers["X-Rewards-Delivery"] == delivery.body["id"]
                assert delivery.headers["X-Rewards-Event"] == "reward.issued"
                assert delivery.headers["Content-Type"] == "application/json"
            bodies = sorted((d.body for d in got), key=lambda b: b["data"]["external_event_id"])
            assert [b["data"]["amount"] for b in bodies] == ["4.25", "1.00", "0.72"]
            first = bodies[0]
            assert set(first) == {"id", "kind", "created_at", "organization_id", "environment", "data"}
            assert first["kind"] == "reward.issued" and first["environment"] == "sandbox"
            assert first["organization_id"] == live.organization_id and first["created_at"].endswith("Z")
            assert first["data"]["wallet_id"] == world["wallet_id"] and first["data"]["asset_id"] == world["asset_id"]
            executions = ok(http.get("/reward-executions", params={"event_id": first["data"]["event_id"]}))
            assert [e["id"] for e in executions] == [first["data"]["execution_id"]]

            listed = _settled(http, endpoint["id"], 3)
            assert {d["id"] for d in listed} == {d.body["id"] for d in got}
            for delivery in listed:
                assert delivery["status"] == "succeeded" and delivery["attempt_count"] == 1
                assert [(a["number"], a["status_code"], a["succeeded"]) for a in delivery["attempts"]] == [
                    (1, 200, True)
                ]
                raw = next(d.raw for d in got if d.body["id"] == delivery["id"])
                assert delivery["body"].encode() == raw  # the stored body is the exact signed bytes

            # other kinds: freezing a wallet (subscribed) is delivered; pausing an asset (not subscribed) is not
            other_customer = ok(http.post("/customers", json={"external_id": "freezer"}), 201)
            wallet = ok(http.post("/wallets", json={"customer_id": other_customer["id"], "type": "customer"}), 201)
            ok(http.post(f"/wallets/{wallet['id']}/freeze"), 200)
            frozen = receiver.wait_for(lambda seen: any(d.body["kind"] == "wallet.frozen" for d in seen))
            body = next(d for d in frozen if d.body["kind"] == "wallet.frozen")
            assert body.body["data"]["id"] == wallet["id"] and body.body["data"]["status"] == "frozen"
            assert verify(body.raw, body.headers[SIGNATURE_HEADER], secret)
    finally:
        receiver.close()


def test_a_test_delivery_is_signed_and_the_secret_is_never_readable_again(
    server: tuple[LiveServer, dict[str, Any]],
) -> None:
    live, other = server
    receiver = Receiver()
    try:
        with _client(live) as http:
            endpoint = _register(http, receiver.url, ["asset.paused"])
            secret = endpoint["signing_secret"]
            queued = ok(http.post(f"/webhooks/{endpoint['id']}/test"), 202)
            assert queued["kind"] == "webhook.test" and queued["status"] == "pending"
            (got,) = receiver.wait_for(lambda seen: len(seen) == 1)
            assert verify(got.raw, got.headers[SIGNATURE_HEADER], secret)
            assert got.body["id"] == queued["id"] and got.body["data"]["webhook_id"] == endpoint["id"]

            # the secret appears in no later answer: get, list, deliveries, disable
            reads = [
                http.get(f"/webhooks/{endpoint['id']}"),
                http.get("/webhooks", params={"limit": 100}),
                http.get(f"/webhooks/{endpoint['id']}/deliveries"),
            ]
            for response in reads:
                assert response.status_code == 200 and secret not in response.text
                assert secret[len("whsec_") :] not in response.text
            fetched = ok(reads[0])
            assert "signing_secret" not in fetched and fetched["secret_prefix"] == secret[:12]
            assert endpoint["id"] in {w["id"] for w in ok(reads[1])}

            # other tenants see nothing: production of the same organization, and another organization
            with _client(live, "production") as production:
                missing = production.get(f"/webhooks/{endpoint['id']}")
                assert missing.status_code == 404 and missing.json()["error"]["code"] == "webhook_not_found"
                assert ok(production.get("/webhooks")) == []
                denied = production.get(f"/webhooks/{endpoint['id']}/deliveries")
                assert denied.json()["error"]["code"] == "webhook_not_found"
            keys = other["api_keys"]
            assert isinstance(keys, dict)
            foreign = {
                "Authorization": f"Bearer {keys['sandbox']}",
                "X-Organization-ID": str(other["organization_id"]),
                "X-Environment": "sandbox",
            }
            with httpx.Client(base_url=live.base_url, headers=foreign, timeout=10) as stranger:
                assert stranger.get(f"/webhooks/{endpoint['id']}").status_code == 404
                assert ok(stranger.get("/webhooks")) == []
                assert stranger.post(f"/webhooks/{endpoint['id']}/test").status_code == 404

            # disabling stops deliveries; a disabled endpoint takes no test
            disabled = ok(http.delete(f"/webhooks/{endpoint['id']}"), 200)
            assert disabled["status"] == "disabled" and secret not in json.dumps(disabled)
            again = http.delete(f"/webhooks/{endpoint['id']}")
            assert again.json()["error"]["code"] == "invalid_state_transition"
            refused = http.post(f"/webhooks/{endpoint['id']}/test")
            assert refused.status_code == 409 and refused.json()["error"]["code"] == "invalid_state_transition"
    finally:
        receiver.close()


def test_retries_with_backoff_then_success(server: tuple[LiveServer, dict[str, Any]], world: dict[str, str]) -> None:
    live, _ = server
    receiver = Receiver()
    receiver.answer([1.5, 500])  # a timeout (the sender waits 1 s), an HTTP 500, then 200
    try:
        with _client(live) as http:
            endpoint = _register(http, receiver.url, ["reward.issued"])
            event = {"type": "order.completed", "external_event_id": "flaky-1", "customer_id": "user-42"}
            ok(http.post("/events", json={**event, "data": {"amount": 30}}), 202)
            (delivery,) = _settled(http, endpoint["id"], 1)
            assert delivery["status"] == "succeeded" and delivery["attempt_count"] == 3
            attempts = delivery["attempts"]
            assert [(a["number"], a["status_code"], a["error"], a["succeeded"]) for a in attempts] == [
                (1, None, "timeout", False),
                (2, 500, "http_5xx", False),
                (3, 200, None, True),
            ]
            assert attempts[0]["duration_ms"] >= 900
            got = receiver.wait_for(lambda seen: len(seen) == 3)  # the timed-out request is recorded last
            assert len({d.raw for d in got}) == 1  # the same body (and id) every time
            assert all(verify(d.raw, d.headers[SIGNATURE_HEADER], endpoint["signing_secret"]) for d in got)
    finally:
        receiver.close()


def test_a_failing_endpoint_ends_failed_and_a_replay_after_the_fix_succeeds(
    server: tuple[LiveServer, dict[str, Any]], world: dict[str, str]
) -> None:
    live, _ = server
    port = free_port()  # nothing listens there yet: every attempt is refused
    with _client(live) as http:
        endpoint = _register(http, f"http://127.0.0.1:{port}/hooks", ["wallet.frozen"])
        customer = ok(http.post("/customers", json={"external_id": "refused"}), 201)
        wallet = ok(http.post("/wallets", json={"customer_id": customer["id"], "type": "customer"}), 201)
        ok(http.post(f"/wallets/{wallet['id']}/freeze"), 200)
        (failed,) = _settled(http, endpoint["id"], 1)
        assert failed["status"] == "failed" and failed["attempt_count"] == 4 and failed["completed_at"]
        assert [a["error"] for a in failed["attempts"]] == ["refused"] * 4
        times = [a["attempted_at"] for a in failed["attempts"]]
        assert times == sorted(times)

        receiver = Receiver(port=port)  # the fix
        try:
            replay_path = f"/webhooks/{endpoint['id']}/deliveries/{failed['id']}/replay"
            replayed = ok(http.post(replay_path, headers={"Idempotency-Key": "replay-1"}), 202)
            assert replayed["status"] == "pending" and replayed["attempt_count"] == 4
            (got,) = receiver.wait_for(lambda seen: len(seen) == 1)
            assert got.body["id"] == failed["id"] and got.raw == failed["body"].encode()
            assert got.headers[SIGNATURE_HEADER] == sign(got.raw, endpoint["signing_secret"])
            (done,) = _settled(http, endpoint["id"], 1)
            assert done["status"] == "succeeded" and [a["succeeded"] for a in done["attempts"]] == [False] * 4 + [True]
            # the same key again returns the first answer and sends nothing; a new key is refused (not failed)
            assert ok(http.post(replay_path, headers={"Idempotency-Key": "replay-1"}), 202) == replayed
            refused = http.post(replay_path)
            assert refused.status_code == 409 and refused.json()["error"]["code"] == "webhook_delivery_not_replayable"
            assert len(receiver.snapshot()) == 1
            missing = http.post(f"/webhooks/{endpoint['id']}/deliveries/dlv_{'0' * 32}/replay")
            assert missing.status_code == 404 and missing.json()["error"]["code"] == "webhook_delivery_not_found"
        finally:
            receiver.close()


def test_registration_is_validated_and_gated(server: tuple[LiveServer, dict[str, Any]]) -> None:
    live, _ = server
    with _client(live) as http:
        bad_kind = http.post("/webhooks", json={"url": "http://127.0.0.1:9/x", "events": ["reward.issued", "nope"]})
        assert bad_kind.status_code == 422
        assert bad_kind.json()["error"]["code"] == "webhook_event_kind_invalid"
        assert bad_kind.json()["error"]["details"]["field"] == "events[1]"
        bad_url = http.post("/webhooks", json={"url": "ftp://example.com/x", "events": ["reward.issued"]})
        assert bad_url.json()["error"]["code"] == "webhook_url_invalid"
        assert bad_url.json()["error"]["details"]["field"] == "url"
        viewer = ok(
            http.post("/developer/api-keys", json={"name": "viewer", "permissions": ["developers.webhooks.view"]})
        )
    with _client(live, "production") as production:
        plain = production.post("/webhooks", json={"url": "http://example.com/hooks", "events": ["reward.issued"]})
        assert plain.json()["error"]["code"] == "webhook_url_invalid"
        # this server allows private targets (its receivers are local); link-local is refused even so. Loopback
        # without the setting: tests/security/test_hardening_webhooks_targets.py
        local = production.post("/webhooks", json={"url": "https://169.254.169.254/x", "events": ["reward.issued"]})
        assert local.json()["error"]["code"] == "webhook_url_invalid"
        public = production.post("/webhooks", json={"url": "https://hooks.example.com/r", "events": ["asset.paused"]})
        assert public.status_code == 201
    headers = {**live.headers(), "Authorization": f"Bearer {viewer['secret']}"}
    with httpx.Client(base_url=live.base_url, headers=headers, timeout=10) as limited:
        assert limited.get("/webhooks").status_code == 200
        denied = limited.post("/webhooks", json={"url": "http://127.0.0.1:9/x", "events": ["reward.issued"]})
        assert denied.status_code == 403 and denied.json()["error"]["code"] == "permission_denied"


def test_health_reports_queues_and_workers_without_credentials(server: tuple[LiveServer, dict[str, Any]]) -> None:
    live, _ = server
    response = httpx.get(f"{live.base_url}/health", timeout=10)
    health = ok(response, 200)
    queues = {"intake_waiting", "event_queue_depth", "outbox_undispatched", "pending_deliveries"}
    assert set(health) == {"status", "workers", "request_log_dropped", *queues}
    assert health["status"] == "ok" and health["workers"]["events"]["alive"]
    assert health["workers"]["deliveries"]["alive"] and health["workers"]["deliveries"]["last_cycle_at"]
    assert all(isinstance(health[name], int) and health[name] >= 0 for name in queues)
    assert live.organization_id not in response.text


def test_the_documented_python_receiver_accepts_our_deliveries_and_refuses_forgeries(
    server: tuple[LiveServer, dict[str, Any]], world: dict[str, str], monkeypatch: pytest.MonkeyPatch
) -> None:
    live, _ = server
    document = (Path(__file__).resolve().parents[2] / "docs" / "webhooks.md").read_text()
    example = re.findall(r"```python\n(.*?)```", document, flags=re.S)[0]
    port = free_port()
    with _client(live) as http:
        endpoint = _register(http, f"http://127.0.0.1:{port}/hooks", ["reward.issued"])
        monkeypatch.setenv("REWARDS_WEBHOOK_SECRET", endpoint["signing_secret"])
        namespace: dict[str, Any] = {"__name__": "docs_example"}
        exec(compile(example, "docs/webhooks.md", "exec"), namespace)  # noqa: S102 - the documented example
        receiver = ThreadingHTTPServer(("127.0.0.1", port), namespace["Receiver"])
        threading.Thread(target=receiver.serve_forever, daemon=True).start()
        try:
            event = {"type": "order.completed", "external_event_id": "documented-1", "customer_id": "user-42"}
            ok(http.post("/events", json={**event, "data": {"amount": 20}}), 202)
            ok(http.post(f"/webhooks/{endpoint['id']}/test"), 202)
            (reward, test) = sorted(_settled(http, endpoint["id"], 2), key=lambda d: d["kind"])
            assert reward["status"] == test["status"] == "succeeded"
            assert [a["status_code"] for a in reward["attempts"]] == [204]
            assert namespace["seen"] == {reward["id"], test["id"]}
            # a forged body, a wrong signature: 401; the same delivery again is acknowledged and not handled twice
            raw = reward["body"].encode()
            secret = endpoint["signing_secret"]
            target = f"http://127.0.0.1:{port}/hooks"

            def post(headers: dict[str, str]) -> int:
                return httpx.post(target, content=raw, headers=headers, timeout=5).status_code

            forged = httpx.post(
                target, content=raw + b" ", headers={TIMESTAMPED_SIGNATURE_HEADER: sign_timestamped(raw, ["x"])}
            )
            assert forged.status_code == 401 and post({}) == 401
            stale = sign_timestamped(raw, [secret], int(time.time()) - 600)  # captured 10 minutes ago
            assert post({TIMESTAMPED_SIGNATURE_HEADER: stale, SIGNATURE_HEADER: sign(raw, secret)}) == 401
            assert post({TIMESTAMPED_SIGNATURE_HEADER: sign_timestamped(raw, [secret])}) == 204
            assert namespace["seen"] == {reward["id"], test["id"]}
            namespace["TIMESTAMPED"] = False  # the documented switch to the GitHub-style header
            assert post({SIGNATURE_HEADER: sign(raw, "x")}) == 401
            assert post({SIGNATURE_HEADER: sign(raw, secret)}) == 204 and namespace["seen"] == {
                reward["id"],
                test["id"],
            }
        finally:
            receiver.shutdown()
            receiver.server_close()


def test_a_failed_event_replayed_after_the_fix_is_delivered_once(
    server: tuple[LiveServer, dict[str, Any]], world: dict[str, str]
) -> None:
    live, _ = server
    receiver = Receiver()
    try:
        with _client(live) as http:
            endpoint = _register(http, receiver.url, ["reward.issued"])
            customer = ok(http.post("/customers", json={"external_id": "frozen-buyer"}), 201)
            wallet = ok(http.post("/wallets", json={"customer_id": customer["id"], "type": "customer"}), 201)
            ok(http.post(f"/wallets/{wallet['id']}/freeze"), 200)
            body = {"type": "order.completed", "external_event_id": "frozen-1", "customer_id": "frozen-buyer"}
            event = ok(http.post("/events", json={**body, "data": {"amount": 50}}), 202)
            failed = wait_until(lambda: (e := ok(http.get(f"/events/{event['id']}")))["status"] == "failed" and e)
            assert failed["error"]["code"] == "wallet_frozen"
            ok(http.post(f"/wallets/{wallet['id']}/unfreeze"), 200)
            assert ok(http.post(f"/events/{event['id']}/replay"))["status"] == "processed"
            (got,) = receiver.wait_for(lambda seen: len(seen) == 1)
            assert got.body["data"]["event_id"] == event["id"] and got.body["data"]["amount"] == "5.00"
            again = http.post(f"/events/{event['id']}/replay")
            assert again.status_code == 409 and again.json()["error"]["code"] == "event_not_replayable"
            (delivery,) = _settled(http, endpoint["id"], 1)
            assert delivery["status"] == "succeeded" and len(receiver.snapshot()) == 1
    finally:
        receiver.close()
