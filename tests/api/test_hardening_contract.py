"""Issue 14, items 7 and 16 (server side), against real servers on 127.0.0.1: every answer carries X-Request-ID and
the RateLimit headers (unhandled errors included), deprecated endpoints announce themselves on every answer
(RFC 9745 `Deprecation`, RFC 8594 `Sunset`, a `Link` without a URI template), a method a path does not have is
405 with `Allow` in the envelope, and the Python client reads the new deprecation headers."""

from __future__ import annotations

import json
import re
import warnings
from collections.abc import Iterator
from datetime import UTC, datetime
from decimal import Decimal
from email.utils import parsedate_to_datetime
from pathlib import Path
from typing import Any

import httpx
import pytest

from rewards_lab.artefacts import export
from rewards_lab.client import DeprecatedEndpointWarning, MethodNotAllowedError, RewardsClient
from rewards_lab.client._core import Call, Prepared, parse_response
from rewards_lab.contract.errors import REGISTRY
from rewards_lab.contract.permissions import Permission
from tests.live_server import LiveServer, bootstrap, cli, free_port, spawn, start_server, wait_until_serving

MAX_REQUESTS_TO_429 = 40
DEPRECATED_PATHS = ("/ai/search", "/ai/messages")
# A server whose two service functions raise what no handler expects (a stand-in for any bug in a handler).
FAULTY_SERVER = """
import functools, sys
from rewards_lab.service import customers, knowledge
def broken(original):
    @functools.wraps(original)  # keeps the annotations the routes read
    def raising(*args, **kwargs):
        raise RuntimeError("a bug no handler expects")
    return raising
customers.get_customer = broken(customers.get_customer)
knowledge.search = broken(knowledge.search)
from rewards_lab.cli.main import main
sys.exit(main(sys.argv[1:]))
"""


def _start_faulty(db: Path, *bootstrap_args: str) -> LiveServer:
    boot = bootstrap(db, "Faulty", *bootstrap_args)
    port = free_port()
    log = (db.parent / f"{db.stem}.server.log").open("wb")
    command = cli("serve", "--db", str(db), "--port", str(port))
    process = spawn([command[0], "-c", FAULTY_SERVER, *command[3:]], log)
    base_url = f"http://127.0.0.1:{port}/v1"
    wait_until_serving(base_url, process, log)
    keys = boot["api_keys"]
    assert isinstance(keys, dict)
    return LiveServer(db, base_url, str(boot["organization_id"]), keys, process, log, boot)


@pytest.fixture(scope="module")
def faulty(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LiveServer]:
    live = _start_faulty(tmp_path_factory.mktemp("faulty") / "faulty.duckdb")
    yield live
    live.stop()


@pytest.fixture(scope="module")
def limited(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LiveServer]:
    live = start_server(tmp_path_factory.mktemp("limited") / "limited.duckdb", "Limited", "--plan", "public")
    yield live
    live.stop()


def _has_common_headers(response: httpx.Response) -> None:
    assert re.fullmatch(r"[A-Za-z0-9._:\-]{1,128}", response.headers.get("X-Request-ID", "")), response.headers
    for name in ("RateLimit-Limit", "RateLimit-Remaining", "RateLimit-Reset"):
        assert response.headers.get(name, "").isdigit(), (name, response.headers)
    body = response.json()
    assert body["meta"]["request_id"] == response.headers["X-Request-ID"]


def _announces_deprecation(response: httpx.Response, successor: str | None) -> None:
    deprecation = response.headers.get("Deprecation", "")
    assert re.fullmatch(r"@[0-9]+", deprecation), response.headers
    deprecated_at = datetime.fromtimestamp(int(deprecation[1:]), UTC)
    sunset = parsedate_to_datetime(response.headers["Sunset"])
    assert sunset == datetime(2027, 2, 6, tzinfo=UTC) and deprecated_at < sunset
    assert response.headers["Sunset"] == "Sat, 06 Feb 2027 00:00:00 GMT"
    link = response.headers["Link"]
    assert "{" not in link and "}" not in link, link
    assert 'rel="deprecation"' in link
    if successor is not None:
        assert f'</v1{successor}>; rel="successor-version"' in link


def test_an_unhandled_error_is_the_envelope_with_request_id_and_ratelimit_headers(faulty: LiveServer) -> None:
    with httpx.Client(base_url=faulty.base_url, headers=faulty.headers(), timeout=10) as http:
        response = http.get("/customers/cus_any", headers={"X-Request-ID": "trace-500"})
        assert response.status_code == 500, response.text
        _has_common_headers(response)
        assert response.headers["X-Request-ID"] == "trace-500"
        error = response.json()["error"]
        assert (error["type"], error["code"]) == ("service_error", "internal_error")
        assert "bug" not in response.text and "Traceback" not in response.text  # never the exception's text
        assert http.get("/customers").status_code == 200  # the server is still serving


def test_a_deprecated_endpoint_announces_itself_on_every_answer(faulty: LiveServer) -> None:
    with httpx.Client(base_url=faulty.base_url, timeout=10) as http:
        unauthenticated = http.post("/ai/search", json={"query": "limits"})
        invalid = http.post("/ai/search", headers=faulty.headers(), json={"query": ""})
        crashed = http.post("/ai/search", headers=faulty.headers(), json={"query": "limits"})
        wrong_method = http.get("/ai/search", headers=faulty.headers())
        message = http.post("/ai/messages", headers=faulty.headers(), json={"content": "What is a cursor?"})
        message_invalid = http.post("/ai/messages", headers=faulty.headers(), json={"nope": 1})
        successor = http.post("/ai/knowledge/search", headers=faulty.headers(), json={"query": "limits"})
    expected = [(unauthenticated, 401), (invalid, 422), (crashed, 500), (wrong_method, 405)]
    for response, status in expected:
        assert response.status_code == status, response.text
        _has_common_headers(response)
        _announces_deprecation(response, "/ai/knowledge/search")
    for response, status in ((message, 201), (message_invalid, 422)):
        assert response.status_code == status, response.text
        _has_common_headers(response)
        _announces_deprecation(response, None)
        assert "/v1/openapi.json#/paths/~1ai~1messages/post" in response.headers["Link"]
    assert successor.status_code == 500 and not {"Deprecation", "Sunset", "Link"} & set(successor.headers)


def test_a_deprecated_endpoint_announces_itself_when_rate_limited(limited: LiveServer) -> None:
    with httpx.Client(base_url=limited.base_url, headers=limited.headers(), timeout=10) as http:
        for _ in range(MAX_REQUESTS_TO_429):
            response = http.post("/ai/messages", json={"content": "rate limits?"})
            if response.status_code == 429:
                break
            assert response.status_code == 201, response.text
            _announces_deprecation(response, None)
        else:  # the Public plan allows 100 a minute: the limit is not reached in MAX_REQUESTS_TO_429
            for _ in range(120):
                response = http.post("/ai/messages", json={"content": "rate limits?"})
                if response.status_code == 429:
                    break
    assert response.status_code == 429, response.text
    assert response.json()["error"]["code"] == "rate_limit_exceeded"
    _has_common_headers(response)
    assert response.headers["RateLimit-Remaining"] == "0"
    _announces_deprecation(response, None)


def test_a_method_the_path_does_not_have_is_405_with_allow_in_the_envelope(faulty: LiveServer) -> None:
    with httpx.Client(base_url=faulty.base_url, headers=faulty.headers(), timeout=10) as http:
        traced = http.request("TRACE", "/customers")
        deleted = http.delete("/customers")
        on_an_id = http.put("/webhooks/wh_missing")
        unknown = http.get("/no/such/path")
    for response, allowed in (
        (traced, {"GET", "POST"}),
        (deleted, {"GET", "POST"}),
        (on_an_id, {"GET", "DELETE"}),
    ):
        assert response.status_code == 405, response.text
        _has_common_headers(response)
        assert {m.strip() for m in response.headers["Allow"].split(",")} == allowed
        error = response.json()["error"]
        assert (error["type"], error["code"]) == ("method_not_allowed", "method_not_allowed")
        assert set(error["details"]["allowed"]) == allowed
    assert unknown.status_code == 404 and unknown.json()["error"]["code"] == "route_not_found"
    _has_common_headers(unknown)


def test_the_client_reads_the_rfc_9745_deprecation_headers(faulty: LiveServer) -> None:
    with RewardsClient(faulty.base_url, faulty.keys["sandbox"], faulty.organization_id, "sandbox") as api:
        with pytest.warns(DeprecatedEndpointWarning) as caught:
            api.deprecated_message("What is a cursor?")
        with pytest.raises(MethodNotAllowedError) as refused:
            api.call(Call("TRACE", "/customers", lambda data: data))  # a method the path does not have
    warning = caught[0].message
    assert isinstance(warning, DeprecatedEndpointWarning) and caught[0].filename == __file__
    assert warning.sunset_at == datetime(2027, 2, 6, tzinfo=UTC)
    assert warning.deprecated_at is not None and warning.deprecated_at < warning.sunset_at
    assert warning.successor is None and warning.deprecation_info is not None
    assert warning.deprecation_info.endswith("/v1/openapi.json#/paths/~1ai~1messages/post")
    assert "2027-02-06" in str(warning)
    assert refused.value.http_status == 405 and "POST" in refused.value.details["allowed"]


def test_the_client_warns_on_a_deprecated_endpoints_failure_too() -> None:
    prepared = Prepared("POST", "http://127.0.0.1/v1/ai/search", {}, {"X-Request-ID": "r"}, b"{}")
    headers = {
        "Deprecation": "@1795305600",
        "Sunset": "Sat, 06 Feb 2027 00:00:00 GMT",
        "Link": '</v1/openapi.json#/paths/~1ai~1search/post>; rel="deprecation", '
        '</v1/ai/knowledge/search>; rel="successor-version"',
    }
    body = {"error": {"type": "validation_error", "code": "field_invalid", "message": "m", "details": {}}}
    response = httpx.Response(422, headers=headers, json={**body, "meta": {"request_id": "r", "version": "v1"}})
    with pytest.warns(DeprecatedEndpointWarning) as caught:
        parse_response(Call("POST", "/ai/search", lambda data: data), prepared, response)
    warning = caught[0].message
    assert isinstance(warning, DeprecatedEndpointWarning)
    assert warning.successor == "/v1/ai/knowledge/search"
    assert warning.deprecated_at == datetime(2026, 11, 22, tzinfo=UTC)
    legacy = httpx.Response(200, headers={"Deprecation": "true"}, json={"data": 1, "meta": {}})
    with warnings.catch_warnings(record=True) as old_form:
        warnings.simplefilter("always")
        parse_response(Call("POST", "/ai/search", lambda data: data), prepared, legacy)
    assert len(old_form) == 1 and old_form[0].message.deprecated_at is None  # type: ignore[union-attr]


# Item 15: the document declares every header, every failure by status with its codes, links and servers. -----
@pytest.fixture(scope="module")
def document() -> dict[str, Any]:
    return export.served_document()


def _resolve(document: dict[str, Any], item: dict[str, Any]) -> dict[str, Any]:
    ref = item.get("$ref")
    if not isinstance(ref, str):
        return item
    node: Any = document
    for part in ref.removeprefix("#/").split("/"):
        node = node[part]
    return dict(node)


def test_the_document_names_servers_and_every_request_header(document: dict[str, Any]) -> None:
    assert document["servers"][0]["url"] == "/v1" and "X-Environment" in document["servers"][0]["description"]
    assert all(not path.startswith("/v1") for path in document["paths"])
    assert document["components"]["securitySchemes"]["bearer"] == {
        "type": "http",
        "scheme": "bearer",
        "description": document["components"]["securitySchemes"]["bearer"]["description"],
    }
    for path, item in document["paths"].items():
        for method, spec in item.items():
            headers = {
                p["name"]: p for p in (_resolve(document, raw) for raw in spec["parameters"]) if p["in"] == "header"
            }
            assert {"X-Organization-ID", "X-Request-ID", "X-SDK-Version"} <= set(headers), (method, path)
            if path == "/auth/login":
                assert spec["security"] == [] and not headers["X-Organization-ID"]["required"]
                continue
            assert headers["X-Organization-ID"]["required"] and headers["X-Environment"]["required"]
            assert headers["X-Environment"]["schema"]["enum"] == ["sandbox", "production"]
            assert "Authorization" not in headers  # a security scheme, not a parameter (OpenAPI ignores it there)
            idempotent = spec["x-idempotent"]
            if idempotent == "none":
                assert "Idempotency-Key" not in headers, (method, path)
            else:
                assert headers["Idempotency-Key"]["required"] is (idempotent == "required"), (method, path)


def test_every_response_declares_its_headers_and_every_failure_its_status_and_codes(document: dict[str, Any]) -> None:
    for path, item in document["paths"].items():
        for method, spec in item.items():
            codes = set(spec["x-error-codes"])
            assert {"rate_limit_exceeded", "internal_error"} <= codes and codes <= set(REGISTRY), (method, path)
            declared: set[str] = set()
            for status, raw in spec["responses"].items():
                response = _resolve(document, raw)
                headers = set(response["headers"])
                assert {"X-Request-ID", "RateLimit-Limit", "RateLimit-Remaining", "RateLimit-Reset"} <= headers
                assert ({"Deprecation", "Sunset", "Link"} <= headers) is bool(spec.get("deprecated")), (method, path)
                if status.startswith("2") or status == "default":
                    continue
                narrowed = response["content"]["application/json"]["schema"]["allOf"][1]["properties"]["error"]
                status_codes = set(narrowed["properties"]["code"]["enum"])
                assert all(REGISTRY[code].http_status == int(status) for code in status_codes), (method, path)
                declared |= status_codes
            assert declared == codes, (method, path)  # each code under exactly its status
            assert "500" in spec["responses"] and "429" in spec["responses"]
            for code, fields in spec.get("x-refused-beyond-schema", {}).items():
                assert code in codes and fields, (method, path)


def test_stateful_links_lead_from_what_makes_a_resource_to_what_takes_its_id(document: dict[str, Any]) -> None:
    by_id = {
        spec["operationId"]: (path, method) for path, item in document["paths"].items() for method, spec in item.items()
    }

    def targets(path: str, method: str, status: str) -> dict[tuple[str, str], dict[str, str]]:
        links = document["paths"][path][method]["responses"][status]["links"]
        return {by_id[link["operationId"]]: link["parameters"] for link in links.values()}

    webhook_links = targets("/webhooks", "post", "201")
    assert webhook_links[("/webhooks/{webhook_id}", "get")] == {"webhook_id": "$response.body#/data/id"}
    assert ("/webhooks/{webhook_id}/test", "post") in webhook_links
    assert ("/customers/{customer_id}", "get") in targets("/customers", "post", "201")
    for item in document["paths"].values():
        for spec in item.values():
            for response in spec["responses"].values():
                for name, link in response.get("links", {}).items():
                    assert set(link) == {"operationId", "parameters"}  # no operationRef: `{` is not a URI's
                    target, method = by_id[link["operationId"]]
                    assert name == link["operationId"] and method in document["paths"][target]
                    assert set(link["parameters"]) == set(re.findall(r"{(\w+)}", target))


def test_the_document_declares_what_the_service_accepts(document: dict[str, Any]) -> None:
    schemas = document["components"]["schemas"]
    permissions = schemas["ApiKeyCreate"]["properties"]["permissions"]["items"]["enum"]
    assert set(permissions) == {p.value for p in Permission}
    url = schemas["WebhookCreate"]["properties"]["url"]
    assert url["format"] == "uri" and re.match(url["pattern"], "HTTPS://x") and not re.match(url["pattern"], "ftp://x")
    amount = schemas["IssueRequest"]["properties"]["amount"]["pattern"]
    assert all(re.fullmatch(amount, good) for good in ("1", "0.01", "12.50", "007"))
    assert not any(re.fullmatch(amount, bad) for bad in ("0", "0.00", "-1", "1.", ".5", "1e3"))
    usage = {p["name"]: p["schema"] for p in document["paths"]["/developer/usage"]["get"]["parameters"] if "name" in p}
    assert usage["from"] == usage["to"] == {"type": "string", "format": "date"}
    logs = document["paths"]["/developer/logs"]["get"]["parameters"]
    assert {p["name"]: p["schema"].get("format") for p in logs if p.get("name") in ("from", "to")} == {
        "from": "date-time",
        "to": "date-time",
    }


def test_integral_numbers_and_an_empty_cursor_are_accepted_as_the_document_says(limited: LiveServer) -> None:
    # production: its own rate-limit window (the sandbox one is spent by the 429 test)
    with httpx.Client(base_url=limited.base_url, headers=limited.headers("production"), timeout=10) as http:
        found = http.post("/ai/knowledge/search", content=b'{"query": "limits", "limit": 2.0}')
        asset = http.post("/assets", content=b'{"name": "Miles", "symbol": "MI", "type": "points", "decimals": 2.0}')
        listed = http.get("/assets", params={"cursor": "", "limit": "3.0"})
        fraction = http.get("/assets", params={"limit": "2.5"})
        enormous = http.get("/assets", params={"limit": "9" * 40})
    assert found.status_code == 200 and len(found.json()["data"]) == 2, found.text
    assert asset.status_code == 201 and asset.json()["data"]["decimals"] == 2, asset.text
    assert listed.status_code == 200 and listed.json()["data"][0]["symbol"] == "MI", listed.text
    for refused in (fraction, enormous):
        assert refused.status_code == 422 and refused.json()["error"]["details"]["field"] == "limit"


def test_a_webhook_url_is_an_rfc_3986_uri_as_the_document_says(faulty: LiveServer) -> None:
    with httpx.Client(base_url=faulty.base_url, headers=faulty.headers(), timeout=10) as http:
        for url in ("https://\x0f\xa9h", "https://exa mple.test/hook", "https://hooks.test/%zz"):
            refused = http.post("/webhooks", json={"url": url, "events": ["asset.paused"]})
            assert refused.status_code == 422, (url, refused.text)
            assert refused.json()["error"]["code"] == "webhook_url_invalid"
            assert refused.json()["error"]["details"]["field"] == "url"
        scheme = http.post("/webhooks", json={"url": "ftp://hooks.test/x", "events": ["asset.paused"]})
    assert scheme.status_code == 422 and scheme.json()["error"]["code"] == "webhook_url_invalid"


@pytest.mark.parametrize(
    ("model", "body"),
    [
        (
            "RuleCreate",
            {
                "program_id": "p",
                "event_type": "a",
                "actions": [{"type": "issue", "amount": {"per": "x", "rate": "1.5"}}],
            },
        ),
        (
            "RuleCreate",
            {"program_id": "p", "event_type": "a", "actions": [{"type": "issue", "amount": {"per": "x", "rate": 0}}]},
        ),
        (
            "RuleCreate",
            {
                "program_id": "p",
                "event_type": "a",
                "actions": [{"type": "issue", "amount": {"per": "x", "rate": "-1"}}],
            },
        ),
        (
            "RuleCreate",
            {"program_id": "p", "event_type": "a", "actions": [{"type": "issue", "amount": {"fixed": "0"}}]},
        ),
        (
            "RuleCreate",
            {
                "program_id": "p",
                "event_type": "a",
                "conditions": [{"field": "f", "operator": "gt", "value": "-2.5"}],
                "actions": [{"type": "issue", "amount": {"fixed": "1"}}],
            },
        ),
        ("KnowledgeSearch", {"query": "q", "limit": Decimal("3.0")}),
        ("KnowledgeSearch", {"query": "q", "limit": Decimal("3.5")}),
        ("ApiKeyCreate", {"name": "n", "permissions": ["customers.view"]}),
        ("ApiKeyCreate", {"name": "n", "permissions": ["customers.everything"]}),
        ("WebhookCreate", {"url": "https://hooks.test/x", "events": ["wallet.frozen"]}),
        ("WebhookCreate", {"url": "https://hooks.test/x", "events": ["wallet.melted"]}),
        ("CustomerCreate", {"external_id": "c", "email": "a\x1db@hooks.test"}),
        ("CustomerCreate", {"external_id": "c", "email": "\u00fc@hooks.test"}),
        ("IssueRequest", {"wallet_id": "w", "amount": "0.00", "reason": "r"}),
        ("IssueRequest", {"wallet_id": "w", "amount": "0.01", "reason": "r"}),
    ],
)
def test_the_schema_and_the_validator_agree(document: dict[str, Any], model: str, body: dict[str, Any]) -> None:
    """A body the document's schema accepts is one the service's request validation (and amount rules) accepts."""
    from jsonschema import Draft202012Validator

    from rewards_lab.api.routes import REQUEST_MODELS
    from rewards_lab.contract.errors import ServiceError
    from rewards_lab.contract.validation import validate
    from rewards_lab.domain.money import parse_amount

    schema = {"$ref": f"#/components/schemas/{model}", "components": document["components"]}
    as_json = json.loads(json.dumps(body, default=float))
    by_schema = Draft202012Validator(schema).is_valid(as_json)
    try:
        validated = validate(REQUEST_MODELS[model], body)
        for amount in (getattr(validated, "amount", None),):
            if isinstance(amount, str):
                parse_amount(amount, 8)  # the most decimals any asset has: only sign and zero are refused here
        by_service = model != "ApiKeyCreate" or set(body["permissions"]) <= {p.value for p in Permission}
        by_service = by_service and (model != "WebhookCreate" or body["events"][0] != "wallet.melted")
        by_service = by_service and not any(a["amount"].get("fixed") == "0" for a in body.get("actions", []))
    except ServiceError:
        by_service = False
    assert by_schema == by_service, (model, body, by_schema)
