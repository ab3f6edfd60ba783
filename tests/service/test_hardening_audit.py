"""Issue 14, item 13: the audit of authentication events is durable (a crash right after the answer loses none),
never holds a credential, and is shown to its tenant only; the request log counts what it cannot keep.

Against a real `rewards-lab serve` on 127.0.0.1: every audited answer is followed at once by SIGKILL, and the
file is read back afterwards."""

from __future__ import annotations

import signal
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import duckdb
import httpx
import pytest

from rewards_lab.service.request_log import LogRecord
from rewards_lab.store.database import Database
from rewards_lab.worker import request_log_writer
from rewards_lab.worker.request_log_writer import RequestLogWriter
from tests.live_server import LiveServer, bootstrap, start_server

EMAIL = "owner@audit.test"
PASSWORD = "a long enough passphrase"


def _rows(db: Path) -> list[dict[str, Any]]:
    with duckdb.connect(str(db), read_only=True) as con:
        cursor = con.execute("SELECT * FROM auth_audit ORDER BY id")
        names = [column[0] for column in cursor.description]
        return [dict(zip(names, row, strict=True)) for row in cursor.fetchall()]


def _killed(live: LiveServer) -> None:
    """SIGKILL: no shutdown, no flush of anything in memory."""
    live.stop(signal.SIGKILL)


def _restart(db: Path) -> LiveServer:
    """Serve an existing file again (bootstrap would refuse nothing, but would add an organization)."""
    import subprocess

    from tests.live_server import cli, free_port, spawn, wait_until_serving

    port = free_port()
    log = (db.parent / f"{db.stem}.again.log").open("wb")
    process = spawn(cli("serve", "--db", str(db), "--port", str(port)), log)
    base_url = f"http://127.0.0.1:{port}/v1"
    wait_until_serving(base_url, process, log)
    assert isinstance(process, subprocess.Popen)
    return LiveServer(db, base_url, "", {}, process, log)


@pytest.fixture()
def live(tmp_path: Path) -> Iterator[LiveServer]:
    server = start_server(tmp_path / "audit.duckdb", "Acme", "--email", EMAIL, "--password", PASSWORD)
    yield server
    if server.process.poll() is None:
        server.stop()


def test_logins_survive_a_crash_right_after_the_answer_and_hold_no_password(live: LiveServer) -> None:
    with httpx.Client(base_url=live.base_url, timeout=10) as http:
        wrong = http.post("/auth/login", json={"email": EMAIL, "password": "not the password"})
        assert wrong.status_code == 401
        unknown = http.post("/auth/login", json={"email": "nobody@audit.test", "password": PASSWORD})
        assert unknown.status_code == 401
        malformed = http.post("/auth/login", content=b'{"email": "' + EMAIL.encode() + b'", not json')
        assert malformed.status_code == 422
        session = http.post(
            "/auth/login", json={"email": EMAIL.upper(), "password": PASSWORD}, headers={"X-SDK-Version": "acme-js/3"}
        )
        assert session.status_code == 201
    _killed(live)  # right after the last answer
    rows = _rows(live.db)
    logins = [row for row in rows if row["kind"] == "login"]
    assert [(r["outcome"], r["reason"], r["status"]) for r in logins] == [
        ("failed", "credentials_invalid", 401),
        ("failed", "credentials_invalid", 401),
        ("failed", "request_malformed", 422),
        ("succeeded", None, 201),
    ]
    created = session.json()["data"]
    account_id = created["account"]["id"]
    assert logins[0]["organization_id"] == live.organization_id and logins[0]["actor_id"] == account_id
    assert logins[1]["organization_id"] is None and logins[1]["actor_id"] is None  # an unknown email: nobody's
    assert logins[2]["organization_id"] is None  # an unreadable body names nobody
    assert logins[3]["organization_id"] == live.organization_id and logins[3]["actor_id"] == account_id
    assert logins[3]["subject_id"] == created["id"] and logins[3]["environment"] is None
    assert logins[3]["sdk_version"] == "acme-js/3" and logins[0]["sdk_version"] is None
    assert all(r["address"] == "127.0.0.1" and r["request_id"] for r in logins)
    stored = " ".join(str(value) for row in rows for value in row.values())
    assert PASSWORD not in stored and "not the password" not in stored and created["token"] not in stored
    assert "nobody@audit.test" not in stored


def test_key_changes_logout_and_every_401_and_403_are_audited_before_the_answer(live: LiveServer) -> None:
    headers = live.headers()
    with httpx.Client(base_url=live.base_url, timeout=10) as http:
        token = http.post("/auth/login", json={"email": EMAIL, "password": PASSWORD}).json()["data"]["token"]
        as_owner = {**headers, "Authorization": f"Bearer {token}"}
        limited = http.post(
            "/developer/api-keys", json={"name": "viewer", "permissions": ["customers.view"]}, headers=as_owner
        ).json()["data"]
        doomed = http.post(
            "/developer/api-keys", json={"name": "doomed", "permissions": ["customers.view"]}, headers=headers
        ).json()["data"]
        assert http.delete(f"/developer/api-keys/{doomed['id']}", headers=headers).status_code == 200
        as_limited = {**headers, "Authorization": f"Bearer {limited['secret']}"}
        event = {"type": "order.completed", "external_event_id": "a-1", "customer_id": "c-1", "data": {}}
        answers = [
            http.get("/customers", headers={**headers, "Authorization": f"Bearer {doomed['secret']}"}),
            http.get("/developer/logs", headers=as_limited),
            http.post("/events", json=event, headers=as_limited),  # the hot path answers this one
            http.post("/events", json=event, headers={**headers, "Authorization": "Bearer rlk_forged"}),
            http.get("/customers", headers={**headers, "X-Organization-ID": "org_other"}),
            http.post("/auth/logout", headers=as_owner),
        ]
        assert [a.status_code for a in answers] == [401, 403, 403, 401, 403, 200]
    _killed(live)
    rows = _rows(live.db)
    by_kind: dict[str, list[dict[str, Any]]] = {}
    for row in rows:
        by_kind.setdefault(row["kind"], []).append(row)
    bootstrapped, created = by_kind["api_key_created"][:2], by_kind["api_key_created"][2:]
    assert [(r["environment"], r["actor_id"], r["path"]) for r in bootstrapped] == [
        ("sandbox", None, None),  # `rewards-lab bootstrap` made them: no request, no actor
        ("production", None, None),
    ]
    assert [r["subject_id"] for r in created] == [limited["id"], doomed["id"]]
    assert created[0]["actor_id"].startswith("usr_") and created[1]["actor_id"].startswith("key_")
    assert all(r["environment"] == "sandbox" and r["request_id"] for r in created)
    (revoked,) = by_kind["api_key_revoked"]
    assert revoked["subject_id"] == doomed["id"] and revoked["actor_id"].startswith("key_")
    denied = by_kind["access_denied"]
    assert [(r["reason"], r["status"], r["path"]) for r in denied] == [
        ("api_key_revoked", 401, "/v1/customers"),
        ("permission_denied", 403, "/v1/developer/logs"),
        ("permission_denied", 403, "/v1/events"),
        ("credentials_invalid", 401, "/v1/events"),
        ("organization_mismatch", 403, "/v1/customers"),
    ]
    # the revoked key's use is filed under its tenant (found from the key in the error), the forged one under none
    assert denied[0]["organization_id"] == live.organization_id and denied[0]["subject_id"] == doomed["id"]
    assert denied[1]["actor_id"] == limited["id"] and denied[3]["organization_id"] is None
    (logout,) = by_kind["logout"]
    assert logout["outcome"] == "succeeded" and logout["environment"] is None
    assert logout["actor_id"].startswith("usr_") and logout["subject_id"].startswith("ses_")
    secrets = (limited["secret"], doomed["secret"], token)
    assert not any(secret in str(value) for row in rows for value in row.values() for secret in secrets)


def test_the_tenant_reads_its_audit_with_filters_and_the_permission(live: LiveServer) -> None:
    headers = live.headers()
    with httpx.Client(base_url=live.base_url, timeout=10) as http:
        assert http.post("/auth/login", json={"email": EMAIL, "password": "wrong one"}).status_code == 401
        assert http.post("/auth/login", json={"email": EMAIL, "password": PASSWORD}).status_code == 201
        limited = http.post(
            "/developer/api-keys", json={"name": "viewer", "permissions": ["customers.view"]}, headers=headers
        ).json()["data"]
        as_limited = {**headers, "Authorization": f"Bearer {limited['secret']}"}
        assert http.get("/developer/audit", headers=as_limited).status_code == 403  # itself audited

        def audit(environment: str = "sandbox", **params: str) -> list[dict[str, Any]]:
            response = http.get("/developer/audit", params=params, headers=live.headers(environment))
            assert response.status_code == 200, response.json()
            return list(response.json()["data"])

        everything = audit()
        kinds = [e["kind"] for e in everything]  # newest first; the last is bootstrap's key
        assert kinds == ["access_denied", "api_key_created", "login", "login", "api_key_created"]
        assert [e["outcome"] for e in audit(kind="login")] == ["succeeded", "failed"]
        assert [e["kind"] for e in audit(outcome="failed")] == ["access_denied", "login"]
        assert [e["kind"] for e in audit(direction="asc", limit="1")] == ["api_key_created"]
        # organization-wide events (logins) show in both environments; the keys in their own
        assert [e["kind"] for e in audit("production")] == ["login", "login", "api_key_created"]
        assert set(everything[0]) == {
            "id", "kind", "outcome", "reason", "status", "actor_id", "subject_id", "environment", "request_id",
            "method", "path", "address", "sdk_version", "created_at",
        }  # fmt: skip
        for bad in ({"kind": "coffee"}, {"outcome": "maybe"}):
            refused = http.get("/developer/audit", params=bad, headers=headers)
            assert refused.status_code == 422 and refused.json()["error"]["code"] == "field_invalid"
            assert refused.json()["error"]["details"]["field"] == next(iter(bad))
    _killed(live)
    # another organization in the same file sees none of it
    boot = bootstrap(live.db, "Other")
    again = _restart(live.db)
    try:
        keys = boot["api_keys"]
        assert isinstance(keys, dict)
        other = {
            "Authorization": f"Bearer {keys['sandbox']}",
            "X-Organization-ID": str(boot["organization_id"]),
            "X-Environment": "sandbox",
        }
        with httpx.Client(base_url=again.base_url, timeout=10) as http:
            seen = http.get("/developer/audit", headers=other).json()["data"]
        assert [e["kind"] for e in seen] == ["api_key_created"]  # its own bootstrap key, nothing of Acme's
        assert not {e["id"] for e in seen} & {e["id"] for e in everything}
    finally:
        again.stop()


def test_a_full_request_log_queue_counts_what_it_drops(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(request_log_writer, "MAX_BUFFERED", 3)
    with Database(tmp_path / "log.duckdb") as database:
        writer = RequestLogWriter(database)
        for number in range(5):
            writer.record(LogRecord("org_x", "sandbox", f"r{number}", "GET", "/v1/x", None, 200, 1.0, None, 0.0))
        assert writer.dropped == 2 and writer.queued() == 3
        assert writer.flush() == 3
        stored = database.reader().execute("SELECT request_id FROM request_log ORDER BY id").fetchall()
        assert [row[0] for row in stored] == ["r2", "r3", "r4"]  # the oldest went, and were counted


def test_a_failed_flush_puts_its_records_back(tmp_path: Path) -> None:
    with Database(tmp_path / "log.duckdb") as database:
        writer = RequestLogWriter(database)
        writer.record(LogRecord("org_x", "sandbox", "kept", "GET", "/v1/x", None, 200, 1.0, None, 0.0))
        database.reader().execute("ALTER TABLE request_log RENAME TO request_log_away")
        with pytest.raises(duckdb.Error):
            writer.flush()
        assert writer.queued() == 1 and writer.dropped == 0
        database.reader().execute("ALTER TABLE request_log_away RENAME TO request_log")
        assert writer.flush() == 1


def test_health_shows_the_request_log_drop_count(live: LiveServer) -> None:
    health = httpx.get(f"{live.base_url}/health", timeout=10).json()["data"]
    assert health["request_log_dropped"] == 0 and health["workers"]["retention"]["alive"] is True


def test_a_login_that_crashes_before_answering_is_audited_as_failed(tmp_path: Path) -> None:
    """In process: the app behind the middleware raises before it sends anything (the server's outer error
    layer answers 500); the attempt is still in the audit, under the account its email names."""
    import asyncio

    from rewards_lab.api.request_log import RequestLogMiddleware
    from rewards_lab.security.sessions import create_owner_account
    from rewards_lab.service.organizations import create_organization

    async def crashing_app(scope: Any, receive: Any, send: Any) -> None:
        await receive()
        raise RuntimeError("boom")

    with Database(tmp_path / "crash.duckdb") as database:
        org = create_organization(database, "Crash")
        account, _ = create_owner_account(database, org.id, EMAIL, PASSWORD)
        middleware = RequestLogMiddleware(crashing_app, RequestLogWriter(database))
        body = b'{"email": "%s", "password": "%s"}' % (EMAIL.encode(), PASSWORD.encode())
        scope = {"type": "http", "method": "POST", "path": "/v1/auth/login", "headers": [], "client": ("10.0.0.9", 1)}

        async def receive() -> dict[str, Any]:
            return {"type": "http.request", "body": body, "more_body": False}

        async def send(message: dict[str, Any]) -> None:
            raise AssertionError("nothing is sent")

        with pytest.raises(RuntimeError, match="boom"):
            asyncio.run(middleware(scope, receive, send))
        row = (
            database.reader()
            .execute("SELECT kind, outcome, status, organization_id, actor_id, address FROM auth_audit")
            .fetchall()
        )
        assert row == [("login", "failed", 500, org.id, account.id, "10.0.0.9")]
        stored = database.reader().execute("SELECT * FROM auth_audit").fetchall()
        assert PASSWORD not in str(stored)


def test_concurrent_audited_answers_share_commits_and_each_waits_for_its_own(tmp_path: Path) -> None:
    """Group commit: 200 refusals at once are all committed before their awaits return, in far fewer
    transactions than rows (a transaction each would hold the database for milliseconds apiece)."""
    import asyncio

    from rewards_lab.security.auth_audit import AuditEvent
    from rewards_lab.worker.audit_writer import AuditWriter

    with Database(tmp_path / "group.duckdb") as database:
        writer = AuditWriter(database)
        writer.start()
        try:

            async def flood() -> None:
                events = [
                    AuditEvent("access_denied", "failed", reason="credentials_invalid", status=401, request_id=f"r{n}")
                    for n in range(200)
                ]
                await asyncio.gather(*(writer.write(event) for event in events))

            asyncio.run(flood())
            (count,) = database.reader().execute("SELECT count(DISTINCT request_id) FROM auth_audit").fetchone() or (0,)
            assert count == 200 and 1 <= writer.batches < 200
        finally:
            writer.stop()
