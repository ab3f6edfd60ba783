"""Timestamped signatures (issue 14, item 11) and signing secrets at rest and in rotation (item 10, webhooks).

`X-Rewards-Signature: t=<unix>,v1=<hex>` (Stripe's form) beside the unchanged GitHub-style header; a verifier with a
tolerance refuses replays; secrets are sealed in the file (plaintext rows from before still sign, and are sealed
when the database opens); `POST /webhooks/{id}/rotate-secret` shows the new secret once and both secrets sign during
the grace period."""

from __future__ import annotations

import hashlib
import hmac
import time
from collections.abc import Iterator
from datetime import timedelta
from pathlib import Path
from typing import Any

import duckdb
import httpx
import pytest
from hypothesis import given
from hypothesis import strategies as st

from rewards_lab.contract import requests as rq
from rewards_lab.contract.scope import Scope
from rewards_lab.contract.validation import validate
from rewards_lab.contract.webhook_signatures import (
    SIGNATURE_HEADER,
    TIMESTAMPED_SIGNATURE_HEADER,
    sign,
    sign_timestamped,
    verify,
    verify_timestamped,
)
from rewards_lab.security import webhook_secrets
from rewards_lab.service import webhooks as hooks
from rewards_lab.store.database import Database, utcnow
from rewards_lab.store.schema import MIGRATIONS
from rewards_lab.store.uow import reader
from tests.live_server import LiveServer, bootstrap, cli, free_port, spawn, start_server, wait_until_serving
from tests.webhook_receiver import Receiver, ok

BODY = b'{"id":"dlv_1","kind":"reward.issued","data":{"amount":"2.12"}}'


@given(body=st.binary(max_size=2048), secret=st.text(min_size=1, max_size=64), t=st.integers(0, 2**40))
def test_the_timestamped_signature_is_hmac_of_t_dot_body(body: bytes, secret: str, t: int) -> None:
    expected = hmac.new(secret.encode(), str(t).encode() + b"." + body, hashlib.sha256).hexdigest()
    header = sign_timestamped(body, [secret], t)
    assert header == f"t={t},v1={expected}"
    assert verify_timestamped(body, header, secret, now=t)


def test_the_verifier_refuses_replays_tampering_and_garbage() -> None:
    now = 1_800_000_000
    header = sign_timestamped(BODY, ["whsec_a"], now)
    assert verify_timestamped(BODY, header, "whsec_a", now=now + 300)
    assert not verify_timestamped(BODY, header, "whsec_a", now=now + 301)  # a captured delivery, replayed later
    assert not verify_timestamped(BODY, header, "whsec_a", now=now - 301)  # from the future
    assert verify_timestamped(BODY, header, "whsec_a", now=now + 3000, tolerance_s=3600)
    assert not verify_timestamped(BODY + b" ", header, "whsec_a", now=now)
    assert not verify_timestamped(BODY, header, "whsec_b", now=now)
    forged_time = header.replace(f"t={now}", f"t={now + 100}")  # a fresh time on an old signature
    assert not verify_timestamped(BODY, forged_time, "whsec_a", now=now + 100)
    for garbage in (None, "", "t=abc,v1=00", f"t={now}", "v1=" + header.split("v1=")[1], "x" * 5000, "t=,v1="):
        assert not verify_timestamped(BODY, garbage, "whsec_a", now=now)
    both = sign_timestamped(BODY, ["whsec_new", "whsec_old"], now)
    assert both.count("v1=") == 2 and both.startswith(f"t={now},v1=")
    assert verify_timestamped(BODY, both, "whsec_new", now=now) and verify_timestamped(BODY, both, "whsec_old", now=now)
    assert verify_timestamped(BODY, f"{both},v0=ignored", "whsec_old", now=now)  # unknown schemes are skipped
    with pytest.raises(ValueError):
        sign_timestamped(BODY, [])


# -- at rest ---------------------------------------------------------------------------------------------------
def _create(db: Database, scope: Scope, url: str = "https://hooks.example.com/h") -> Any:
    return hooks.create_webhook(db, scope, validate(rq.WebhookCreate, {"url": url, "events": ["reward.issued"]}))


def _stored(db: Database, endpoint_id: str) -> dict[str, Any]:
    row = (
        db.reader()
        .execute(
            "SELECT signing_secret, previous_signing_secret, previous_secret_expires_at FROM webhook_endpoints "
            "WHERE id = ?",
            [endpoint_id],
        )
        .fetchone()
    )
    assert row is not None
    return {"secret": row[0], "previous": row[1], "expires_at": row[2]}


def test_secrets_are_sealed_at_rest_and_plaintext_rows_still_sign(db: Database, scope: Scope) -> None:
    """Plaintext rows of an older database are sealed when it opens (and the file rewritten): see
    tests/store/test_secret_key_and_files.py::test_legacy_webhook_secrets_are_sealed_at_open_and_leave_no_plain_text_on_disk.
    """
    created = _create(db, scope)
    stored = _stored(db, created.id)
    assert stored["secret"].startswith("aesgcm1:") and created.signing_secret not in stored["secret"]
    assert created.signing_secret[len("whsec_") :] not in stored["secret"]
    assert created.signing_secret.encode() not in _file_bytes(db)

    # a database from before sealing: the column holds the secret as given
    legacy = _create(db, scope)
    with db.transaction() as con:
        con.execute("UPDATE webhook_endpoints SET signing_secret = ? WHERE id = ?", [legacy.signing_secret, legacy.id])
    row = reader(db).webhooks.endpoint(scope, legacy.id)
    assert row is not None and webhook_secrets.signing_secrets(db, row) == [legacy.signing_secret]  # still signs
    # a sealed value moved to another endpoint's row does not open there
    with db.transaction() as con:
        con.execute("UPDATE webhook_endpoints SET signing_secret = ? WHERE id = ?", [stored["secret"], legacy.id])
    moved = reader(db).webhooks.endpoint(scope, legacy.id)
    assert moved is not None
    with pytest.raises(ValueError):
        webhook_secrets.signing_secrets(db, moved)


def _file_bytes(db: Database) -> bytes:
    db.checkpoint()
    with open(db.path, "rb") as handle:
        return handle.read()


def test_rotation_keeps_the_previous_secret_for_its_grace_period_only(db: Database, scope: Scope) -> None:
    created = _create(db, scope)
    rotated = hooks.rotate_secret(db, scope, created.id, validate(rq.WebhookSecretRotate, {}))
    assert rotated.signing_secret != created.signing_secret and rotated.secret_prefix == rotated.signing_secret[:12]
    grace = rotated.previous_secret_expires_at
    assert grace is not None and timedelta(hours=23, minutes=59) < grace.replace(tzinfo=None) - utcnow()
    stored = _stored(db, created.id)
    assert stored["previous"].startswith("aesgcm1:") and created.signing_secret not in stored["previous"]
    row = reader(db).webhooks.endpoint(scope, created.id)
    assert row is not None
    assert webhook_secrets.signing_secrets(db, row) == [rotated.signing_secret, created.signing_secret]
    assert webhook_secrets.signing_secrets(db, row, now=stored["expires_at"]) == [rotated.signing_secret]
    assert hooks.get_webhook(db, scope, created.id).previous_secret_expires_at == grace


def test_attempt_errors_from_before_the_classes_are_migrated_and_never_shown_raw(db: Database, scope: Scope) -> None:
    created = _create(db, scope)
    test = hooks.send_test(db, scope, created.id)
    raw = ["connection refused", "HTTP 502", "connection failed: [Errno -2] Name or service not known", "timeout"]
    with db.transaction() as con:
        for number, text in enumerate(raw, 1):
            con.execute(
                "INSERT INTO webhook_attempts VALUES (?, ?, ?, ?, ?, 1, NULL, ?, false)",
                [test.id, number, *scope.params, utcnow(), text],
            )
    shown = hooks.get_delivery(db, scope, created.id, test.id)
    assert [a.error for a in shown.attempts] == ["error", "error", "error", "timeout"]  # unknown text: hidden
    (statements,) = [m.statements for m in MIGRATIONS if m.version == 8]
    with db.transaction() as con:
        con.execute(statements[-1])  # the rewrite of migration 8, on rows written the old way
    migrated = hooks.get_delivery(db, scope, created.id, test.id)
    assert [a.error for a in migrated.attempts] == ["refused", "http_5xx", "connection", "timeout"]


# -- over HTTP -------------------------------------------------------------------------------------------------
@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LiveServer]:
    db = tmp_path_factory.mktemp("signing") / "service.duckdb"
    live = start_server(db, "Acme", serve_args=("--allow-private-webhook-targets",))  # receivers on 127.0.0.1
    yield live
    live.stop()


def _test_delivery(http: httpx.Client, receiver: Receiver, webhook_id: str) -> Any:
    before = len(receiver.snapshot())
    queued = ok(http.post(f"/webhooks/{webhook_id}/test"), 202)
    got = receiver.wait_for(lambda seen: len(seen) > before)
    (delivery,) = [d for d in got if d.body["id"] == queued["id"]]
    return delivery


def test_deliveries_carry_both_headers_and_rotation_signs_with_both_secrets(server: LiveServer) -> None:
    receiver = Receiver()
    try:
        with httpx.Client(base_url=server.base_url, headers=server.headers(), timeout=10) as http:
            hook = ok(http.post("/webhooks", json={"url": receiver.url, "events": ["reward.issued"]}), 201)
            first = hook["signing_secret"]
            got = _test_delivery(http, receiver, hook["id"])
            stamped = got.headers[TIMESTAMPED_SIGNATURE_HEADER]
            assert stamped.count("v1=") == 1 and abs(int(stamped.split(",")[0][2:]) - time.time()) < 60
            assert verify_timestamped(got.raw, stamped, first) and verify(got.raw, got.headers[SIGNATURE_HEADER], first)

            rotated = ok(http.post(f"/webhooks/{hook['id']}/rotate-secret"), 200)
            second = rotated["signing_secret"]
            assert second != first and rotated["previous_secret_expires_at"] and rotated["id"] == hook["id"]
            shown = ok(http.get(f"/webhooks/{hook['id']}"))
            assert "signing_secret" not in shown and shown["secret_prefix"] == second[:12]
            assert shown["previous_secret_expires_at"] == rotated["previous_secret_expires_at"]
            for response in (
                http.get(f"/webhooks/{hook['id']}"),
                http.get("/webhooks"),
                http.get(f"/webhooks/{hook['id']}/deliveries"),
            ):
                assert second not in response.text and first not in response.text

            during = _test_delivery(http, receiver, hook["id"])
            stamped = during.headers[TIMESTAMPED_SIGNATURE_HEADER]
            assert stamped.count("v1=") == 2
            t = int(stamped.split(",")[0][2:])
            assert stamped == sign_timestamped(during.raw, [second, first], t)  # the new secret's first
            assert verify_timestamped(during.raw, stamped, second) and verify_timestamped(during.raw, stamped, first)
            assert during.headers[SIGNATURE_HEADER] == sign(during.raw, first)  # GitHub-style: the previous one

            ended = ok(http.post(f"/webhooks/{hook['id']}/rotate-secret", json={"grace_period_s": 0}), 200)
            third = ended["signing_secret"]
            assert ended["previous_secret_expires_at"] is None
            after = _test_delivery(http, receiver, hook["id"])
            stamped = after.headers[TIMESTAMPED_SIGNATURE_HEADER]
            assert stamped.count("v1=") == 1 and verify_timestamped(after.raw, stamped, third)
            assert not verify_timestamped(after.raw, stamped, second) and not verify_timestamped(
                after.raw, stamped, first
            )
            assert after.headers[SIGNATURE_HEADER] == sign(after.raw, third)
    finally:
        receiver.close()


def test_rotation_is_validated_gated_and_refused_for_disabled_endpoints(server: LiveServer) -> None:
    with httpx.Client(base_url=server.base_url, headers=server.headers(), timeout=10) as http:
        hook = ok(http.post("/webhooks", json={"url": "https://hooks.example.com/r", "events": ["asset.paused"]}), 201)
        path = f"/webhooks/{hook['id']}/rotate-secret"
        for body, field in (({"grace_period_s": -1}, "grace_period_s"), ({"grace_period_s": 10**9}, "grace_period_s")):
            refused = http.post(path, json=body)
            assert refused.status_code == 422 and refused.json()["error"]["details"]["field"] == field
        unknown = http.post(path, json={"grace": 5})
        assert unknown.status_code == 422 and unknown.json()["error"]["code"] == "field_unknown"
        missing = http.post(f"/webhooks/whk_{'0' * 32}/rotate-secret")
        assert missing.status_code == 404 and missing.json()["error"]["code"] == "webhook_not_found"
        viewer = ok(http.post("/developer/api-keys", json={"name": "v", "permissions": ["developers.webhooks.view"]}))
        limited = http.post(path, headers={"Authorization": f"Bearer {viewer['secret']}"})
        assert limited.status_code == 403 and limited.json()["error"]["code"] == "permission_denied"
        ok(http.delete(f"/webhooks/{hook['id']}"), 200)
        disabled = http.post(path)
        assert disabled.status_code == 409 and disabled.json()["error"]["code"] == "invalid_state_transition"
    with httpx.Client(base_url=server.base_url, headers=server.headers("production"), timeout=10) as production:
        assert production.post(path).status_code == 404  # another tenant's endpoint does not exist there


def test_the_client_rotates(server: LiveServer) -> None:
    from rewards_lab.client import RewardsClient

    with RewardsClient(server.base_url, server.keys["sandbox"], server.organization_id, "sandbox") as c:
        hook = c.create_webhook("https://hooks.example.com/c", ["reward.issued"])
        rotated = c.rotate_webhook_secret(hook.id, grace_period_s=60)
        assert rotated.signing_secret != hook.signing_secret and rotated.previous_secret_expires_at is not None


def test_a_database_from_before_migration_8_upgrades_and_its_plaintext_secret_still_signs(tmp_path: Path) -> None:
    """The file as the previous release left it (no previous-secret columns, the secret in plain text, a raw
    attempt error), served by this release: migrated on open, sealed when the worker starts, still signing with
    the same secret, and the old error shown as its class."""
    db_path = tmp_path / "service.duckdb"
    boot = bootstrap(db_path, "Acme")
    receiver = Receiver()
    try:
        scope = Scope(str(boot["organization_id"]), "sandbox")
        with Database(str(db_path)) as database:
            body = validate(rq.WebhookCreate, {"url": receiver.url, "events": ["reward.issued"]})
            created = hooks.create_webhook(database, scope, body, allow_private=True)
            old = hooks.send_test(database, scope, created.id)
        with duckdb.connect(str(db_path)) as con:  # back to the previous release's shape
            con.execute("UPDATE webhook_endpoints SET signing_secret = ?", [created.signing_secret])
            con.execute("ALTER TABLE webhook_endpoints DROP COLUMN previous_signing_secret")
            con.execute("ALTER TABLE webhook_endpoints DROP COLUMN previous_secret_expires_at")
            con.execute(
                "INSERT INTO webhook_attempts VALUES (?, 1, ?, ?, now()::TIMESTAMP, 3, NULL, ?, false)",
                [old.id, *scope.params, "connection failed: [Errno 113] No route to host"],
            )
            con.execute("UPDATE webhook_deliveries SET status = 'failed', attempt_count = 1 WHERE id = ?", [old.id])
            con.execute("DELETE FROM schema_migrations WHERE version = 8")
        keys = boot["api_keys"]
        assert isinstance(keys, dict)
        port = free_port()
        log = (tmp_path / "serve.log").open("wb")
        process = spawn(cli("serve", "--db", str(db_path), "--port", str(port), "--allow-private-webhook-targets"), log)
        live = LiveServer(db_path, f"http://127.0.0.1:{port}/v1", scope.organization_id, keys, process, log)
        wait_until_serving(live.base_url, process, log)
        try:
            with httpx.Client(base_url=live.base_url, headers=live.headers(), timeout=10) as http:
                shown = ok(http.get(f"/webhooks/{created.id}/deliveries/{old.id}"))
                assert [a["error"] for a in shown["attempts"]] == ["connection"]
                got = _test_delivery(http, receiver, created.id)
                assert verify(got.raw, got.headers[SIGNATURE_HEADER], created.signing_secret)
                assert verify_timestamped(got.raw, got.headers[TIMESTAMPED_SIGNATURE_HEADER], created.signing_secret)
        finally:
            live.stop()
        with duckdb.connect(str(db_path), read_only=True) as con:
            row = con.execute("SELECT signing_secret FROM webhook_endpoints WHERE id = ?", [created.id]).fetchone()
        assert row is not None and row[0].startswith("aesgcm1:") and created.signing_secret not in row[0]
    finally:
        receiver.close()
