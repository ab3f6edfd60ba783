"""The /v1 service as a real process on 127.0.0.1: the standard loop over HTTP, the envelope, auth headers,
Idempotency-Key, and a clean stop on SIGTERM."""

from __future__ import annotations

import json
import signal
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.live_server import LiveServer, cli, postgres_server, start_server


@pytest.fixture(scope="module", params=["duckdb", "postgres"])
def server(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Iterator[LiveServer]:
    """The module's server: on a DuckDB file, then (the HTTP contract smoke of issue 32) on a PostgreSQL database
    served by two processes (`serve --workers 2`, two event partitions: either child answers, either processes).
    After the file's last test, SIGTERM must stop it cleanly and leave a database that verifies (asserted in the
    teardown: a failure there is an error of the file's last test)."""
    folder = tmp_path_factory.mktemp("server")
    if request.param == "duckdb":
        live = start_server(folder / "service.duckdb")
        yield live
        _stop_cleanly_with_sigterm(live)
        return
    request.getfixturevalue("pg_template")  # the databases' template, made once per session
    with postgres_server(request.getfixturevalue("pg_cluster"), folder) as live:
        yield live
        _stop_cleanly_with_sigterm(live)


def _stop_cleanly_with_sigterm(live: LiveServer) -> None:
    # uvicorn shuts down gracefully, then re-raises the signal so that supervisors see why it stopped.
    assert live.stop(signal.SIGTERM) in (0, -signal.SIGTERM)
    # The file is released and consistent: another process can open and verify it.
    verified = subprocess.run(cli("verify", "--db", str(live.db)), capture_output=True, text=True)
    assert verified.returncode == 0 and json.loads(verified.stdout)["ok"] is True


def _ok(response: httpx.Response, status: int) -> dict[str, Any]:
    body = response.json()
    assert response.status_code == status, body
    assert body["meta"]["version"] == "v1" and body["meta"]["request_id"]
    assert response.headers["x-request-id"] == body["meta"]["request_id"]
    data: dict[str, Any] = body["data"]
    return data


def _error(response: httpx.Response, status: int, code: str) -> dict[str, Any]:
    body = response.json()
    assert response.status_code == status, body
    assert set(body) == {"error", "meta"} and set(body["error"]) == {"type", "code", "message", "details"}
    assert body["error"]["code"] == code, body
    assert response.headers["x-request-id"] == body["meta"]["request_id"]
    error: dict[str, Any] = body["error"]
    return error


def test_standard_loop_over_http(server: LiveServer) -> None:
    with httpx.Client(base_url=server.base_url, headers=server.headers(), timeout=10) as http:
        customer = _ok(
            http.post("/customers", json={"external_id": "user-42", "email": "ada@example.com", "country": "GB"}), 201
        )
        wallet = _ok(http.post("/wallets", json={"customer_id": customer["id"], "type": "customer"}), 201)
        asset = _ok(
            http.post("/assets", json={"name": "Stars", "symbol": "STAR", "type": "points", "decimals": 2}), 201
        )
        assert _ok(http.post(f"/assets/{asset['id']}/activate"), 200)["status"] == "active"
        programme = _ok(http.post("/reward-programs", json={"name": "Spring", "asset_id": asset["id"]}), 201)
        rule_body = {
            "program_id": programme["id"],
            "event_type": "order.completed",
            "conditions": [{"field": "amount", "operator": "gte", "value": 20}],
            "actions": [{"type": "issue", "amount": {"per": "amount", "rate": 0.05}}],
        }
        rule = _ok(http.post("/reward-rules", json=rule_body), 201)
        simulated = _ok(
            http.post(
                f"/reward-rules/{rule['id']}/simulate",
                content='{"event": {"type": "order.completed", "amount": 42.50}}',
            ),
            200,
        )
        assert simulated["totals"] == [{"asset_id": asset["id"], "amount": "2.12"}]
        assert _ok(http.post(f"/reward-programs/{programme['id']}/publish"), 201)["version"]["number"] == 1
        event = _ok(
            http.post(
                "/events",
                content=(
                    '{"type": "order.completed", "external_event_id": "order-1", "customer_id": "user-42", '
                    '"data": {"amount": 42.50}}'
                ),
            ),
            202,
        )
        assert event["status"] in ("received", "processed")
        deadline = time.monotonic() + 10
        while True:  # rewards are asynchronous: poll the balance
            balances = _ok(http.get(f"/wallets/{wallet['id']}/balances"), 200)["balances"]
            if balances:
                break
            assert time.monotonic() < deadline, "the reward never arrived"
            time.sleep(0.05)
        assert balances[0]["balance"] == "2.12"
        assert _ok(http.get(f"/events/{event['id']}"), 200)["status"] == "processed"


def test_every_failure_has_the_envelope(server: LiveServer) -> None:
    with httpx.Client(base_url=server.base_url, headers=server.headers(), timeout=10) as http:
        _error(http.post("/customers", content="{not json"), 422, "request_malformed")
        unknown = _error(http.post("/customers", json={"external_id": "x", "nickname": "y"}), 422, "field_unknown")
        assert unknown["details"]["field"] == "nickname"
        email = _error(
            http.post("/customers", json={"external_id": "x", "email": "nope"}), 422, "customer_email_invalid"
        )
        assert email["details"]["field"] == "email"
        _error(http.post("/customers", json=[1, 2]), 422, "field_invalid")
        _error(http.post("/customers", content=b"{" + b" " * 1_100_000 + b"}"), 413, "request_too_large")
        _error(http.get("/no/such/path"), 404, "route_not_found")
        _error(http.delete("/customers"), 405, "method_not_allowed")  # the path exists (issue 14: was 404)
        _error(http.get("/customers/cus_missing"), 404, "customer_not_found")
    with httpx.Client(base_url=server.base_url, timeout=10) as plain:
        _check_headers(server, plain)


def _check_headers(server: LiveServer, plain: httpx.Client) -> None:
    _error(plain.get("/customers/x"), 401, "authentication_required")
    _error(
        plain.get("/customers/x", headers={**server.headers(), "Authorization": "Bearer wrong"}),
        401,
        "credentials_invalid",
    )
    _error(
        plain.get("/customers/x", headers=server.headers(**{"X-Organization-ID": "org_other"})),
        403,
        "organization_mismatch",
    )
    mismatch = _error(
        plain.get("/customers/x", headers=server.headers(**{"X-Environment": "production"})),
        403,
        "environment_mismatch",
    )
    assert mismatch["details"]["key_environment"] == "sandbox"
    echoed = plain.get("/customers/x", headers=server.headers(**{"X-Request-ID": "client-abc-1"}))
    assert echoed.headers["x-request-id"] == "client-abc-1" == echoed.json()["meta"]["request_id"]


def test_financial_writes_need_an_idempotency_key(server: LiveServer) -> None:
    with httpx.Client(base_url=server.base_url, headers=server.headers("production"), timeout=10) as http:
        customer = _ok(http.post("/customers", json={"external_id": "saver"}), 201)
        wallet = _ok(http.post("/wallets", json={"customer_id": customer["id"]}), 201)
        asset = _ok(http.post("/assets", json={"name": "Gems", "symbol": "GEM", "type": "points", "decimals": 0}), 201)
        _ok(http.post(f"/assets/{asset['id']}/activate"), 200)
        body = {"wallet_id": wallet["id"], "amount": "5", "reason": "welcome"}
        _error(http.post(f"/assets/{asset['id']}/issue", json=body), 422, "idempotency_key_required")
        first = _ok(http.post(f"/assets/{asset['id']}/issue", json=body, headers={"Idempotency-Key": "g-1"}), 201)
        again = _ok(http.post(f"/assets/{asset['id']}/issue", json=body, headers={"Idempotency-Key": "g-1"}), 201)
        assert again == first
        _error(
            http.post(f"/assets/{asset['id']}/issue", json={**body, "amount": "6"}, headers={"Idempotency-Key": "g-1"}),
            409,
            "idempotency_key_reused",
        )
        balances = _ok(http.get(f"/wallets/{wallet['id']}/balances"), 200)["balances"]
        assert balances[0]["balance"] == "5"


def test_the_openapi_document_declares_permission_idempotency_and_codes(server: LiveServer) -> None:
    document = httpx.get(f"{server.base_url}/openapi.json", timeout=10).json()
    assert document["openapi"].startswith("3.1")
    issue = document["paths"]["/assets/{asset_id}/issue"]["post"]
    assert issue["x-permission"] == "ledger.issue" and issue["x-idempotent"] == "required"
    assert {"asset_supply_exhausted", "idempotency_key_reused", "idempotency_key_required"} <= set(
        issue["x-error-codes"]
    )


def test_lists_paginate_and_ledger_refusals_carry_their_codes(server: LiveServer) -> None:
    with httpx.Client(base_url=server.base_url, headers=server.headers(), timeout=10) as http:
        customer = _ok(http.post("/customers", json={"external_id": "lister"}), 201)
        wallet = _ok(http.post("/wallets", json={"customer_id": customer["id"]}), 201)
        other = _ok(http.post("/wallets", json={"customer_id": customer["id"], "transfer_policy": "closed"}), 201)
        for index in range(7):
            _ok(
                http.post(
                    "/events", json={"type": "page.viewed", "external_event_id": f"p-{index}", "customer_id": "lister"}
                ),
                202,
            )
        seen: list[str] = []
        cursor = None
        while True:
            params = {"limit": 3, "type": "page.viewed", **({"cursor": cursor} if cursor else {})}
            response = http.get("/events", params=params)
            body = response.json()
            assert response.status_code == 200 and len(body["data"]) <= 3
            seen += [event["external_event_id"] for event in body["data"]]
            if not body["has_more"]:
                assert body["next_cursor"] is None
                break
            cursor = body["next_cursor"]
        assert seen == [f"p-{index}" for index in range(7)]
        _error(http.get("/events", params={"limit": 101}), 422, "field_invalid")
        _error(http.get("/events", params={"limit": "ten"}), 422, "field_invalid")
        _error(http.get("/events", params={"cursor": "garbage"}), 422, "cursor_invalid")
        _error(http.get("/events", params={"sort": "type"}), 422, "sort_field_invalid")
        _error(http.get("/events", params={"sort": ""}), 422, "sort_field_invalid")  # found by schemathesis

        asset = _ok(
            http.post("/assets", json={"name": "Coins", "symbol": "COIN", "type": "credits", "decimals": 2}), 201
        )
        _ok(http.post(f"/assets/{asset['id']}/activate"), 200)
        key = {"Idempotency-Key": "fund-lister"}
        _ok(
            http.post(
                f"/assets/{asset['id']}/issue",
                headers=key,
                json={"wallet_id": wallet["id"], "amount": "3.00", "reason": "grant"},
            ),
            201,
        )
        refusal = _error(
            http.post(
                f"/assets/{asset['id']}/redemptions",
                headers={"Idempotency-Key": "r-1"},
                json={"wallet_id": wallet["id"], "amount": "3.01", "reference": "o-9"},
            ),
            409,
            "insufficient_balance",
        )
        assert refusal["details"]["balance_minor"] == "300"
        _error(
            http.post(
                f"/assets/{asset['id']}/transfers",
                headers={"Idempotency-Key": "t-1"},
                json={"from_wallet_id": wallet["id"], "to_wallet_id": other["id"], "amount": "1.00"},
            ),
            403,
            "wallet_policy_violation",
        )
        _error(
            http.post(
                f"/assets/{asset['id']}/redemptions",
                headers={"Idempotency-Key": "r-2"},
                json={"wallet_id": wallet["id"], "amount": "1.001", "reference": "o-9"},
            ),
            422,
            "amount_too_many_decimals",
        )
        done = _ok(
            http.post(
                f"/assets/{asset['id']}/redemptions",
                headers={"Idempotency-Key": "r-3"},
                json={"wallet_id": wallet["id"], "amount": "1.00", "reference": "o-9"},
            ),
            201,
        )
        assert [entry["amount"] for entry in done["entries"]] == ["-1.00", "1.00"]
        segments = _ok(http.get(f"/customers/{customer['id']}/segments"), 200)
        assert {segment["code"] for segment in segments["segments"]} >= {"new", "active"}


def test_every_operation_declares_permission_idempotency_and_registered_codes(server: LiveServer) -> None:
    from rewards_lab.contract.errors import REGISTRY
    from rewards_lab.contract.permissions import ALL_PERMISSIONS

    document = httpx.get(f"{server.base_url}/openapi.json", timeout=10).json()
    operations = [(path, method, spec) for path, item in document["paths"].items() for method, spec in item.items()]
    assert len(operations) >= 30
    for path, method, spec in operations:
        # Only logging in and out need no permission (no principal yet; ending one's own session).
        ungated = path in ("/auth/login", "/auth/logout")  # paths relative to servers[0].url, /v1
        assert spec.get("x-permission") in ALL_PERMISSIONS or (ungated and "x-permission" not in spec), (method, path)
        assert spec["x-idempotent"] in ("required", "optional", "none"), (method, path)
        assert spec["x-error-codes"] and set(spec["x-error-codes"]) <= set(REGISTRY), (method, path)
    financial = {(p, m) for p, m, s in operations if s["x-idempotent"] == "required"}
    assert financial == {
        ("/assets/{asset_id}/issue", "post"),
        ("/assets/{asset_id}/redemptions", "post"),
        ("/assets/{asset_id}/transfers", "post"),
    }


def test_state_moves_over_http(server: LiveServer) -> None:
    with httpx.Client(base_url=server.base_url, headers=server.headers(), timeout=10) as http:
        customer = _ok(http.post("/customers", json={"external_id": "mover"}), 201)
        wallet = _ok(http.post("/wallets", json={"customer_id": customer["id"]}), 201)
        assert _ok(http.post(f"/wallets/{wallet['id']}/freeze"), 200)["status"] == "frozen"
        moved = _error(http.post(f"/wallets/{wallet['id']}/freeze"), 409, "invalid_state_transition")
        assert moved["details"]["state"] == "frozen"
        assert _ok(http.post(f"/wallets/{wallet['id']}/unfreeze"), 200)["status"] == "active"
        asset = _ok(
            http.post("/assets", json={"name": "Miles", "symbol": "MILE", "type": "points", "decimals": 0}), 201
        )
        _error(http.post(f"/assets/{asset['id']}/pause"), 409, "invalid_state_transition")
        _ok(http.post(f"/assets/{asset['id']}/activate"), 200)
        assert _ok(http.post(f"/assets/{asset['id']}/pause"), 200)["status"] == "paused"
        _error(
            http.post(
                f"/assets/{asset['id']}/issue",
                headers={"Idempotency-Key": "m-1"},
                json={"wallet_id": wallet["id"], "amount": "1", "reason": "x"},
            ),
            409,
            "asset_paused",
        )
        assert _ok(http.post(f"/assets/{asset['id']}/resume"), 200)["status"] == "active"
        issued = _ok(
            http.post(
                f"/assets/{asset['id']}/issue",
                headers={"Idempotency-Key": "m-2"},
                json={"wallet_id": wallet["id"], "amount": "1", "reason": "x"},
            ),
            201,
        )
        assert _ok(http.get(f"/transactions/{issued['id']}"), 200) == issued
        listed = http.get("/transactions", params={"wallet_id": wallet["id"]}).json()
        assert [t["id"] for t in listed["data"]] == [issued["id"]] and listed["has_more"] is False


def test_keys_permissions_escalation_and_revocation(server: LiveServer) -> None:
    with httpx.Client(base_url=server.base_url, headers=server.headers(), timeout=10) as http:
        manager = _ok(
            http.post(
                "/developer/api-keys",
                json={"name": "manager", "permissions": ["developers.api_keys.manage", "customers.view"]},
            ),
            201,
        )
        assert manager["secret"].startswith(manager["prefix"]) and manager["environment"] == "sandbox"
        _error(
            http.post("/developer/api-keys", json={"name": "x", "permissions": ["root.everything"]}),
            422,
            "permission_unknown",
        )
    as_manager = {**server.headers(), "Authorization": f"Bearer {manager['secret']}"}
    with httpx.Client(base_url=server.base_url, headers=as_manager, timeout=10) as http:
        denied = _error(http.post("/customers", json={"external_id": "nope"}), 403, "permission_denied")
        assert denied["details"]["permission"] == "customers.create"
        _error(
            http.post("/developer/api-keys", json={"name": "wider", "permissions": ["customers.create"]}),
            403,
            "permission_escalation",
        )
        narrower = _ok(
            http.post("/developer/api-keys", json={"name": "viewer", "permissions": ["customers.view"]}), 201
        )
        revoked = _ok(http.delete(f"/developer/api-keys/{narrower['id']}"), 200)
        assert revoked["revoked_at"] and "secret" not in revoked
        _error(http.delete(f"/developer/api-keys/{narrower['id']}"), 409, "api_key_already_revoked")
    as_revoked = {**server.headers(), "Authorization": f"Bearer {narrower['secret']}"}
    _error(httpx.get(f"{server.base_url}/customers", headers=as_revoked, timeout=10), 401, "api_key_revoked")


def test_rate_limits_answer_429_with_headers_on_every_response(tmp_path: Path) -> None:
    live = start_server(tmp_path / "limited.duckdb", "Small", "--plan", "enterprise", "--rate-limit", "5")
    try:
        with httpx.Client(base_url=live.base_url, headers=live.headers(), timeout=10) as http:
            remaining = []
            for _ in range(5):
                response = http.get("/customers")
                assert response.status_code == 200
                assert response.headers["RateLimit-Limit"] == "5"
                assert 1 <= int(response.headers["RateLimit-Reset"]) <= 60
                remaining.append(int(response.headers["RateLimit-Remaining"]))
            assert remaining == [4, 3, 2, 1, 0]
            over = _error(http.get("/customers"), 429, "rate_limit_exceeded")
            assert over["details"]["retry_after_s"] >= 1
            # production counts separately from sandbox
            other = http.get("/customers", headers=live.headers("production"))
            assert other.status_code == 200 and other.headers["RateLimit-Remaining"] == "4"
        anonymous = httpx.get(f"{live.base_url}/customers", timeout=10)
        assert anonymous.status_code == 401 and anonymous.headers["RateLimit-Limit"] == "100"
    finally:
        live.stop()


def test_the_live_openapi_document_is_valid_and_types_every_body(server: LiveServer) -> None:
    from openapi_spec_validator import validate

    document = httpx.get(f"{server.base_url}/openapi.json", timeout=10).json()
    validate(document)  # raises on any violation of OpenAPI 3.1
    schemas = document["components"]["schemas"]
    create_rule = document["paths"]["/reward-rules"]["post"]
    ref = create_rule["requestBody"]["content"]["application/json"]["schema"]["$ref"]
    assert ref == "#/components/schemas/RuleCreate"
    assert schemas["RuleCreate"]["additionalProperties"] is False
    assert set(schemas["RuleCreate"]["required"]) == {"program_id", "event_type", "actions"}
    assert "HTTPValidationError" not in schemas
    assert all(
        spec["responses"]["default"]["content"]["application/json"]["schema"]["$ref"]
        == "#/components/schemas/ErrorEnvelope"
        for item in document["paths"].values()
        for spec in item.values()
    )


def test_ai_endpoints_answer_from_the_documentation_and_the_old_ones_announce_their_sunset(
    server: LiveServer,
) -> None:
    with httpx.Client(base_url=server.base_url, headers=server.headers(), timeout=10) as http:
        found = http.post("/ai/knowledge/search", json={"query": "asset paused", "limit": 3})
        body = found.json()
        assert found.status_code == 200 and body["has_more"] is False and len(body["data"]) == 3
        assert body["data"][0]["title"] == "asset_paused" and body["data"][0]["source"] == "error registry"
        assert [hit["score"] for hit in body["data"]] == sorted((hit["score"] for hit in body["data"]), reverse=True)
        assert "Deprecation" not in found.headers
        reply = _ok(
            http.post("/ai/conversations/cnv-1/messages", json={"content": "what does insufficient balance mean"}), 201
        )
        assert reply["conversation_id"] == "cnv-1" and reply["sources"]
        assert "insufficient_balance" in reply["content"]
        nothing = _ok(http.post("/ai/conversations/cnv-1/messages", json={"content": "zzzqqq"}), 201)
        assert nothing["sources"] == [] and "Nothing" in nothing["content"]
        old = http.post("/ai/search", json={"query": "asset paused", "limit": 3})
        assert old.status_code == 200 and old.json()["data"] == body["data"]
        assert old.headers["Deprecation"] == "@1795305600"  # RFC 9745 (issue 14: was "true")
        assert old.headers["Sunset"] == "Sat, 06 Feb 2027 00:00:00 GMT"
        assert "/v1/ai/knowledge/search" in old.headers["Link"]
        old_message = http.post("/ai/messages", json={"content": "rate limit"})
        assert old_message.status_code == 201 and old_message.headers["Sunset"]
        _error(http.post("/ai/knowledge/search", json={"query": ""}), 422, "field_invalid")
    document = httpx.get(f"{server.base_url}/openapi.json", timeout=10).json()
    assert document["paths"]["/ai/search"]["post"]["deprecated"] is True
    assert "deprecated" not in document["paths"]["/ai/knowledge/search"]["post"]


def test_rules_are_edited_in_the_draft_only(server: LiveServer) -> None:
    with httpx.Client(base_url=server.base_url, headers=server.headers(), timeout=10) as http:
        asset = _ok(http.post("/assets", json={"name": "Pts", "symbol": "PTS", "type": "points", "decimals": 0}), 201)
        programme = _ok(http.post("/reward-programs", json={"name": "Edits", "asset_id": asset["id"]}), 201)
        rule = _ok(
            http.post(
                "/reward-rules",
                json={
                    "program_id": programme["id"],
                    "event_type": "signup.completed",
                    "actions": [{"type": "issue", "amount": {"fixed": "10"}}],
                },
            ),
            201,
        )
        _ok(http.post(f"/reward-programs/{programme['id']}/publish"), 201)
        edited = _ok(
            http.patch(f"/reward-rules/{rule['id']}", json={"actions": [{"type": "issue", "amount": {"fixed": "15"}}]}),
            200,
        )
        assert edited["version"] is None and edited["actions"][0]["amount"] == {"fixed": "15"}
        bad = _error(
            http.patch(
                f"/reward-rules/{rule['id']}", json={"actions": [{"type": "issue", "amount": {"fixed": "1.5"}}]}
            ),
            422,
            "amount_too_many_decimals",
        )
        assert bad["details"]["field"] == "actions[0].amount.fixed"
        _ok(http.delete(f"/reward-rules/{rule['id']}"), 200)
        _error(
            http.patch(f"/reward-rules/{rule['id']}", json={"event_type": "x.y"}), 409, "programme_version_immutable"
        )
        versions = _ok(http.get(f"/reward-programs/{programme['id']}/versions"), 200)
        assert [(v["number"], [r["actions"][0]["amount"]["fixed"] for r in v["rules"]]) for v in versions] == [
            (1, ["10"]),
            (None, []),
        ]


def test_hostile_bodies_get_the_envelope_never_a_500(server: LiveServer) -> None:
    with httpx.Client(base_url=server.base_url, headers=server.headers(), timeout=30) as http:
        _error(http.post("/customers", content=b"[" * 100_000 + b"]" * 100_000), 422, "request_malformed")
        _error(http.post("/customers", content=b'{"external_id": "\xff\xfe"}'), 422, "request_malformed")
        huge = http.post(
            "/events",
            content=(
                b'{"type": "order.completed", "external_event_id": "huge-1", "customer_id": "nobody", '
                b'"data": {"amount": 1e999999999}}'
            ),
        )
        assert huge.status_code == 202, huge.text
        again = http.post(
            "/events",
            content=(
                b'{"type": "order.completed", "external_event_id": "huge-1", "customer_id": "nobody", '
                b'"data": {"amount": 1E+999999999}}'
            ),
        )
        assert again.status_code == 202 and again.json()["data"]["id"] == huge.json()["data"]["id"]


def test_post_events_fast_path_keeps_every_rule_of_the_contract(server: LiveServer) -> None:
    """POST /v1/events is answered before routing: the envelope, headers, auth and validation must still hold."""
    with httpx.Client(base_url=server.base_url, timeout=30) as http:
        unauthenticated = http.post("/events", json={"type": "x"})
        _error(unauthenticated, 401, "authentication_required")
        assert "ratelimit-limit" in unauthenticated.headers
        headers = server.headers()
        _error(http.post("/events", content=b"{not json", headers=headers), 422, "request_malformed")
        _error(http.post("/events", content=b"x" * 1_048_577, headers=headers), 413, "request_too_large")
        missing = _error(http.post("/events", json={"type": "order.completed"}, headers=headers), 422, "field_required")
        assert missing["details"]["field"] in {"external_event_id", "customer_id"}
        unknown = {"type": "a.b", "external_event_id": "f-1", "customer_id": "c", "colour": "red"}
        assert _error(http.post("/events", json=unknown, headers=headers), 422, "field_unknown")["details"][
            "field"
        ] == ("colour")
        wrong_env = server.headers("production", **{"X-Environment": "sandbox"})
        _error(http.post("/events", json=unknown, headers=wrong_env), 403, "environment_mismatch")
        body = {"type": "a.b", "external_event_id": "f-2", "customer_id": "c", "data": {"n": 1.10}}
        accepted = http.post("/events", json=body, headers={**headers, "X-Request-ID": "trace-fast-1"})
        event = _ok(accepted, 202)
        assert accepted.headers["x-request-id"] == "trace-fast-1"
        assert int(accepted.headers["ratelimit-remaining"]) >= 0
        assert _ok(http.get(f"/events/{event['id']}", headers=headers), 200)["external_event_id"] == "f-2"
