"""Owner accounts, login with a TOTP second factor, sessions as bearer tokens, expiry, logout and the brute-force
guard, against real `rewards-lab serve` processes on 127.0.0.1."""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import duckdb
import httpx
import pyotp
import pytest

from tests.live_server import LiveServer, start_server

EMAIL, PASSWORD = "Owner@Acme.test", "correct horse battery staple"
SESSIONS: dict[str, str] = {}


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LiveServer]:
    db = tmp_path_factory.mktemp("accounts") / "accounts.duckdb"
    live = start_server(db, "Acme", "--email", EMAIL, "--password", PASSWORD, "--totp")
    yield live
    live.stop()


def _body(response: httpx.Response, status: int) -> dict[str, Any]:
    body: dict[str, Any] = response.json()
    assert response.status_code == status, body
    assert response.headers["x-request-id"] == body["meta"]["request_id"]
    return body


def _error(response: httpx.Response, status: int, code: str) -> dict[str, Any]:
    error: dict[str, Any] = _body(response, status)["error"]
    assert error["code"] == code, error
    return error


def _login(live: LiveServer, **body: object) -> httpx.Response:
    return httpx.post(f"{live.base_url}/auth/login", json=body, timeout=10)


def _session_headers(live: LiveServer, token: str, environment: str = "sandbox") -> dict[str, str]:
    return {"Authorization": f"Bearer {token}", "X-Organization-ID": live.organization_id, "X-Environment": environment}


def test_bootstrap_prints_the_totp_secret_once(server: LiveServer) -> None:
    secret = server.boot["totp_secret"]
    assert isinstance(secret, str) and len(secret) == 32 and pyotp.TOTP(secret).now().isdigit()


def test_login_demands_the_second_factor_and_accepts_each_code_once(server: LiveServer) -> None:
    secret = str(server.boot["totp_secret"])
    missing = _error(_login(server, email=EMAIL, password=PASSWORD), 401, "second_factor_required")
    assert missing["type"] == "authentication_error" and missing["details"]["field"] == "totp_code"
    _error(_login(server, email=EMAIL, password="wrong password", totp_code="000000"), 401, "credentials_invalid")
    _error(_login(server, email="nobody@acme.test", password=PASSWORD), 401, "credentials_invalid")
    code = pyotp.TOTP(secret).now()
    wrong = f"{(int(code) + 1) % 1_000_000:06d}"
    _error(_login(server, email=EMAIL, password=PASSWORD, totp_code=wrong), 401, "second_factor_invalid")
    session = _body(_login(server, email=EMAIL.lower(), password=PASSWORD, totp_code=code), 201)["data"]
    assert session["token"].startswith("rls_") and session["token_type"] == "bearer"
    assert session["account"]["email"] == EMAIL.lower() and session["account"]["second_factor"] is True
    assert session["organization_id"] == server.organization_id and session["revoked_at"] is None
    assert session["expires_at"] > session["created_at"]
    # The same code cannot open a second session (a replayed code is refused).
    _error(_login(server, email=EMAIL, password=PASSWORD, totp_code=code), 401, "second_factor_invalid")
    _error(_login(server, email=EMAIL, password=PASSWORD, totp_code=""), 401, "second_factor_required")
    SESSIONS["first"] = session["token"]


def test_a_session_acts_as_the_owner_in_the_environment_the_request_names(server: LiveServer) -> None:
    token = SESSIONS["first"]
    with httpx.Client(base_url=server.base_url, timeout=10) as http:
        created = http.post("/customers", json={"external_id": "ses-1"}, headers=_session_headers(server, token))
        assert _body(created, 201)["data"]["external_id"] == "ses-1"
        sandbox = http.get("/customers?external_id=ses-1", headers=_session_headers(server, token))
        assert len(_body(sandbox, 200)["data"]) == 1
        production = http.get("/customers?external_id=ses-1", headers=_session_headers(server, token, "production"))
        assert _body(production, 200)["data"] == []
        # The API key of the sandbox sees what the session created there: same tenant.
        by_key = http.get("/customers?external_id=ses-1", headers=server.headers())
        assert len(_body(by_key, 200)["data"]) == 1
        # A key created by the session is attributed to the account and holds at most its permissions.
        key = http.post(
            "/developer/api-keys",
            json={"name": "from a session", "permissions": ["customers.view"]},
            headers=_session_headers(server, token, "production"),
        )
        assert _body(key, 201)["data"]["environment"] == "production"
        other_org = {**_session_headers(server, token), "X-Organization-ID": "org_0000"}
        _error(http.get("/customers", headers=other_org), 403, "organization_mismatch")
        no_environment = {k: v for k, v in _session_headers(server, token).items() if k != "X-Environment"}
        _error(http.get("/customers", headers=no_environment), 422, "field_invalid")
        _error(http.get("/customers", headers=_session_headers(server, "rls_forged")), 401, "credentials_invalid")


def test_logout_ends_only_that_session(server: LiveServer) -> None:
    secret = str(server.boot["totp_secret"])
    # The next 30-second step's code: the current one was used by the first login.
    code = pyotp.TOTP(secret).at(time.time() + 30)
    second = _body(_login(server, email=EMAIL, password=PASSWORD, totp_code=code), 201)["data"]["token"]
    with httpx.Client(base_url=server.base_url, timeout=10) as http:
        ended = _body(http.post("/auth/logout", headers=_session_headers(server, second)), 200)["data"]
        assert ended["revoked_at"] is not None
        _error(http.get("/customers", headers=_session_headers(server, second)), 401, "session_revoked")
        _error(http.post("/auth/logout", headers=_session_headers(server, second)), 401, "session_revoked")
        assert http.get("/customers", headers=_session_headers(server, SESSIONS["first"])).status_code == 200
        _error(http.post("/auth/logout", headers=server.headers()), 422, "field_invalid")


def test_sessions_expire_and_failed_logins_are_throttled(tmp_path: Path) -> None:
    email, password = "ops@beta.test", "another long passphrase"
    live = start_server(
        tmp_path / "expiry.duckdb",
        "Beta",
        "--email",
        email,
        "--password",
        password,
        serve_args=("--session-lifetime-s", "2"),
    )
    try:
        assert live.boot["totp_secret"] is None
        session = _body(_login(live, email=email, password=password), 201)["data"]
        headers = _session_headers(live, session["token"])
        assert httpx.get(f"{live.base_url}/customers", headers=headers, timeout=10).status_code == 200
        time.sleep(2.5)
        expired = httpx.get(f"{live.base_url}/customers", headers=headers, timeout=10)
        assert _error(expired, 401, "session_expired")["type"] == "authentication_error"
        # Five wrong passwords, then even the right one is refused until the backoff passes (1 s, then doubling).
        for _ in range(5):
            _error(_login(live, email=email, password="not the password"), 401, "credentials_invalid")
        locked = _error(_login(live, email=email, password=password), 429, "rate_limit_exceeded")
        assert locked["details"]["retry_after_s"] > 0
        # Another account is not locked by the guesses at this one.
        _error(_login(live, email="else@beta.test", password=password), 401, "credentials_invalid")
    finally:
        live.stop()
    server_log = (tmp_path / "expiry.server.log").read_text()
    assert password not in server_log and session["token"] not in server_log
    with duckdb.connect(str(tmp_path / "expiry.duckdb"), read_only=True) as con:
        (password_hash,) = con.execute("SELECT password_hash FROM accounts").fetchone() or ("",)
        assert password_hash.startswith("scrypt$") and password not in password_hash
        tokens = [row[0] for row in con.execute("SELECT token_hash FROM sessions").fetchall()]
        assert tokens and session["token"] not in tokens and all(len(t) == 64 for t in tokens)
        # Written at shutdown at the latest: every request, the one that authenticated under the account's id.
        logged = con.execute("SELECT principal_id, path, status FROM request_log WHERE path <> '/v1/openapi.json'")
        rows = logged.fetchall()
        secrets_in_log = con.execute(
            "SELECT count(*) FROM request_log WHERE concat_ws('|', request_id, path, operation, principal_id) "
            "SIMILAR TO '.*(rls_|rlk_|correct horse|another long).*'"
        ).fetchone()
        assert secrets_in_log == (0,)
        assert len(rows) == 10 and [r for r in rows if r[0]] == [(session["account"]["id"], "/v1/customers", 200)]
